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

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/loghub"
)

// workQueue is the workqueue.ReadWriter under a2a-go's pull queue: Write
// inserts a work item and notifies, Read claims one with a lease.
type workQueue struct {
	c    *Cluster
	wake chan struct{} // a notification about work, or a reconnect
	// doneHub wakes the follow-up messages waiting for an execution of
	// their task to finish ('d' notifications, by task); cancelHub the
	// CancelTask calls waiting for their cancelation ('c').
	doneHub, cancelHub loghub.Hub

	mu struct {
		sync.Mutex
		// executions are the executions this instance runs, by task.
		executions map[a2a.TaskID]*message
		// inflight counts the claimed items not yet completed or
		// returned; settled is closed and replaced when it shrinks.
		inflight int
		settled  chan struct{}
		// handingOver is set by HandOver: from then on this instance
		// claims nothing, and an execution that reaches
		// beforeExecution is handed over before it starts.
		handingOver bool
		// cancels are the cancelations this instance runs, by task
		// (at most one per task: the work table's unique index).
		cancels map[a2a.TaskID]*message
	}
}

var _ workqueue.ReadWriter = (*workQueue)(nil)

func newWorkQueue(c *Cluster) *workQueue {
	q := &workQueue{c: c, wake: make(chan struct{}, 1)}
	q.mu.executions = make(map[a2a.TaskID]*message)
	q.mu.cancels = make(map[a2a.TaskID]*message)
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
	body, err := encodeWork(ctx, p)
	if err != nil {
		return "", fmt.Errorf("pgcluster: encode work item: %w", err)
	}
	if kind != workqueue.PayloadTypeExecute {
		return q.writeCancel(ctx, p, body)
	}
	done, stop := q.doneHub.Watch(p.TaskID) // before the insert: no 'd' is missed
	defer stop()
	deadline := time.Now().Add(followUpWait * q.c.opts.LeaseTimeout)
	for {
		id, rev, err := q.insert(ctx, p, kind, body)
		if err == nil {
			// The caller's reader starts where this execution does: an
			// earlier execution's entries, its final one above all, are
			// not this message's answer (#52).
			q.c.events.startAt(ctx, p.TaskID, rev)
		}
		var busy inProgressError
		if !errors.As(err, &busy) || !q.finishing(ctx, p.TaskID) || time.Now().After(deadline) {
			return id, err
		}
		// The open execution already brought the task where an
		// execution ends: it is finishing (its Complete follows), as
		// a2a-go's local mode would wait for. Wait, woken by its 'd'.
		q.c.stats.FollowUpWaits.Add(1)
		t := time.NewTimer(min(time.Until(deadline), q.c.opts.PollInterval, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
}

// followUpWait bounds, in lease timeouts, how long a follow-up waits for
// its task's finishing execution. When that execution's instance died
// after its final write, its item is completed by a takeover: the lease
// expires at most one lease timeout after the follow-up arrived, a
// rescue pass comes within a quarter more, then a claim and its answered
// check — 1.25 lease timeouts plus a claim, which 1.5 left a quarter of
// a lease for. Two leave three quarters.
const followUpWait = 2

// writeCancel writes a cancel item and returns once its task has ended
// (bounded by 1.5 lease timeouts, woken by the finished cancelation's
// notification). a2a-go v2.3.1's cluster-mode CancelTask reads its
// snapshot of the task after writing the item and answers with the
// first final event it sees: a task waiting for input is final to it, so
// without the wait the snapshot, read before the cancel ran, fails the
// call with "task was in non-cancelable state" although the cancel then
// succeeds. Joining a cancelation in progress (ErrLeaseAlreadyTaken)
// waits too. A read that fails (the database restarting) is tried again
// at the next wake-up, not taken for the end of the wait; only a task
// that does not exist ends it.
func (q *workQueue) writeCancel(ctx context.Context, p *workqueue.Payload, body []byte) (a2a.TaskID, error) {
	done, stop := q.cancelHub.Watch(p.TaskID)
	defer stop()
	q.c.events.startAt(ctx, p.TaskID, 0) // a cancel's reader reads on from its own start
	id, _, err := q.insert(ctx, p, workqueue.PayloadTypeCancel, body)
	if err != nil && !errors.Is(err, workqueue.ErrLeaseAlreadyTaken) {
		return id, err
	}
	deadline := time.Now().Add(q.c.opts.LeaseTimeout + q.c.opts.LeaseTimeout/2)
	for {
		rec, gerr := q.c.opts.Log.Get(ctx, p.TaskID)
		ended := gerr == nil && rec.Task.Status.State.Terminal()
		if ended || errors.Is(gerr, engine.ErrNotFound) || time.Now().After(deadline) {
			return id, err
		}
		t := time.NewTimer(min(time.Until(deadline), q.c.opts.PollInterval, time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return id, err
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
}

// finishing reports whether task is in a state where an execution ends
// (terminal, or input or auth required).
func (q *workQueue) finishing(ctx context.Context, id a2a.TaskID) bool {
	rec, err := q.c.opts.Log.Get(ctx, id)
	return err == nil && engine.Final(rec.Task.Status.State)
}

// insert inserts the work item and notifies, in one transaction. For an
// execution of a message to a stored task it returns the task's revision
// read in that transaction: the one the execution starts from, as no
// other execution of the task is open by then (the item's unique index)
// and none of the item's can start before the commit.
func (q *workQueue) insert(ctx context.Context, p *workqueue.Payload, kind string, body []byte) (a2a.TaskID, int64, error) {
	tx, err := q.c.pool.Begin(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("pgcluster: write work item: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var id, rev int64
	switch err := tx.QueryRow(ctx, q.c.sql.insertWork, string(p.TaskID), kind, body).Scan(&id); {
	case errors.Is(err, pgx.ErrNoRows):
		return "", 0, inProgressError(kind)
	case err != nil:
		return "", 0, fmt.Errorf("pgcluster: write work item: %w", err)
	}
	if kind == workqueue.PayloadTypeExecute && p.ExecuteRequest != nil && p.ExecuteRequest.Message != nil && p.ExecuteRequest.Message.TaskID != "" {
		if err := tx.QueryRow(ctx, q.c.sql.revision, string(p.TaskID)).Scan(&rev); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return "", 0, fmt.Errorf("pgcluster: write work item: %w", err)
		}
	}
	if err := q.c.notify(ctx, tx, 'w', p.TaskID); err != nil {
		return "", 0, fmt.Errorf("pgcluster: write work item: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", 0, fmt.Errorf("pgcluster: write work item: %w", err)
	}
	return p.TaskID, rev, nil
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

// claim takes one item, or returns nil when none is available (or this
// instance is handing its work over).
func (q *workQueue) claim(ctx context.Context) (*message, error) {
	if q.handingOver() {
		return nil, nil
	}
	m := &message{q: q, token: newToken()}
	m.extend(q.c.now())
	var kind string
	var body []byte
	var claims int
	err := q.c.pool.QueryRow(ctx, q.c.sql.claim, q.c.opts.Instance, m.token, q.c.opts.LeaseTimeout).
		Scan(&m.id, &m.taskID, &kind, &body, &m.attempt, &claims)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgcluster: claim work: %w", err)
	}
	q.c.stats.Claimed.Add(1)
	q.begin()
	m.payload, m.body = &workqueue.Payload{}, body
	if err := json.Unmarshal(body, m.payload); err != nil {
		// Not ours to run: finish it rather than retry forever.
		q.c.opts.Logger.Warn("pgcluster: undecodable work item finished", "id", m.id, "error", err)
		_, _ = q.c.pool.Exec(ctx, q.c.sql.complete, m.id, m.token, "malformed")
		q.settle()
		return nil, nil
	}
	if (m.attempt > 1 || claims > 1) && m.payload.Type == workqueue.PayloadTypeExecute {
		// Claimed before (retried, taken over or handed over): an
		// earlier claim may have answered the message (K8), or a
		// cancelation running here may be about to.
		q.awaitCancel(ctx, m.taskID)
		switch done, err := q.c.answered(ctx, m.payload); {
		case err != nil:
			// Not known: neither run the message nor finish it; the
			// item comes back after RetryDelay, its attempt not counted.
			q.c.opts.Logger.Warn("pgcluster: answered check failed; work item put back", "task", m.taskID, "error", err)
			if _, err := q.c.pool.Exec(ctx, q.c.sql.requeue, m.id, m.token, q.c.opts.RetryDelay); err == nil {
				time.AfterFunc(q.c.opts.RetryDelay, q.notify)
			}
			q.settle()
			return nil, nil
		case done:
			// An earlier claim answered the message and its instance
			// died or handed it over before completing the item:
			// complete it, do not run the agent again.
			q.c.stats.Answered.Add(1)
			_ = q.c.finishItem(ctx, m.id, m.token, m.taskID, outcomeAnswered, 'd')
			q.settle()
			return nil, nil
		}
		if !q.resume(ctx, m.payload) {
			// Its task was stored, then deleted: a2a-go would create it
			// again under the same ID.
			_ = q.c.finishItem(ctx, m.id, m.token, m.taskID, outcomeDeleted, 'd')
			q.settle()
			return nil, nil
		}
	}
	return m, nil
}

// outcomeDeleted is the outcome of an item whose task was deleted after
// an attempt stored it.
const outcomeDeleted = "task deleted"

// resume prepares a retried execution: when an earlier attempt created
// the task, the message names it, so that a2a-go resumes the stored task
// instead of creating it again (its retry semantics: the message is
// already in the history, the agent runs on the stored task). It reports
// false when the message names a task that is no longer stored (deleted
// since: the item is not to run), true otherwise. A message names its
// task once an attempt created it (nameTask), or once resume found it.
func (q *workQueue) resume(ctx context.Context, p *workqueue.Payload) bool {
	if p.Type != workqueue.PayloadTypeExecute || p.ExecuteRequest == nil || p.ExecuteRequest.Message == nil {
		return true
	}
	msg := p.ExecuteRequest.Message
	st, err := q.c.opts.TaskStore.Get(ctx, p.TaskID)
	if msg.TaskID != "" {
		return !errors.Is(err, a2a.ErrTaskNotFound)
	}
	if err != nil || st.Task == nil {
		return true // not created yet: the retry starts afresh
	}
	msg.TaskID, msg.ContextID = st.Task.ID, st.Task.ContextID
	return true
}

// nameTask records in execution m's stored payload that its attempt
// created task (FenceTaskStore's Create): a later attempt resumes the
// task, and finds it deleted if it was, instead of creating it again.
// A failure is logged: the later attempt then starts afresh, as before.
//
// It starts from the payload as claimed (m.body), not the one a2a-go runs
// (a failed config save blanks the secrets in that one), and keeps what it
// wrote as the claimed body, so that a hand-over writes the name back too.
func (m *message) nameTask(ctx context.Context, task *a2a.Task) {
	p := new(workqueue.Payload)
	err := json.Unmarshal(m.body, p)
	var body []byte
	if err == nil && p.ExecuteRequest != nil && p.ExecuteRequest.Message != nil {
		p.ExecuteRequest.Message.TaskID, p.ExecuteRequest.Message.ContextID = task.ID, task.ContextID
		body, err = reencodeWork(m.body, p)
	}
	if err == nil && body != nil {
		_, err = m.q.c.pool.Exec(ctx, m.q.c.sql.namePayload, m.id, m.token, body)
	}
	if err == nil && body != nil {
		m.body = body
	}
	if err != nil {
		m.q.c.opts.Logger.Warn("pgcluster: recording the task an execution created failed", "task", task.ID, "error", err)
	}
}

// beforeExecution puts the work item on the context of its run (the
// fence, FenceTaskStore, reads it: a cancelation's CANCELED write is
// fenced as an execution's writes are), starts the run's span (trace.go)
// and makes an execution cancelable by a cancel notification (K3).
func (q *workQueue) beforeExecution(ctx context.Context, msg workqueue.Message) (context.Context, error) {
	m := msg.(*message)
	ctx = context.WithValue(q.startWorkSpan(ctx, m), leaseKey{}, m)
	if m.payload.Type != workqueue.PayloadTypeExecute {
		m.ran = make(chan struct{})
		q.mu.Lock()
		q.mu.cancels[m.taskID] = m
		q.mu.Unlock()
		return ctx, nil
	}
	if f := q.c.beforeExecution.Load(); f != nil {
		(*f)(m.taskID)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	m.cancel = cancel
	q.mu.Lock()
	late := q.mu.handingOver
	if !late {
		q.mu.executions[m.taskID] = m
	}
	q.mu.Unlock()
	if late {
		// Claimed after HandOver looked at the executions: hand it over
		// before the agent starts. An error from here makes a2a-go drop
		// the message (no Complete nor Return): release and settle it
		// here.
		defer m.settle()
		cancel(ErrHandedOver)
		m.handedOver.Store(true)
		q.awaitCancel(context.WithoutCancel(ctx), m.taskID) // ctx is canceled just above
		if err := m.release(context.WithoutCancel(ctx)); err != nil {
			q.c.opts.Logger.Warn("pgcluster: handing over a late claim failed; its lease will expire", "task", m.taskID, "error", err)
		}
		return ctx, ErrHandedOver
	}
	return ctx, nil
}

// afterExecution ends the run's span and forgets the execution; Complete
// or Return follow.
func (q *workQueue) afterExecution(ctx context.Context, msg workqueue.Message, _ a2a.SendMessageResult, err error) error {
	endWorkSpan(ctx, err)
	m := msg.(*message)
	if m.ran != nil {
		q.mu.Lock()
		if q.mu.cancels[m.taskID] == m {
			delete(q.mu.cancels, m.taskID)
		}
		q.mu.Unlock()
		close(m.ran)
	}
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

// awaitCancel waits, for at most a lease timeout, until the cancelation
// of task id that this instance runs, if any, has ended: its CANCELED
// write committed or failed. An execution of the task handed over or
// claimed again decides whether to run its message (the answered check,
// K8) only after it, so that a CANCELED write in flight here does not
// commit just after the decision and the message run again on a task
// canceled. (A cancelation running on another instance is not waited
// for: the execution then learns of the cancel as any running execution
// does, within one heartbeat.)
func (q *workQueue) awaitCancel(ctx context.Context, id a2a.TaskID) {
	q.mu.Lock()
	c := q.mu.cancels[id]
	q.mu.Unlock()
	if c == nil {
		return
	}
	if f := q.c.awaitingCancel.Load(); f != nil {
		(*f)(id)
	}
	t := time.NewTimer(q.c.opts.LeaseTimeout)
	defer t.Stop()
	select {
	case <-c.ran:
	case <-t.C:
	case <-ctx.Done():
	}
}

// handingOver reports whether HandOver was called.
func (q *workQueue) handingOver() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.handingOver
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
	// body is the payload as claimed: a hand-over writes it back
	// (release), not the payload a2a-go ran, whose push config's token a
	// failed save blanked (pushdelivery.ConfigStore.Save).
	body   []byte
	cancel context.CancelCauseFunc // executions only
	ran    chan struct{}           // cancelations only: closed when the run ended
	// handedOver is set by HandOver: the execution was stopped for
	// another instance to take it over, and Return releases the lease.
	handedOver atomic.Bool
	// writes is held shared by each store write of the execution
	// (FenceTaskStore), so that HandOver can wait for the one in
	// flight before it cancels the execution (awaitWrite).
	writes sync.RWMutex
	// faulted is set when a store write or push lookup of the execution
	// failed transiently (FenceTaskStore): its FAILED is refused.
	faulted atomic.Bool
	settled sync.Once // the item left this instance's in-flight count

	// deadline is when the lease runs out as far as this instance knows
	// (nanoseconds of the cluster's monotonic lease clock, Cluster.now):
	// LeaseTimeout after the claim or the last successful heartbeat was
	// sent — no later than the database's lease_expires, which is set
	// when the statement runs.
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
// no longer this instance's or has run out in the table (a rescuer may be
// giving it up: nothing renews it then), which stops the execution; a
// database that cannot be reached fails it only once the lease has run
// out.
// A task found CANCELED stops the execution (K8): a cancel is state, so an
// execution learns of it here at the latest, whatever notification was
// lost.
func (m *message) Heartbeat(ctx context.Context) error {
	sent := m.q.c.now()
	var state *string
	err := m.q.c.pool.QueryRow(ctx, m.q.c.sql.heartbeat, m.id, m.token, m.q.c.opts.LeaseTimeout).Scan(&state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrLeaseLost
	case err != nil && m.holds():
		m.q.c.opts.Logger.Warn("pgcluster: heartbeat failed; retrying", "task", m.taskID, "error", err)
		return nil
	case err != nil:
		return fmt.Errorf("pgcluster: heartbeat: %w: %w", ErrLeaseLost, err)
	}
	m.extend(sent)
	if state != nil && a2a.TaskState(*state) == a2a.TaskStateCanceled && m.cancel != nil {
		m.q.c.stats.CancelsSeen.Add(1)
		m.cancel(ErrCanceled)
	}
	return nil
}

// recheck stops the executions of this instance whose task is CANCELED:
// after the notification connection was lost, a cancel's notification may
// have been too (K8).
func (q *workQueue) recheck(ctx context.Context) {
	q.mu.Lock()
	ids := make([]string, 0, len(q.mu.executions))
	for id := range q.mu.executions {
		ids = append(ids, string(id))
	}
	q.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	rows, err := q.c.pool.Query(ctx, q.c.sql.taskStates, ids)
	if err != nil {
		q.c.opts.Logger.Warn("pgcluster: rechecking the tasks executing here failed; heartbeats will", "error", err)
		return
	}
	var id, state string
	_, _ = pgx.ForEachRow(rows, []any{&id, &state}, func() error {
		if a2a.TaskState(state) == a2a.TaskStateCanceled {
			q.c.stats.CancelsSeen.Add(1)
			q.cancelLocal(a2a.TaskID(id))
		}
		return nil
	})
}

// extend moves the lease's local deadline to LeaseTimeout after from
// (the cluster's lease clock).
func (m *message) extend(from time.Duration) {
	m.deadline.Store(int64(from + m.q.c.opts.LeaseTimeout))
}

// holds reports whether the lease is still this instance's as far as it
// knows: not handed over, and its local deadline not passed.
func (m *message) holds() bool {
	return !m.handedOver.Load() && int64(m.q.c.now()) < m.deadline.Load()
}

// Complete finishes the item. A finished cancelation notifies every
// instance, and the one executing the task cancels the execution (K3); a
// finished execution wakes the follow-up messages waiting for it. A failed
// attempt is retried while the lease is this instance's: an item left
// running would be taken over, and the message answered again but for
// the answered check of claim (K8).
func (m *message) Complete(ctx context.Context) error {
	defer m.settle()
	ctx = context.WithoutCancel(ctx)
	backoff := 10 * time.Millisecond
	for {
		err := m.complete(ctx, "completed")
		if err == nil || !m.holds() {
			return err
		}
		m.q.c.opts.Logger.Warn("pgcluster: completing a work item failed; retrying while the lease holds", "task", m.taskID, "error", err)
		t := time.NewTimer(backoff)
		<-t.C
		backoff = min(2*backoff, time.Second)
	}
}

// complete is one attempt of Complete, recording outcome.
func (m *message) complete(ctx context.Context, outcome string) error {
	c := m.q.c
	if f := c.beforeComplete.Load(); f != nil {
		if err := (*f)(); err != nil {
			return fmt.Errorf("pgcluster: complete: %w", err)
		}
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgcluster: complete: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, c.sql.complete, m.id, m.token, outcome); err != nil {
		return fmt.Errorf("pgcluster: complete: %w", err)
	}
	kind := byte('d')
	if m.payload.Type == workqueue.PayloadTypeCancel {
		kind = 'c'
	}
	if err := c.notify(ctx, tx, kind, m.taskID); err != nil {
		return fmt.Errorf("pgcluster: complete: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgcluster: complete: %w", err)
	}
	return nil
}

// Return handles a failed attempt: an item whose task already ended is
// finished; so is an execution whose message the answered check finds
// answered (K8: a HandOver or a fault that came after the answer
// committed); an execution stopped by HandOver goes back to the queue at
// once, its attempt not counted; one with attempts left goes back to the
// queue (an execution after RetryDelay; a cancelation at once after a
// revision conflict, after RetryDelay after a transient fault); the last
// failed attempt gives up (giveUp). An answered check that fails decides
// nothing here: the next claim of the item, or its give-up, checks again.
func (m *message) Return(ctx context.Context, cause error) error {
	defer m.settle()
	ctx = context.WithoutCancel(ctx)
	c := m.q.c
	if m.handedOver.Load() {
		m.q.awaitCancel(ctx, m.taskID)
	}
	if st, err := c.opts.TaskStore.Get(ctx, m.taskID); err == nil && st.Task != nil && st.Task.Status.State.Terminal() {
		return m.complete(ctx, "task ended")
	}
	if m.payload.Type == workqueue.PayloadTypeExecute {
		if done, err := c.answered(ctx, m.payload); err == nil && done {
			c.stats.Answered.Add(1)
			return m.complete(ctx, outcomeAnswered)
		}
	}
	if m.handedOver.Load() {
		return m.release(ctx)
	}
	limit, delay := c.opts.MaxAttempts, c.opts.RetryDelay
	if m.payload.Type == workqueue.PayloadTypeCancel {
		limit = cancelAttempts
		if !m.faulted.Load() {
			delay = 0 // a revision conflict with the execution
		}
	}
	if m.attempt >= limit {
		return c.giveUp(ctx, workItem{id: m.id, token: m.token, task: m.taskID, kind: string(m.payload.Type),
			attempt: m.attempt, payload: m.payload}, cause)
	}
	c.stats.Retries.Add(1)
	if _, err := c.pool.Exec(ctx, c.sql.retry, m.id, m.token, delay); err != nil {
		return fmt.Errorf("pgcluster: return work item: %w", err)
	}
	if delay == 0 {
		_ = c.notify(ctx, c.pool, 'w', m.taskID)
	} else {
		// Nothing notifies when the delay is over: wake this instance's
		// work loop then (others find it on their safety-net poll).
		time.AfterFunc(delay, m.q.notify)
	}
	return nil
}
