package pushdelivery

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/jackc/pgx/v5"
)

// maxDirty bounds the tasks Touch keeps: past it the next reopen is of
// every record.
const maxDirty = 10_000

// Touch implements Toucher: the next Claim reopens task's Done records if
// the task has moved past them. An ID no task can have (PostgreSQL text
// holds no NUL and only valid UTF-8; S8's length) is ignored.
func (p *PG) Touch(task a2a.TaskID) {
	id := string(task)
	if id == "" || len(id) > engine.MaxIDBytes || !utf8.ValidString(id) || strings.IndexByte(id, 0) >= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.mu.dirty) < maxDirty {
		p.mu.dirty[task] = struct{}{}
	} else {
		p.mu.full = true
	}
}

// reopen clears Done on the records whose task has moved past Delivered:
// those of the touched tasks, and, in a rescan, every record. A rescan
// starts every Rescan (and after Touch dropped a task) once the last one
// has ended; each reopen reads the next batch of it (rescanBatch Done
// records), so that no Claim waits for all of them. A touched task with
// a leased record stays touched: its holder's commit may be storing Done
// without seeing the write that touched it. A failure is logged, not
// returned, so that claims go on; touched tasks stay touched, and a
// rescan's batch is read again.
func (p *PG) reopen(ctx context.Context, now time.Time) {
	p.mu.Lock()
	if !p.mu.scanning && (p.mu.full || p.mu.lastScan.IsZero() || now.Sub(p.mu.lastScan) >= p.opts.Rescan) {
		p.mu.scanning, p.mu.full, p.mu.lastScan, p.mu.after = true, false, now, [2]string{}
	}
	scanning, after := p.mu.scanning, p.mu.after
	ids := make([]string, 0, len(p.mu.dirty))
	for id := range p.mu.dirty {
		ids = append(ids, string(id))
	}
	clear(p.mu.dirty)
	p.mu.Unlock()
	if scanning {
		p.rescanBatch(ctx, after)
	}
	if len(ids) == 0 {
		return
	}
	kept, err := p.reopenTasks(ctx, ids)
	if err != nil {
		p.opts.Logger.Warn("pushdelivery: reopen the finished records of touched tasks", "tasks", len(ids), "err", err)
		kept = ids
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range kept {
		if len(p.mu.dirty) < maxDirty {
			p.mu.dirty[a2a.TaskID(id)] = struct{}{}
		} else {
			p.mu.full = true
		}
	}
}

// rescanBatch reopens the next batch of the rescan after key after, and
// moves the rescan on (or ends it after its last batch).
func (p *PG) rescanBatch(ctx context.Context, after [2]string) {
	var n int
	var last [2]string
	if err := p.pool.QueryRow(ctx, p.sql.rescan, after[0], after[1], p.batch).Scan(&n, &last[0], &last[1]); err != nil {
		p.opts.Logger.Warn("pushdelivery: reopen finished records (rescan)", "err", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.scanning || p.mu.after != after {
		return // another reopen read this batch too and moved on
	}
	if n < p.batch {
		p.mu.scanning = false
	}
	p.mu.after = last
}

// reopenTasks reopens the records of tasks ids and returns those of ids
// with a leased record.
func (p *PG) reopenTasks(ctx context.Context, ids []string) ([]string, error) {
	rows, err := p.pool.Query(ctx, p.sql.reopenTasks, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
