package pgcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
)

// ErrHandedOver is the cause of an execution context canceled by HandOver:
// the instance is shutting down and another instance takes the execution
// over.
var ErrHandedOver = errors.New("pgcluster: execution handed over to another instance")

// HandOver stops the executions this instance runs so that other
// instances take them over at once: each execution's context is canceled
// with ErrHandedOver (the agent stops; a2a-go's attempt to record the
// failure fails on the canceled context, so the task stays as the agent
// left it) and its work item goes back to the queue available now, its
// attempt not counted, naming the stored task so that the next instance
// resumes it. From its call on the instance claims no work, and an
// execution claimed before but not yet started (a claim in flight, an
// item between its claim and its start) is handed over the same way
// before its agent starts: when HandOver returns, no item is held here.
// An execution whose task has a cancelation running here goes back only
// once that cancelation has ended, so that its CANCELED write does not
// land just after another instance decided to run the message again; for
// the same reason an execution is stopped only once the store write it
// has in flight has returned (awaitWrite: at most a lease timeout), or
// ctx ended.
// It returns how many running executions it stopped, once every item
// this instance claimed is completed or returned (Settle), or ctx's
// error. A server shutting down calls it, after StopWork, for the
// executions that did not finish within its grace period; with no other
// instance running, the items wait for the next one to start.
func (c *Cluster) HandOver(ctx context.Context) (int, error) {
	q := c.work
	q.mu.Lock()
	q.mu.handingOver = true
	running := make([]*message, 0, len(q.mu.executions))
	for _, m := range q.mu.executions {
		running = append(running, m)
	}
	q.mu.Unlock()
	if f := c.afterHandOverLook.Load(); f != nil {
		(*f)()
	}
	for _, m := range running {
		m.handedOver.Store(true) // the fence refuses its writes from now on
	}
	for _, m := range running {
		q.awaitWrite(ctx, m)
		m.cancel(ErrHandedOver)
	}
	return len(running), c.Settle(ctx)
}

// awaitWrite waits, for at most a lease timeout, until the store write
// that execution m has in flight, if any, has returned, or ctx ends.
// Canceled, the write would return at once while PostgreSQL may still
// run and commit it (pgx abandons the connection of a canceled
// statement): the answered checks of Return and of the next claim could
// then run before the write that answers the message commits, and
// another instance run the message again (K8). (A write in flight longer
// than a lease timeout is not waited for, as the fence does not stop a
// write in flight when the lease runs out.) m.handedOver is set: the
// fence refuses the execution's later writes.
func (q *workQueue) awaitWrite(ctx context.Context, m *message) {
	if m.writes.TryLock() {
		m.writes.Unlock()
		return
	}
	if f := q.c.awaitingWrite.Load(); f != nil {
		(*f)(m.taskID)
	}
	done := make(chan struct{})
	go func() {
		m.writes.Lock()
		close(done) // the write in flight has returned
		m.writes.Unlock()
	}()
	t := time.NewTimer(q.c.opts.LeaseTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// Settle waits until every work item this instance claimed is completed
// or returned to the queue, or ctx ends. A server shutting down calls it
// before Close, so that no lease is left to expire for an item whose
// execution ended here.
func (c *Cluster) Settle(ctx context.Context) error {
	q := c.work
	for {
		q.mu.Lock()
		n, settled := q.mu.inflight, q.mu.settled
		q.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-settled:
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: %d work items still in progress: %w", n, ctx.Err())
		}
	}
}

// begin counts a claimed item in flight.
func (q *workQueue) begin() {
	q.mu.Lock()
	q.mu.inflight++
	q.mu.Unlock()
}

// settle counts a claimed item out of flight.
func (q *workQueue) settle() {
	q.mu.Lock()
	q.mu.inflight--
	close(q.mu.settled)
	q.mu.settled = make(chan struct{})
	q.mu.Unlock()
}

func (m *message) settle() { m.settled.Do(m.q.settle) }

// release gives a handed-over execution back to the queue at once and
// wakes the instances' work loops.
func (m *message) release(ctx context.Context) error {
	c := m.q.c
	p := new(workqueue.Payload)
	if err := json.Unmarshal(m.body, p); err != nil {
		return fmt.Errorf("pgcluster: hand over: %w", err)
	}
	_ = m.q.resume(ctx, p) // a deleted task: the next claim finishes the item
	body, err := reencodeWork(m.body, p)
	if err != nil {
		return fmt.Errorf("pgcluster: hand over: %w", err)
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgcluster: hand over: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, c.sql.release, m.id, m.token, body); err != nil {
		return fmt.Errorf("pgcluster: hand over: %w", err)
	}
	if err := c.notify(ctx, tx, 'w', m.taskID); err != nil {
		return fmt.Errorf("pgcluster: hand over: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgcluster: hand over: %w", err)
	}
	c.stats.HandedOver.Add(1)
	return nil
}
