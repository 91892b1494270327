package pgcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
	"github.com/jackc/pgx/v5"
)

// workQueue is the workqueue.ReadWriter under a2a-go's pull queue: Write
// inserts a work item and notifies, Read claims one with a lease.
type workQueue struct {
	c    *Cluster
	wake chan struct{} // a notification about work, or a reconnect

	mu struct {
		sync.Mutex
		// executions are the executions this instance runs, by task.
		executions map[a2a.TaskID]*message
		// inflight counts the claimed items not yet completed or
		// returned; settled is closed and replaced when it shrinks.
		inflight int
		settled  chan struct{}
	}
}

var _ workqueue.ReadWriter = (*workQueue)(nil)

func newWorkQueue(c *Cluster) *workQueue {
	q := &workQueue{c: c, wake: make(chan struct{}, 1)}
	q.mu.executions = make(map[a2a.TaskID]*message)
	q.mu.settled = make(chan struct{})
	return q
}

// Write implements workqueue.Writer. An open item of the same kind for the
// task (an execution in progress, a cancelation in progress) makes it fail
// with an inProgressError: workqueue.ErrLeaseAlreadyTaken for a2a-go, A2A's
// UnsupportedOperationError for the client.
func (q *workQueue) Write(ctx context.Context, p *workqueue.Payload) (a2a.TaskID, error) {
	if p == nil || p.TaskID == "" {
		return "", fmt.Errorf("pgcluster: work item without task: %w", workqueue.ErrMalformedPayload)
	}
	kind := string(p.Type)
	if kind != workqueue.PayloadTypeExecute && kind != workqueue.PayloadTypeCancel {
		return "", fmt.Errorf("pgcluster: work item of type %q: %w", kind, workqueue.ErrMalformedPayload)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("pgcluster: encode work item: %w", err)
	}
	tx, err := q.c.pool.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("pgcluster: write work item: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var id int64
	switch err := tx.QueryRow(ctx, q.c.sql.insertWork, string(p.TaskID), kind, body).Scan(&id); {
	case errors.Is(err, pgx.ErrNoRows):
		return "", inProgressError(kind)
	case err != nil:
		return "", fmt.Errorf("pgcluster: write work item: %w", err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", channel(q.c.opts.Schema), notifyPayload('w', p.TaskID)); err != nil {
		return "", fmt.Errorf("pgcluster: write work item: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("pgcluster: write work item: %w", err)
	}
	return p.TaskID, nil
}

// inProgressError is Write's answer when the task has an open item of the
// same kind. a2a-go's local mode answers a second SendMessage to a task it
// is executing with "task execution is already in progress", an error no
// A2A error wraps, which reaches the client as an internal error (JSON-RPC
// -32603, HTTP 500, gRPC INTERNAL) — a server fault for a client's
// request. This answers with the same text as A2A's
// UnsupportedOperationError, the spec's error for a message the task
// cannot take in its state (as for a task in a terminal state), on every
// transport; it is also workqueue.ErrLeaseAlreadyTaken, which a2a-go's
// CancelTask treats as "join the cancelation in progress".
type inProgressError string

func (e inProgressError) Error() string {
	if e == workqueue.PayloadTypeCancel {
		return "task cancelation is already in progress"
	}
	return "task execution is already in progress"
}

func (e inProgressError) Unwrap() []error {
	return []error{a2a.ErrUnsupportedOperation, workqueue.ErrLeaseAlreadyTaken}
}

// Read implements workqueue.ReadWriter: it claims the oldest available
// item, waiting for a notification (or the safety-net poll) while there
// is none. After Close it returns workqueue.ErrQueueClosed.
func (q *workQueue) Read(ctx context.Context) (workqueue.Message, error) {
	poll := time.NewTimer(q.c.opts.PollInterval)
	defer poll.Stop()
	for {
		select {
		case <-q.c.workClosed:
			return nil, workqueue.ErrQueueClosed
		default:
		}
		m, err := q.claim(ctx)
		if err != nil || m != nil {
			return m, err
		}
		select {
		case <-q.c.workClosed:
			return nil, workqueue.ErrQueueClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-q.wake:
		case <-poll.C:
			poll.Reset(q.c.opts.PollInterval)
		}
	}
}

// notify wakes Read (non-blocking).
func (q *workQueue) notify() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// claim takes one item, or returns nil when none is available.
func (q *workQueue) claim(ctx context.Context) (*message, error) {
	m := &message{q: q, token: newToken()}
	m.extend(q.c.now())
	var kind string
	var body []byte
	err := q.c.pool.QueryRow(ctx, q.c.sql.claim, q.c.opts.Instance, m.token, q.c.opts.LeaseTimeout).
		Scan(&m.id, &m.taskID, &kind, &body, &m.attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgcluster: claim work: %w", err)
	}
	q.c.stats.Claimed.Add(1)
	q.begin()
	m.payload = &workqueue.Payload{}
	if err := json.Unmarshal(body, m.payload); err != nil {
		// Not ours to run: finish it rather than retry forever.
		q.c.opts.Logger.Warn("pgcluster: undecodable work item finished", "id", m.id, "error", err)
		_, _ = q.c.pool.Exec(ctx, q.c.sql.complete, m.id, m.token, "malformed")
		q.settle()
		return nil, nil
	}
	if m.attempt > 1 {
		q.resume(ctx, m.payload)
	}
	return m, nil
}

// resume prepares a retried execution: when the first attempt created the
// task, the message names it, so that a2a-go resumes the stored task
// instead of creating it again (its retry semantics: the message is
// already in the history, the agent runs on the stored task).
func (q *workQueue) resume(ctx context.Context, p *workqueue.Payload) {
	if p.Type != workqueue.PayloadTypeExecute || p.ExecuteRequest == nil || p.ExecuteRequest.Message == nil {
		return
	}
	msg := p.ExecuteRequest.Message
	if msg.TaskID != "" {
		return
	}
	st, err := q.c.opts.TaskStore.Get(ctx, p.TaskID)
	if err != nil || st.Task == nil {
		return // not created yet: the retry starts afresh
	}
	msg.TaskID, msg.ContextID = st.Task.ID, st.Task.ContextID
}

// beforeExecution makes the execution's context cancelable by a cancel
// notification (K3).
func (q *workQueue) beforeExecution(ctx context.Context, msg workqueue.Message) (context.Context, error) {
	m := msg.(*message)
	if m.payload.Type != workqueue.PayloadTypeExecute {
		return ctx, nil
	}
	ctx, cancel := context.WithCancelCause(ctx)
	ctx = context.WithValue(ctx, leaseKey{}, m)
	m.cancel = cancel
	q.mu.Lock()
	q.mu.executions[m.taskID] = m
	q.mu.Unlock()
	return ctx, nil
}

// afterExecution forgets the execution; Complete or Return follow.
func (q *workQueue) afterExecution(_ context.Context, msg workqueue.Message, _ a2a.SendMessageResult, _ error) error {
	m := msg.(*message)
	if m.cancel == nil {
		return nil
	}
	q.mu.Lock()
	if q.mu.executions[m.taskID] == m {
		delete(q.mu.executions, m.taskID)
	}
	q.mu.Unlock()
	m.cancel(nil)
	return nil
}

// cancelLocal cancels the execution of taskID if this instance runs it.
func (q *workQueue) cancelLocal(taskID a2a.TaskID) {
	q.mu.Lock()
	m := q.mu.executions[taskID]
	q.mu.Unlock()
	if m != nil {
		q.c.stats.CanceledHere.Add(1)
		m.cancel(ErrCanceled)
	}
}

func (q *workQueue) running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.mu.executions)
}

// message is a claimed work item: a2a-go's workqueue.Message with a lease
// (workqueue.Heartbeater).
type message struct {
	q       *workQueue
	id      int64
	taskID  a2a.TaskID
	token   string
	attempt int
	payload *workqueue.Payload
	cancel  context.CancelCauseFunc // executions only
	// handedOver is set by HandOver: the execution was stopped for
	// another instance to take it over, and Return releases the lease.
	handedOver atomic.Bool
	settled    sync.Once // the item left this instance's in-flight count

	// deadline is when the lease runs out as far as this instance knows
	// (unix nanoseconds of the cluster clock): LeaseTimeout after the
	// claim or the last successful heartbeat was sent — no later than the
	// database's lease_expires, which is set when the statement runs.
	deadline atomic.Int64
}

var (
	_ workqueue.Message     = (*message)(nil)
	_ workqueue.Heartbeater = (*message)(nil)
)

func (m *message) Payload() *workqueue.Payload { return m.payload }

// HeartbeatInterval implements workqueue.Heartbeater.
func (m *message) HeartbeatInterval() time.Duration { return m.q.c.opts.LeaseTimeout / 3 }

// Heartbeat renews the lease. It fails with ErrLeaseLost when the lease is
// no longer this instance's, which stops the execution; a database that
// cannot be reached fails it only once the lease has run out.
func (m *message) Heartbeat(ctx context.Context) error {
	sent := m.q.c.now()
	tag, err := m.q.c.pool.Exec(ctx, m.q.c.sql.heartbeat, m.id, m.token, m.q.c.opts.LeaseTimeout)
	switch {
	case err != nil && m.holds():
		m.q.c.opts.Logger.Warn("pgcluster: heartbeat failed; retrying", "task", m.taskID, "error", err)
		return nil
	case err != nil:
		return fmt.Errorf("pgcluster: heartbeat: %w: %w", ErrLeaseLost, err)
	case tag.RowsAffected() == 0:
		return ErrLeaseLost
	}
	m.extend(sent)
	return nil
}

// extend moves the lease's local deadline to LeaseTimeout after from.
func (m *message) extend(from time.Time) {
	m.deadline.Store(from.Add(m.q.c.opts.LeaseTimeout).UnixNano())
}

// holds reports whether the lease is still this instance's as far as it
// knows: not handed over, and its local deadline not passed.
func (m *message) holds() bool {
	return !m.handedOver.Load() && m.q.c.now().UnixNano() < m.deadline.Load()
}

// Complete finishes the item. A finished cancelation notifies every
// instance, and the one executing the task cancels the execution (K3).
func (m *message) Complete(ctx context.Context) error {
	defer m.settle()
	ctx = context.WithoutCancel(ctx)
	c := m.q.c
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgcluster: complete: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, c.sql.complete, m.id, m.token, "completed"); err != nil {
		return fmt.Errorf("pgcluster: complete: %w", err)
	}
	if m.payload.Type == workqueue.PayloadTypeCancel {
		if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", channel(c.opts.Schema), notifyPayload('c', m.taskID)); err != nil {
			return fmt.Errorf("pgcluster: complete: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgcluster: complete: %w", err)
	}
	return nil
}

// Return handles a failed attempt: an item whose task already ended is
// finished; an execution stopped by HandOver goes back to the queue at
// once, its attempt not counted; one with attempts left goes back to the
// queue (an execution after RetryDelay, a cancelation at once); the last
// failed execution finishes its task as FAILED.
func (m *message) Return(ctx context.Context, cause error) error {
	defer m.settle()
	ctx = context.WithoutCancel(ctx)
	c := m.q.c
	if st, err := c.opts.TaskStore.Get(ctx, m.taskID); err == nil && st.Task != nil && st.Task.Status.State.Terminal() {
		_, err := c.pool.Exec(ctx, c.sql.complete, m.id, m.token, "task ended")
		if err == nil && m.payload.Type == workqueue.PayloadTypeCancel {
			_, err = c.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel(c.opts.Schema), notifyPayload('c', m.taskID))
		}
		return err
	}
	if m.handedOver.Load() {
		return m.release(ctx)
	}
	limit, delay := c.opts.MaxAttempts, c.opts.RetryDelay
	if m.payload.Type == workqueue.PayloadTypeCancel {
		limit, delay = cancelAttempts, 0
	}
	if m.attempt >= limit {
		return c.giveUp(ctx, m.id, m.token, m.taskID, string(m.payload.Type), m.attempt, cause)
	}
	c.stats.Retries.Add(1)
	if _, err := c.pool.Exec(ctx, c.sql.retry, m.id, m.token, delay); err != nil {
		return fmt.Errorf("pgcluster: return work item: %w", err)
	}
	if delay == 0 {
		_, _ = c.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel(c.opts.Schema), notifyPayload('w', m.taskID))
	} else {
		// Nothing notifies when the delay is over: wake this instance's
		// work loop then (others find it on their safety-net poll).
		time.AfterFunc(delay, m.q.notify)
	}
	return nil
}
