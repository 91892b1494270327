package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/a2astore/a2astore/engine"
)

// rescuer takes back the work of dead instances (K4): every quarter of
// the lease timeout it returns the items whose lease expired to the queue
// (another instance re-runs them: a takeover) and finishes as FAILED the
// tasks whose attempts are used up. Every instance runs one; the
// statements are safe to run concurrently (SKIP LOCKED, and a finish is a
// conditional write by revision), so no election is needed.
type rescuer struct {
	service
	c *Cluster
}

func newRescuer(c *Cluster) *rescuer {
	r := &rescuer{c: c}
	r.init()
	return r
}

// Start starts the rescue loop.
func (r *rescuer) Start() { r.start(r.loop) }

func (r *rescuer) interval() time.Duration { return max(r.c.opts.LeaseTimeout/4, 10*time.Millisecond) }

func (r *rescuer) loop(ctx context.Context) {
	every(ctx, r.interval(), r.c.opts.Logger, "lease rescue", r.rescue)
}

// rescue runs one pass.
func (r *rescuer) rescue(ctx context.Context) error {
	c := r.c
	rows, err := c.pool.Query(ctx, c.sql.expired, cancelAttempts, c.opts.MaxAttempts)
	if err != nil {
		return fmt.Errorf("pgcluster: rescue: %w", err)
	}
	type item struct {
		id      int64
		task    a2a.TaskID
		kind    string
		token   *string
		attempt int
	}
	var exhausted []item
	for rows.Next() {
		var it item
		if err := rows.Scan(&it.id, &it.task, &it.kind, &it.token, &it.attempt); err != nil {
			rows.Close()
			return fmt.Errorf("pgcluster: rescue: %w", err)
		}
		exhausted = append(exhausted, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgcluster: rescue: %w", err)
	}
	for _, it := range exhausted {
		token := ""
		if it.token != nil {
			token = *it.token
		}
		cause := fmt.Errorf("lease expired on attempt %d", it.attempt)
		if err := c.giveUp(ctx, it.id, token, it.task, it.kind, it.attempt, cause); err != nil {
			return err
		}
	}
	rows, err = c.pool.Query(ctx, c.sql.rescue, cancelAttempts, c.opts.MaxAttempts)
	if err != nil {
		return fmt.Errorf("pgcluster: rescue: %w", err)
	}
	n := 0
	for rows.Next() {
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgcluster: rescue: %w", err)
	}
	if n > 0 {
		c.stats.Takeovers.Add(int64(n))
		c.opts.Logger.Warn("pgcluster: took over work whose lease expired", "items", n)
		if _, err := c.pool.Exec(ctx, "SELECT pg_notify($1, 'w')", channel(c.opts.Schema)); err != nil {
			return fmt.Errorf("pgcluster: rescue: %w", err)
		}
	}
	return nil
}

// giveUpReason is the status message of a task whose execution could not
// be completed in MaxAttempts attempts.
const giveUpReason = "the agent execution failed or its server died %d times; send the message again to retry"

// giveUp finishes a work item that is out of attempts: an execution's task
// becomes FAILED with a reason, a cancelation's task is canceled by the
// store itself (S9; its executing instance stops at its next heartbeat,
// K8, or at once on the 'c' that finishing the item sends), unless the
// task has ended already; then the item is done. The task goes first, so
// a write that fails, or an instance dying in between, leaves the item
// for a later pass, which finds the task ended.
func (c *Cluster) giveUp(ctx context.Context, id int64, token string, task a2a.TaskID, kind string, attempt int, cause error) error {
	var err error
	switch kind {
	case "execute":
		err = c.failTask(ctx, task, fmt.Sprintf(giveUpReason, attempt))
	case "cancel":
		err = c.cancelTask(ctx, task)
	}
	if err != nil {
		return err
	}
	var tok any = token
	if token == "" {
		tok = nil
	}
	if _, err := c.pool.Exec(ctx, c.sql.finish, id, tok, "gave up: "+cause.Error()); err != nil {
		return fmt.Errorf("pgcluster: finish work item: %w", err)
	}
	if kind == "cancel" {
		_ = c.notify(ctx, c.pool, 'c', task)
	}
	c.stats.GaveUp.Add(1)
	c.opts.Logger.Warn("pgcluster: gave up on work item", "task", task, "kind", kind, "attempts", attempt, "cause", cause)
	return nil
}

// cancelTask cancels task through the store (S9) unless it has ended or
// does not exist.
func (c *Cluster) cancelTask(ctx context.Context, id a2a.TaskID) error {
	_, err := c.opts.Log.Cancel(ctx, id)
	if err != nil && !errors.Is(err, engine.ErrNotCancelable) && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("pgcluster: cancel task: %w", err)
	}
	return nil
}

// failTask sets task FAILED with reason unless it has ended.
func (c *Cluster) failTask(ctx context.Context, id a2a.TaskID, reason string) error {
	for range 10 {
		st, err := c.opts.TaskStore.Get(ctx, id)
		if errors.Is(err, a2a.ErrTaskNotFound) {
			return nil // never created: nothing to finish
		}
		if err != nil {
			return fmt.Errorf("pgcluster: finish task: %w", err)
		}
		task := *st.Task
		if task.Status.State.Terminal() {
			return nil
		}
		now := time.Now().UTC()
		task.Status = a2a.TaskStatus{
			State:     a2a.TaskStateFailed,
			Message:   a2a.NewMessageForTask(a2a.MessageRoleAgent, &task, a2a.NewTextPart(reason)),
			Timestamp: &now,
		}
		ev := &a2a.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: task.Status}
		// The update logs ev in its transaction: readers get it (K7).
		_, err = c.opts.TaskStore.Update(ctx, &taskstore.UpdateRequest{Task: &task, Event: ev, PrevVersion: st.Version})
		if errors.Is(err, taskstore.ErrConcurrentModification) {
			continue
		}
		if err != nil {
			return fmt.Errorf("pgcluster: finish task: %w", err)
		}
		return nil
	}
	return fmt.Errorf("pgcluster: finish task: too many concurrent writers: %w", taskstore.ErrConcurrentModification)
}
