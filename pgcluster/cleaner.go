package pgcluster

import (
	"context"
	"fmt"
)

// cleanBatch bounds the rows one cleaner statement deletes.
const cleanBatch = 1000

// cleaner keeps the cluster tables bounded (K6): every CleanInterval it
// deletes, in batches of cleanBatch, the finished work items older than
// Retention, and the task-less replies (and the event rows of the release
// before the task log) older than Retention. (The task log
// itself is bounded by tasklog.Trimmer and goes with its task.) Every
// instance runs one; concurrent deletes of the same rows are harmless.
type cleaner struct {
	service
	c *Cluster
}

func newCleaner(c *Cluster) *cleaner {
	cl := &cleaner{c: c}
	cl.init()
	return cl
}

// Start starts the cleaning loop.
func (cl *cleaner) Start() { cl.start(cl.loop) }

func (cl *cleaner) loop(ctx context.Context) {
	every(ctx, cl.c.opts.CleanInterval, cl.c.opts.Logger, "cleaning", cl.clean)
}

// clean runs one pass: batches until a batch comes back short.
func (cl *cleaner) clean(ctx context.Context) error {
	c := cl.c
	for {
		tag, err := c.pool.Exec(ctx, c.sql.cleanWork, c.opts.Retention, cleanBatch)
		if err != nil {
			return fmt.Errorf("pgcluster: clean work items: %w", err)
		}
		c.stats.CleanedWorkItems.Add(tag.RowsAffected())
		if tag.RowsAffected() < cleanBatch {
			break
		}
	}
	for _, stmt := range []string{c.sql.cleanReplies, c.sql.cleanLegacy} {
		for {
			tag, err := c.pool.Exec(ctx, stmt, c.opts.Retention, cleanBatch)
			if err != nil {
				return fmt.Errorf("pgcluster: clean: %w", err)
			}
			c.stats.CleanedEvents.Add(tag.RowsAffected())
			if tag.RowsAffected() < cleanBatch {
				break
			}
		}
	}
	return nil
}
