package pgcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"

	"github.com/a2astore/a2astore/engine"
)

// rescuer takes back the work of dead instances (K4): every quarter of
// the lease timeout it returns the items whose lease expired to the queue
// (another instance re-runs them: a takeover) and gives up the items
// whose attempts are used up (giveUp). Every instance runs one; the
// statements are safe to run concurrently (SKIP LOCKED, and a finish is a
// conditional write by revision), so no election is needed.
//
// A give-up that fails never stops the pass: the item is set aside —
// counted (Stats.GiveUpsSetAside), logged once, skipped by this
// instance's passes for a while that doubles with each failure (from one
// rescue interval up to maxAside of them) — and the pass goes on with
// the other items and the takeovers.
type rescuer struct {
	service
	c *Cluster

	mu struct {
		sync.Mutex
		// aside are the items whose give-up failed, by ID.
		aside map[int64]*asideItem
	}
}

// asideItem is an item set aside: skipped until until, then tried again
// (a failure doubles wait).
type asideItem struct {
	until time.Time
	wait  time.Duration
}

// maxAside bounds how many rescue intervals an item stays set aside.
const maxAside = 16

func newRescuer(c *Cluster) *rescuer {
	r := &rescuer{c: c}
	r.mu.aside = make(map[int64]*asideItem)
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
	rows, err := c.pool.Query(ctx, c.sql.expired, cancelAttempts, c.opts.MaxAttempts, r.skipped(time.Now()))
	if err != nil {
		return fmt.Errorf("pgcluster: rescue: %w", err)
	}
	var exhausted []workItem
	for rows.Next() {
		var it workItem
		var token *string
		var body []byte
		if err := rows.Scan(&it.id, &it.task, &it.kind, &body, &token, &it.attempt); err != nil {
			rows.Close()
			return fmt.Errorf("pgcluster: rescue: %w", err)
		}
		if token != nil {
			it.token = *token
		}
		var p workqueue.Payload
		if json.Unmarshal(body, &p) == nil {
			it.payload = &p
		}
		exhausted = append(exhausted, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgcluster: rescue: %w", err)
	}
	for _, it := range exhausted {
		token := newToken()
		tag, err := c.pool.Exec(ctx, c.sql.takeExpired, it.id, it.token, token)
		if err == nil && tag.RowsAffected() == 0 {
			continue // renewed by its holder, or taken by another rescuer, since the list
		}
		it.token = token
		cause := fmt.Errorf("lease expired on attempt %d", it.attempt)
		if err == nil {
			err = c.giveUp(ctx, it, cause)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.settle(it, err)
	}
	r.prune(time.Now())
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

// skipped lists the items set aside until after now.
func (r *rescuer) skipped(now time.Time) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int64, 0, len(r.mu.aside))
	for id, a := range r.mu.aside {
		if now.Before(a.until) {
			ids = append(ids, id)
		}
	}
	return ids
}

// settle records the give-up of it: a failure sets it aside (counted and
// logged the first time, its wait doubled after), a success clears it.
func (r *rescuer) settle(it workItem, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.mu.aside, it.id)
		return
	}
	a := r.mu.aside[it.id]
	if a == nil {
		a = &asideItem{wait: r.interval()}
		r.mu.aside[it.id] = a
		r.c.stats.GiveUpsSetAside.Add(1)
		r.c.opts.Logger.Warn("pgcluster: giving up on a work item failed; set aside, tried again later",
			"task", it.task, "kind", it.kind, "attempts", it.attempt, "error", err)
	} else {
		a.wait = min(2*a.wait, maxAside*r.interval())
	}
	a.until = time.Now().Add(a.wait)
}

// prune forgets the items set aside whose time came and that the pass did
// not see again (another instance finished them).
func (r *rescuer) prune(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, a := range r.mu.aside {
		if !now.Before(a.until.Add(a.wait)) {
			delete(r.mu.aside, id)
		}
	}
}

// workItem is a work item to give up.
type workItem struct {
	id      int64
	token   string // "" when its lease expired (no holder)
	task    a2a.TaskID
	kind    string
	attempt int
	payload *workqueue.Payload // nil when undecodable
}

// giveUpReason is the status message of a task whose execution could not
// be completed in MaxAttempts attempts.
const giveUpReason = "the agent execution failed or its server died %d times; send the message again to retry"

// giveUp finishes a work item that is out of attempts. An execution whose
// message the answered check finds answered is completed as answered
// (K8: its task is left as the answer left it). Otherwise an execution's
// task becomes FAILED with a reason (failTask) — or, when no task was
// ever stored, its callers get ErrGaveUp (a gave-up row) — and a
// cancelation's task is canceled by the store itself (S9; its executing
// instance stops at its next heartbeat, K8, or at once on the 'c' that
// finishing the item sends), unless the task has ended already; then the
// item is done, notifying 'd' (an execution) or 'c' (a cancelation). The
// task goes first, so a write that fails, or an instance dying in
// between, leaves the item for a later pass, which finds the task ended
// (or writes one more gave-up row, which changes nothing for a reader:
// the first ends it).
func (c *Cluster) giveUp(ctx context.Context, it workItem, cause error) error {
	outcome, kind := "gave up: "+cause.Error(), byte('d')
	switch it.kind {
	case workqueue.PayloadTypeExecute:
		done, err := c.failTask(ctx, it.task, it.payload, fmt.Sprintf(giveUpReason, it.attempt))
		if err != nil {
			return err
		}
		if done {
			outcome = outcomeAnswered
		}
	case workqueue.PayloadTypeCancel:
		kind = 'c'
		if err := c.cancelTask(ctx, it.task); err != nil {
			return err
		}
	}
	if err := c.finishItem(ctx, it.id, it.token, it.task, outcome, kind); err != nil {
		return err
	}
	if outcome == outcomeAnswered {
		c.stats.Answered.Add(1)
		return nil
	}
	c.stats.GaveUp.Add(1)
	c.opts.Logger.Warn("pgcluster: gave up on work item", "task", it.task, "kind", it.kind, "attempts", it.attempt, "cause", cause)
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

// failTask sets task FAILED with reason unless its message p was answered
// (answered reports true then, and nothing is written) or the task has
// ended. The answered check runs after the read of the task whose
// version the FAILED write is conditional on: an answer committed after
// the check (a write of a stalled execution, in flight when its lease
// ran out) makes that write conflict, and the next turn finds it
// answered (K8) — checked before the read, such an answer was
// overwritten with FAILED. A task the store refuses the reason for (its
// content: a task at the size limit cannot take the status message) is
// set FAILED without a status message. A task never stored gets a
// gave-up row: its callers' readers end with ErrGaveUp and the reason.
func (c *Cluster) failTask(ctx context.Context, id a2a.TaskID, p *workqueue.Payload, reason string) (answered bool, err error) {
	withReason := true
	for range 10 {
		st, err := c.opts.TaskStore.Get(ctx, id)
		missing := errors.Is(err, a2a.ErrTaskNotFound)
		if err != nil && !missing {
			return false, fmt.Errorf("pgcluster: finish task: %w", err)
		}
		if done, err := c.answered(ctx, p); err != nil || done {
			return done, err
		}
		if missing {
			body, _ := json.Marshal(gaveUpBody{Reason: reason})
			return false, c.insertReply(ctx, id, gaveUpProtocol, body)
		}
		task := *st.Task
		if task.Status.State.Terminal() {
			return false, nil
		}
		now := time.Now().UTC()
		// Without the reason the status is no larger than the one it
		// replaces: no message, the old timestamp.
		task.Status = a2a.TaskStatus{State: a2a.TaskStateFailed, Timestamp: task.Status.Timestamp}
		if withReason {
			task.Status.Timestamp = &now
			task.Status.Message = a2a.NewMessageForTask(a2a.MessageRoleAgent, &task, a2a.NewTextPart(reason))
		}
		ev := &a2a.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: task.Status}
		// The update logs ev in its transaction: readers get it (K7).
		_, err = c.opts.TaskStore.Update(ctx, &taskstore.UpdateRequest{Task: &task, Event: ev, PrevVersion: st.Version})
		if errors.Is(err, taskstore.ErrConcurrentModification) {
			continue
		}
		if errors.Is(err, a2a.ErrInvalidParams) && withReason {
			withReason = false // refused for its content: fail it without the reason
			continue
		}
		if err != nil {
			return false, fmt.Errorf("pgcluster: finish task: %w", err)
		}
		return false, nil
	}
	return false, fmt.Errorf("pgcluster: finish task: too many concurrent writers: %w", taskstore.ErrConcurrentModification)
}
