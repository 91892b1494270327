package pgcluster_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgcluster"
)

// The tests of issue #28's seven ways to hang or repeat, and of W9 in
// cluster mode: each drives the failure it names.

// turnAgent answers each message with a working update, then asks for
// more (input required), or completes when the message says "done"; a
// message saying "reply" it answers with a message, storing no task. It
// counts its runs per message, waits on hold (when set, unless the
// message says "nohold") after working, and reports the cause of its
// context's end on stopped.
type turnAgent struct {
	hold    chan struct{}
	stopped chan error
	working chan a2a.TaskID
	mu      sync.Mutex
	runs    map[string]int
}

func newTurnAgent(hold bool) *turnAgent {
	a := &turnAgent{stopped: make(chan error, 10), working: make(chan a2a.TaskID, 10), runs: map[string]int{}}
	if hold {
		a.hold = make(chan struct{})
	}
	return a
}

func (a *turnAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		a.mu.Lock()
		a.runs[ec.Message.ID]++
		a.mu.Unlock()
		text := ""
		if len(ec.Message.Parts) > 0 {
			text = ec.Message.Parts[0].Text()
		}
		if text == "reply" {
			yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("replied")), nil)
			return
		}
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		a.working <- ec.TaskID
		if a.hold != nil && text != "nohold" {
			select {
			case <-a.hold:
			case <-ctx.Done():
				a.stopped <- context.Cause(ctx)
				return
			}
		}
		st := a2a.TaskStateInputRequired
		if text == "done" {
			st = a2a.TaskStateCompleted
		}
		yield(a2a.NewStatusUpdateEvent(ec, st, nil), nil)
	}
}

func (a *turnAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (a *turnAgent) ran(msgID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs[msgID]
}

// send sends text as message msgID (to task, when not "") and returns the
// blocking call's result.
func send(ctx context.Context, in *instance, task a2a.TaskID, msgID, text string) (a2a.SendMessageResult, error) {
	msg := &a2a.Message{ID: msgID, Role: a2a.MessageRoleUser, TaskID: task, Parts: a2a.ContentParts{a2a.NewTextPart(text)}}
	return in.handler.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
}

// waitState waits until the task is in state.
func waitState(t *testing.T, ctx context.Context, in *instance, id a2a.TaskID, want a2a.TaskState) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		st, err := in.tasks.Get(ctx, id)
		if err == nil && st.Task.Status.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never reached %s (last: %v, %v)", id, want, st, err)
		}
		waitTick(ctx)
	}
}

// failingStore is an instance's handler task store whose Update, after a
// write that leaves the task terminal commits, fails as if the connection
// had died before the answer came back.
type failingStore struct{ taskstore.Store }

func (s failingStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	v, err := s.Store.Update(ctx, req)
	if err == nil && req.Task.Status.State.Terminal() {
		return taskstore.TaskVersionMissing, errors.New("connection lost after commit")
	}
	return v, err
}

// #28 (1), K7: the terminal write and its event are one transaction. The
// executing instance loses its answer right after the terminal write
// commits (a2a-go then emits nothing): the sender on the other instance
// still ends with the terminal state, from the log.
func TestTerminalEventCommitsWithItsRevision(t *testing.T) {
	h := newHarness(t)
	h.wrap = func(name string, ts taskstore.Store) taskstore.Store {
		if name == "a" {
			return failingStore{ts}
		}
		return ts
	}
	agent := newTurnAgent(false)
	a, b := h.start(t, "a", agent), h.start(t, "b", agent)
	b.cluster.StopWork() // a executes
	ctx := t.Context()
	res, err := send(ctx, b, "", "m1", "done")
	if err != nil {
		t.Fatalf("sender on b: %v", err)
	}
	if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("sender on b got %#v, want the completed task", res)
	}
	_ = a
}

// #28 (2), K8: a cancel whose notification never reaches the executing
// instance (its LISTEN connection is gone and held away) still stops the
// execution, within a heartbeat.
func TestCancelWithoutNotification(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(true)
	a, b := h.start(t, "a", agent), h.start(t, "b", agent)
	ctx := t.Context()
	events, _ := stream(a.handler.SendStreamingMessage(ctx, &a2a.SendMessageRequest{
		Message: &a2a.Message{ID: "m1", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}}))
	id := next(t, events).(*a2a.Task).ID
	<-agent.working
	executor, canceler := other(t, ctx, id, a, b)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	executor.cluster.BeforeReconnect(func() { <-release })
	admin, err := pgxpool.New(ctx, pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
		pgcluster.ListenerApplicationName+" "+executor.name); err != nil {
		t.Fatal(err)
	}
	task, err := canceler.handler.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
	if err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %v, %v", task, err)
	}
	select {
	case cause := <-agent.stopped:
		if !errors.Is(cause, pgcluster.ErrCanceled) {
			t.Fatalf("execution stopped by %v, want pgcluster.ErrCanceled", cause)
		}
	case <-time.After(waitFor):
		t.Fatal("the execution runs on: the cancel was a lost notification, not state")
	}
	if n := executor.cluster.Stats().CancelsSeen.Load(); n == 0 {
		t.Fatal("the executor did not count a cancel found by its heartbeat")
	}
	waitState(t, ctx, a, id, a2a.TaskStateCanceled)
}

// snapshotGate is a handler task store that holds a2a-go's subscription
// snapshot of a follow-up (the second read of its task in a call marked
// by gateKey) until the follow-up's execution has ended: the race in which
// a2a-go v2.3.1 reads its snapshot after the final event was written.
type snapshotGate struct {
	taskstore.Store
	until func(ctx context.Context)
}

type gateKey struct{}

type gateCount struct {
	mu sync.Mutex
	n  int
}

func (s snapshotGate) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	if c, ok := ctx.Value(gateKey{}).(*gateCount); ok {
		c.mu.Lock()
		c.n++
		n := c.n
		c.mu.Unlock()
		if n == 2 {
			s.until(ctx)
		}
	}
	return s.Store.Get(ctx, id)
}

// #28 (3): a follow-up to an input-required task whose execution ends
// before a2a-go reads its subscription snapshot still returns: the final
// event is not skipped as older than the snapshot.
func TestFollowUpFinishedBeforeSnapshot(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(false)
	var a *instance
	var target int64
	h.wrap = func(name string, ts taskstore.Store) taskstore.Store {
		return snapshotGate{Store: ts, until: func(ctx context.Context) {
			deadline := time.Now().Add(waitFor)
			for time.Now().Before(deadline) {
				log, err := a.store.ReadLog(context.Background(), "t-follow", target, 100)
				if err == nil && len(log) > 0 && log[len(log)-1].State == a2a.TaskStateInputRequired {
					return
				}
				waitTick(ctx)
			}
		}}
	}
	a = h.start(t, "a", agent)
	_ = h.start(t, "b", agent)
	ctx := t.Context()
	msg := &a2a.Message{ID: "m1", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}
	// A task with a chosen ID, so that the gate knows it.
	if _, err := a.tasks.Create(ctx, &a2a.Task{ID: "t-follow", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired},
		History: []*a2a.Message{msg}}); err != nil {
		t.Fatal(err)
	}
	target = 1
	gctx, cancel := context.WithTimeout(context.WithValue(ctx, gateKey{}, &gateCount{}), waitFor)
	defer cancel()
	res, err := send(gctx, a, "t-follow", "m2", "more")
	if err != nil {
		t.Fatalf("follow-up: %v (it hangs when the final event is skipped as old)", err)
	}
	if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("follow-up answered %#v", res)
	}
}

// #28 (4), K8: an execution that answered its message (it asks for input)
// but whose item was never completed (the Complete failed and the instance lost its lease)
// is taken over and completed without running the agent again.
func TestAnsweredItemNotRunAgain(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(false)
	// Answered by asking for input: not terminal, so only the log tells
	// that the message was answered.
	a, b, _, id := answerThenLose(t, h, agent, "hi")
	ctx := t.Context()
	if err := b.cluster.Rescue(ctx); err != nil {
		t.Fatal(err)
	}
	waitLease(t, ctx, a, id, "done")
	if n := agent.ran("m1"); n != 1 {
		t.Fatalf("the agent ran %d times for one message", n)
	}
	if o := outcome(t, h, a, id); o != "answered" || a.cluster.Stats().Answered.Load()+b.cluster.Stats().Answered.Load() != 1 {
		t.Fatalf("item outcome %q, answered %d+%d; want it completed as answered once", o,
			a.cluster.Stats().Answered.Load(), b.cluster.Stats().Answered.Load())
	}
}

// #28 (6): a follow-up sent while the previous execution of its task has
// written its final event but not completed its item waits for it (woken
// by the database) instead of being refused.
func TestFollowUpWaitsForFinishingExecution(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(false)
	a, b := h.start(t, "a", agent), h.start(t, "b", agent)
	ctx := t.Context()
	hold := make(chan struct{})
	held := make(chan struct{}, 10)
	for _, in := range []*instance{a, b} {
		in.cluster.BeforeComplete(func() error {
			select {
			case held <- struct{}{}:
			default:
			}
			<-hold
			return nil
		})
	}
	id := make(chan a2a.TaskID, 1)
	go func() {
		res, err := send(ctx, a, "", "m1", "hi")
		if err == nil {
			id <- res.(*a2a.Task).ID
		}
	}()
	<-held // the first execution is final, its Complete held
	var task a2a.TaskID
	select {
	case task = <-id:
	case <-time.After(waitFor):
		t.Fatal("first message did not return")
	}
	follow := make(chan error, 1)
	go func() {
		_, err := send(ctx, b, task, "m2", "done")
		follow <- err
	}()
	deadline := time.Now().Add(waitFor)
	for a.cluster.Stats().FollowUpWaits.Load()+b.cluster.Stats().FollowUpWaits.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the follow-up did not wait for the finishing execution")
		}
		select {
		case err := <-follow:
			t.Fatalf("the follow-up returned while the previous execution was finishing: %v", err)
		default:
		}
		waitTick(ctx)
	}
	close(hold)
	select {
	case err := <-follow:
		if err != nil {
			t.Fatalf("follow-up refused: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("the follow-up did not go on once the execution finished")
	}
	waitState(t, ctx, a, task, a2a.TaskStateCompleted)
}

// #28 (5), K2: a new subscriber gets every event after its snapshot in
// revision order, whatever instance wrote each one.
func TestNewSubscriberGetsEveryEvent(t *testing.T) {
	h := newHarness(t)
	a, b := h.start(t, "a", newTurnAgent(false)), h.start(t, "b", newTurnAgent(false))
	ctx := t.Context()
	task := &a2a.Task{ID: "t5", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	v, err := a.tasks.Create(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	events, done := stream(b.handler.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: "t5"}))
	if st := state(next(t, events)); st != a2a.TaskStateSubmitted {
		t.Fatalf("snapshot %s", st)
	}
	for i, st := range []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCanceled} {
		task.Status = a2a.TaskStatus{State: st}
		ev := &a2a.TaskStatusUpdateEvent{TaskID: "t5", ContextID: "c", Status: task.Status}
		writer := []*instance{a, b}[i] // two instances write in turn
		if v, err = writer.tasks.Update(ctx, &taskstore.UpdateRequest{Task: task, Event: ev, PrevVersion: v}); err != nil {
			t.Fatal(err)
		}
	}
	got := []a2a.TaskState{state(next(t, events)), state(next(t, events))}
	if fmt.Sprint(got) != fmt.Sprint([]a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCanceled}) {
		t.Fatalf("subscriber got %v", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// startWaiting starts instances a and b with agent and sends them a
// message with text (on a) that leaves its task waiting for input.
func startWaiting(t *testing.T, h *harness, agent *turnAgent, text string) (a, b *instance, id a2a.TaskID) {
	t.Helper()
	a, b = h.start(t, "a", agent), h.start(t, "b", agent)
	res, err := send(t.Context(), a, "", "m1", text)
	if err != nil {
		t.Fatal(err)
	}
	return a, b, res.(*a2a.Task).ID
}

// W9 (A2A §3.1.6) in cluster mode: a task waiting for input has no
// execution; a subscriber on any instance gets the task, then the events
// of the follow-up's execution, until it asks for input again.
func TestSubscribeInputRequired(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(true)
	a, b, id := startWaiting(t, h, agent, "nohold")
	ctx := t.Context()
	<-agent.working
	events, done := stream(b.handler.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}))
	first, ok := next(t, events).(*a2a.Task)
	if !ok || first.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("first event %#v, want the task waiting for input", first)
	}
	follow := make(chan error, 1)
	go func() { _, err := send(ctx, a, id, "m2", "more"); follow <- err }()
	if st := state(next(t, events)); st != a2a.TaskStateWorking {
		t.Fatalf("event %s, want working", st)
	}
	close(agent.hold)
	if st := state(next(t, events)); st != a2a.TaskStateInputRequired {
		t.Fatalf("event %s, want input required", st)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-follow; err != nil {
		t.Fatal(err)
	}
}

// CancelTask of a task waiting for input answers the canceled task in
// cluster mode (a2a-go v2.3.1's own path reads its snapshot before the
// cancel ran and fails with "non-cancelable state").
func TestCancelInputRequired(t *testing.T) {
	h := newHarness(t)
	a, b, id := startWaiting(t, h, newTurnAgent(false), "hi")
	ctx := t.Context()
	for _, in := range []*instance{b, a} {
		task, err := in.handler.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
		if err != nil || task.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("cancel on %s of a task waiting for input: %v, %v", in.name, task, err)
		}
	}
}

// stepFailingStore is an instance's handler task store whose first
// Update of a WORKING task fails with err before anything is written.
type stepFailingStore struct {
	taskstore.Store
	err    error
	failed *atomic.Bool
}

func (s stepFailingStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if req.Task.Status.State == a2a.TaskStateWorking && s.failed.CompareAndSwap(false, true) {
		return taskstore.TaskVersionMissing, s.err
	}
	return s.Store.Update(ctx, req)
}

// runFailing runs one execution on instance a, with fault installing the
// fault to inject (it sets *failed when it fires), and returns the
// sender's result and how many times the agent ran.
func runFailing(t *testing.T, fault func(h *harness, failed *atomic.Bool)) (*a2a.Task, int) {
	t.Helper()
	h := newHarness(t)
	var failed atomic.Bool
	fault(h, &failed)
	agent := newTurnAgent(false)
	_, b := h.start(t, "a", agent), h.start(t, "b", agent)
	b.cluster.StopWork() // a executes
	res, err := send(t.Context(), b, "", "m1", "done")
	if err != nil {
		t.Fatalf("sender on b: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || !failed.Load() {
		t.Fatalf("sender on b got %#v; the fault fired: %v", res, failed.Load())
	}
	return task, agent.ran("m1")
}

// runFailingStep is runFailing with a's first WORKING write failing with
// err.
func runFailingStep(t *testing.T, err error) (*a2a.Task, int) {
	return runFailing(t, func(h *harness, failed *atomic.Bool) {
		h.wrap = func(name string, ts taskstore.Store) taskstore.Store {
			if name == "a" {
				return stepFailingStore{ts, err, failed}
			}
			return ts
		}
	})
}

// K6: a step whose store write fails for the server's own reasons (the
// adapter's internal error: a connection lost at a database restart) does
// not end the task FAILED without a reason, as a2a-go's own failure
// handling would: the fence refuses that FAILED, the execution's work
// item is retried, and the task completes on the second attempt.
func TestFailedStepRetried(t *testing.T) {
	task, runs := runFailingStep(t, a2a.NewError(a2a.ErrInternalError, "internal error"))
	if task.Status.State != a2a.TaskStateCompleted || runs != 2 {
		t.Fatalf("task %+v after %d runs, want completed after 2", task.Status, runs)
	}
}

// A step whose write fails for its content (a task over the store's
// limits) is no transient fault: the task fails at once, the agent is not
// run again.
func TestFailedStepContentNotRetried(t *testing.T) {
	task, runs := runFailingStep(t, a2a.NewError(a2a.ErrInvalidParams, "task exceeds a store limit"))
	if task.Status.State != a2a.TaskStateFailed || runs != 1 {
		t.Fatalf("task %+v after %d runs, want failed after 1", task.Status, runs)
	}
}

// cancelFailingStore is a handler task store whose first faults CANCELED
// writes fail with the adapter's internal error before anything is
// written; n counts the CANCELED writes.
type cancelFailingStore struct {
	taskstore.Store
	faults int32
	n      *atomic.Int32
}

func (s cancelFailingStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if req.Task.Status.State == a2a.TaskStateCanceled && s.n.Add(1) <= s.faults {
		return taskstore.TaskVersionMissing, a2a.NewError(a2a.ErrInternalError, "internal error")
	}
	return s.Store.Update(ctx, req)
}

// cancelFailing cancels, on instance b, a task waiting for input whose
// first faults CANCELED writes fail, and checks that the call answers the
// task CANCELED and that it is stored so. It returns how many CANCELED
// writes were made.
func cancelFailing(t *testing.T, faults int32) int32 {
	t.Helper()
	h := newHarness(t)
	var n atomic.Int32
	h.wrap = func(_ string, ts taskstore.Store) taskstore.Store { return cancelFailingStore{ts, faults, &n} }
	a, b, id := startWaiting(t, h, newTurnAgent(false), "hi")
	ctx := t.Context()
	task, err := b.handler.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
	if err != nil {
		t.Fatalf("cancel after %d CANCELED writes: %v", n.Load(), err)
	}
	st, err := a.tasks.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.State != a2a.TaskStateCanceled || st.Task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel answered %+v, stored %+v; want CANCELED", task.Status, st.Task.Status)
	}
	return n.Load()
}

// K6 for cancelations: a cancel whose CANCELED write fails transiently is
// retried and the task ends CANCELED, not FAILED without a reason (what
// a2a-go's own failure handling writes).
func TestFailedCancelRetried(t *testing.T) {
	if n := cancelFailing(t, 1); n != 2 {
		t.Fatalf("%d CANCELED writes, want 2 (one failed, one retried)", n)
	}
}

// A cancel whose every CANCELED write fails is given up after its
// attempts, and giving up cancels the task through the store: it does not
// stay open (and its caller waiting) after the cancel was accepted.
func TestFailedCancelGivenUp(t *testing.T) {
	if n := cancelFailing(t, math.MaxInt32); n != pgcluster.CancelAttempts {
		t.Fatalf("%d CANCELED writes, want %d (every attempt)", n, pgcluster.CancelAttempts)
	}
}

// A cancel whose CANCELED write fails with a fault (not a revision
// conflict) goes back to the queue RetryDelay later, not at once: a fault
// lasting a second would otherwise use up every attempt. Made due and
// woken, it cancels the task.
func TestFaultedCancelWaitsRetryDelay(t *testing.T) {
	h := newHarness(t)
	h.opts.RetryDelay = time.Hour
	var n atomic.Int32
	h.wrap = func(_ string, ts taskstore.Store) taskstore.Store { return cancelFailingStore{ts, 1, &n} }
	a, b, id := startWaiting(t, h, newTurnAgent(false), "hi")
	ctx := t.Context()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		_, _ = b.handler.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id}) // its answer is other tests' matter
	}()
	due := fmt.Sprintf(`SELECT extract(epoch FROM available_at - now()) FROM %q.a2a_cluster_work
		WHERE task_id = $1 AND kind = 'cancel' AND state = 'available' AND attempt = 1`, h.schema)
	deadline := time.Now().Add(waitFor)
	var in float64
	for {
		err := a.pool.QueryRow(ctx, due, string(id)).Scan(&in)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
			t.Fatalf("waiting for the faulted cancel item to be returned: %v (CANCELED writes: %d)", err, n.Load())
		}
		waitTick(ctx)
	}
	if in < (59 * time.Minute).Seconds() {
		t.Fatalf("the faulted cancel item is due in %.1f s, want RetryDelay (1 h)", in)
	}
	if _, err := a.pool.Exec(ctx, fmt.Sprintf(`UPDATE %q.a2a_cluster_work SET available_at = now()
		WHERE task_id = $1 AND kind = 'cancel' AND state = 'available'`, h.schema), string(id)); err != nil {
		t.Fatal(err)
	}
	if err := b.cluster.NotifyWork(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitState(t, ctx, a, id, a2a.TaskStateCanceled)
	<-answered
	if got := n.Load(); got != 2 {
		t.Fatalf("%d CANCELED writes, want 2 (one failed, one retried)", got)
	}
}

// failingLog is a cluster's log store whose second Get after armed is set
// fails (a2a-go v2.3.1's CancelTask reads the task first to open its
// event reader, then writes the cancel item, whose wait reads it next).
type failingLog struct {
	pgcluster.LogStore
	armed  *atomic.Bool
	n      *atomic.Int32
	failed *atomic.Bool
}

func (l failingLog) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	if l.armed.Load() && l.n.Add(1) == 2 {
		l.failed.Store(true)
		return engine.Record{}, fmt.Errorf("connection lost: %w", engine.ErrInternal)
	}
	return l.LogStore.Get(ctx, id)
}

// A CancelTask whose wait for the task to end reads the task while the
// database is unreachable waits on: it does not answer from a2a-go's
// snapshot, read before the cancel ran ("non-cancelable state" for a
// task waiting for input), while the cancel then succeeds.
func TestCancelWaitsThroughFailedRead(t *testing.T) {
	h := newHarness(t)
	var armed, failed atomic.Bool
	var n atomic.Int32
	h.wrapLog = func(_ string, l pgcluster.LogStore) pgcluster.LogStore { return failingLog{l, &armed, &n, &failed} }
	_, b, id := startWaiting(t, h, newTurnAgent(false), "hi")
	armed.Store(true)
	task, err := b.handler.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: id})
	if err != nil || task.Status.State != a2a.TaskStateCanceled || !failed.Load() {
		t.Fatalf("cancel: %v, %v; the read failed: %v", task, err, failed.Load())
	}
}

// failingConfigs is a push configuration store whose first List fails.
type failingConfigs struct {
	push.ConfigStore
	failed *atomic.Bool
}

func (s failingConfigs) List(ctx context.Context, id a2a.TaskID) ([]*a2a.PushConfig, error) {
	if s.failed.CompareAndSwap(false, true) {
		return nil, errors.New("connection lost")
	}
	return s.ConfigStore.List(ctx, id)
}

// nopSender sends nothing (the tests' configuration stores hold none).
type nopSender struct{}

func (nopSender) SendPush(context.Context, *a2a.PushConfig, a2a.Event) error { return nil }

// K6 for the push lookup a2a-go makes after every stored event: its
// failure does not fail the task either (FencePushConfigs).
func TestFailedPushLookupRetried(t *testing.T) {
	task, runs := runFailing(t, func(h *harness, failed *atomic.Bool) {
		h.push = failingConfigs{push.NewInMemoryStore(), failed}
	})
	if task.Status.State != a2a.TaskStateCompleted || runs != 2 {
		t.Fatalf("task %+v after %d runs, want completed after 2", task.Status, runs)
	}
}

// deletingLog deletes a task right after its first Get once armed: the
// deletion falls between a reader's read of the task and its watch.
type deletingLog struct {
	pgcluster.LogStore
	armed *atomic.Bool
}

func (l deletingLog) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	rec, err := l.LogStore.Get(ctx, id)
	if err == nil && l.armed.CompareAndSwap(true, false) {
		if derr := l.LogStore.Delete(ctx, id); derr != nil {
			return rec, derr
		}
	}
	return rec, err
}

// A task deleted after a reader read its revision but before the reader
// began to watch its log ends the read with task not found, without a
// wait: no notification of that deletion will come (the poll is an hour).
func TestEventReaderTaskDeletedBeforeWatch(t *testing.T) {
	h := newHarness(t)
	var armed atomic.Bool
	h.wrapLog = func(_ string, l pgcluster.LogStore) pgcluster.LogStore { return deletingLog{l, &armed} }
	a := h.start(t, "a", newGateAgent(0))
	ctx := t.Context()
	id := a2a.TaskID("t1")
	if _, err := a.tasks.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	r, err := a.cluster.QueueManager().CreateReader(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if armed.Load() {
		t.Fatal("setup: the reader did not read the task")
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var waited atomic.Bool
	a.cluster.OnIdle(func(a2a.TaskID) { waited.Store(true); cancel() })
	if _, err := r.Read(rctx); waited.Load() || !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("read of a task deleted before the watch: %v (waited: %v), want task not found at once", err, waited.Load())
	}
}
