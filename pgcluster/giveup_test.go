package pgcluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pgcluster"
)

// The tests of issue #52's give-up, handover and answered-message paths
// (K4, K8): each drives the failure it names and fails without its fix.

// answerThenLose sends message m1 (text) on instance a of two, whose
// execution answers it; a then loses the item's lease before completing
// it (its Complete fails, its clock jumps an hour), and the lease expires
// in the database. It returns the instances, the answer and the task ID
// of the item, which waits for a rescue. The instances run without
// heartbeats during the test (lease 1 min): one sent before the lease is
// set to have run out would renew it.
func answerThenLose(t *testing.T, h *harness, agent *turnAgent, text string) (a, b *instance, res a2a.SendMessageResult, id a2a.TaskID) {
	t.Helper()
	h.opts.LeaseTimeout = time.Minute
	a, b = h.start(t, "a", agent), h.start(t, "b", agent)
	b.cluster.StopWork() // a executes first; b's rescuer and a's work loop take over
	ctx := t.Context()
	var once sync.Once
	stalled := make(chan struct{})
	a.cluster.BeforeComplete(func() error {
		var err error
		once.Do(func() {
			a.cluster.Stall(time.Hour) // its lease is gone as far as it knows
			err = errors.New("connection lost")
			close(stalled)
		})
		return err
	})
	res, err := send(ctx, a, "", "m1", text)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-stalled:
	case <-time.After(waitFor):
		t.Fatalf("the execution's item was never completed; work items: %s", workItems(t, h, a))
	}
	if err := a.pool.QueryRow(ctx, fmt.Sprintf(`UPDATE %q.a2a_cluster_work SET lease_expires = now() - interval '1 second'
		WHERE state = 'running' RETURNING task_id`, h.schema)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return a, b, res, id
}

// outcome is the recorded outcome of the task's latest execution item.
func outcome(t *testing.T, h *harness, in *instance, id a2a.TaskID) string {
	t.Helper()
	var o *string
	if err := in.pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT outcome FROM %q.a2a_cluster_work
		WHERE task_id = $1 AND kind = 'execute' ORDER BY id DESC LIMIT 1`, h.schema), string(id)).Scan(&o); err != nil {
		t.Fatal(err)
	}
	if o == nil {
		return ""
	}
	return *o
}

// #52 (1), K8: the execution answered its message (input required) and
// its instance died on the last allowed attempt (MaxAttempts 1): the
// rescuer's give-up goes through the answered check and completes the
// item; the task is not finished FAILED.
func TestGiveUpSparesAnsweredMessage(t *testing.T) {
	h := newHarness(t)
	h.opts.MaxAttempts = 1
	agent := newTurnAgent(false)
	a, b, _, id := answerThenLose(t, h, agent, "hi")
	ctx := t.Context()
	if err := b.cluster.Rescue(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := a.tasks.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Task.Status.State; got != a2a.TaskStateInputRequired {
		t.Fatalf("task %s after the give-up, want %s: an answered message was failed", got, a2a.TaskStateInputRequired)
	}
	if o := outcome(t, h, a, id); o != "answered" {
		t.Fatalf("item outcome %q, want answered", o)
	}
}

// #52 (10), K8: a message answered with a task-less reply (a Message, no
// task stored) whose instance died before completing its item is not run
// again: the answered check reads the replies as well as the log.
func TestAnsweredReplyNotRunAgain(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(false)
	a, b, res, id := answerThenLose(t, h, agent, "reply")
	if _, ok := res.(*a2a.Message); !ok {
		t.Fatalf("answer %T, want a message", res)
	}
	ctx := t.Context()
	if err := b.cluster.Rescue(ctx); err != nil {
		t.Fatal(err)
	}
	waitLease(t, ctx, a, id, "done")
	if n := agent.ran("m1"); n != 1 {
		t.Fatalf("the agent ran %d times for one message", n)
	}
	if o := outcome(t, h, a, id); o != "answered" {
		t.Fatalf("item outcome %q, want answered", o)
	}
}

// handOverAfter is a handler task store whose Update, once a write that
// leaves the task waiting for input committed on the instance, hands
// that instance's executions over (as a server shutting down past its
// grace period does), waits for the execution's context to end and
// fails with its error: the commit's answer was lost to the cancel.
type handOverAfter struct {
	taskstore.Store
	handOver func()
}

func (s handOverAfter) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	v, err := s.Store.Update(ctx, req)
	if err == nil && req.Task.Status.State == a2a.TaskStateInputRequired {
		s.handOver()
		<-ctx.Done()
		return taskstore.TaskVersionMissing, ctx.Err()
	}
	return v, err
}

// #52 (2), K8: HandOver stops an execution whose INPUT_REQUIRED write has
// committed; the item is not given back to be run again (its release
// would make the next claim attempt 1 again): the next instance does not
// run the agent a second time.
func TestHandOverAfterAnswerNotRunAgain(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(false)
	ctx := t.Context()
	var a *instance
	handed := make(chan error, 1)
	h.wrap = func(name string, ts taskstore.Store) taskstore.Store {
		return handOverAfter{Store: ts, handOver: func() {
			go func() {
				a.cluster.StopWork()
				_, err := a.cluster.HandOver(ctx)
				handed <- err
			}()
		}}
	}
	a = h.start(t, "a", agent)
	res, err := send(ctx, a, "", "m1", "hi")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-handed; err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	h.wrap = nil
	_ = h.start(t, "b", agent) // takes over whatever was handed over
	waitLease(t, ctx, a, id, "done")
	if n := agent.ran("m1"); n != 1 {
		t.Fatalf("the agent ran %d times for one message", n)
	}
	if o := outcome(t, h, a, id); o != "answered" {
		t.Fatalf("item outcome %q, want answered", o)
	}
}

// failAgent fails every execution before its first event.
type failAgent struct{}

func (failAgent) Execute(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, errors.New("the agent's backend is down")) }
}

func (failAgent) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(func(a2a.Event, error) bool) {}
}

// #52 (3), K4: a message for a new task whose every attempt fails before
// any task is stored is given up, and its caller gets an error (as in
// a2a-go's local mode) instead of waiting forever for an event of a task
// that will never exist.
func TestGiveUpWithoutTaskAnswersCaller(t *testing.T) {
	h := newHarness(t)
	h.opts.MaxAttempts = 2
	a, b := h.start(t, "a", failAgent{}), h.start(t, "b", failAgent{})
	a.cluster.StopWork() // b executes; the caller waits on a
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	res, err := send(ctx, a, "", "m1", "hi")
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendMessage answered %v, %v; want the give-up's error", res, err)
	}
	if !strings.Contains(err.Error(), "2 times") {
		t.Fatalf("error %q does not say why", err)
	}
	id := res0(t, h, b)
	waitLease(t, ctx, b, id, "done")
	if o := outcome(t, h, b, id); !strings.HasPrefix(o, "gave up") {
		t.Fatalf("item outcome %q, want gave up", o)
	}
}

// res0 is the task ID of the only work item (of a task never stored).
func res0(t *testing.T, h *harness, in *instance) a2a.TaskID {
	t.Helper()
	var id a2a.TaskID
	if err := in.pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT task_id FROM %q.a2a_cluster_work`, h.schema)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// expiredItem inserts an execution item of task id for message msgID,
// running under a lease that expired, on its attempt-th attempt.
func expiredItem(t *testing.T, h *harness, in *instance, id a2a.TaskID, msgID string, attempt int) {
	t.Helper()
	msg := &a2a.Message{ID: msgID, Role: a2a.MessageRoleUser, TaskID: id, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}
	body, err := json.Marshal(&workqueue.Payload{Type: workqueue.PayloadTypeExecute, TaskID: id,
		ExecuteRequest: &a2a.SendMessageRequest{Message: msg}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.pool.Exec(t.Context(), fmt.Sprintf(`INSERT INTO %q.a2a_cluster_work
		(task_id, kind, payload, state, attempt, lease_owner, lease_token, lease_expires)
		VALUES ($1, 'execute', $2, 'running', $3, 'dead', 'token', now() - interval '1 second')`, h.schema),
		string(id), body, attempt); err != nil {
		t.Fatal(err)
	}
}

// #52 (4), K4: a task at the store's size limit cannot take the give-up's
// status message. Its give-up still finishes it FAILED (without the
// message), and the same rescue pass takes over the other dead items.
func TestGiveUpOfTaskAtSizeLimit(t *testing.T) {
	h := newHarness(t)
	h.limits = engine.Limits{MaxTaskBytes: 4096}
	h.opts.MaxAttempts = 2
	a := h.start(t, "a", newTurnAgent(false))
	a.cluster.StopWork() // nothing claims the items taken over
	ctx := t.Context()
	for i, size := range []int{4000, 10} {
		id := a2a.TaskID(fmt.Sprintf("t-%d", i))
		task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart(strings.Repeat("x", size))}}}}
		if _, err := a.tasks.Create(ctx, task); err != nil {
			// The big one must fit until the give-up's message is added.
			for size > 0 && err != nil {
				size -= 10
				task.Artifacts[0].Parts = a2a.ContentParts{a2a.NewTextPart(strings.Repeat("x", size))}
				_, err = a.tasks.Create(ctx, task)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	expiredItem(t, h, a, "t-0", "m0", 2) // out of attempts: given up
	expiredItem(t, h, a, "t-1", "m1", 1) // taken over
	if err := a.cluster.Rescue(ctx); err != nil {
		t.Logf("rescue pass: %v", err)
	}
	if l, err := a.cluster.ExecutionLease(ctx, "t-1"); err != nil || l.State != "available" {
		t.Fatalf("the other dead item is %+v, %v after the rescue pass; want it taken over (available)", l, err)
	}
	st, err := a.tasks.Get(ctx, "t-0")
	if err != nil {
		t.Fatal(err)
	}
	if st.Task.Status.State != a2a.TaskStateFailed {
		t.Fatalf("task at the size limit is %s after its give-up, want FAILED", st.Task.Status.State)
	}
}

// logGate is an instance's cluster log whose first Get of task id, once
// armed, runs then (before returning the revision it read) calls then.
type logGate struct {
	pgcluster.LogStore
	id    a2a.TaskID
	armed *atomic.Bool
	then  func()
}

func (l logGate) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	rec, err := l.LogStore.Get(ctx, id)
	if id == l.id && l.armed.CompareAndSwap(true, false) {
		l.then()
	}
	return rec, err
}

// #52 (7), K2: a follow-up whose reader is created while the previous
// execution still runs, which then writes its final INPUT_REQUIRED before
// the follow-up's work item is inserted: the follow-up's stream carries
// its own execution's events, not the previous turn's final one.
func TestFollowUpReaderSkipsPreviousTurn(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(true)
	var armed atomic.Bool
	var a *instance
	id := a2a.TaskID("")
	h.wrapLog = func(name string, l pgcluster.LogStore) pgcluster.LogStore {
		if name != "b" {
			return l
		}
		return logGate{LogStore: l, id: "t-turns", armed: &armed, then: func() {
			close(agent.hold) // the first turn answers now
			deadline := time.Now().Add(waitFor)
			for time.Now().Before(deadline) {
				st, err := a.tasks.Get(context.Background(), id)
				if err == nil && st.Task.Status.State == a2a.TaskStateInputRequired {
					return
				}
				waitTick(context.Background())
			}
		}}
	}
	a = h.start(t, "a", agent)
	b := h.start(t, "b", agent)
	b.cluster.StopWork() // a executes both turns
	ctx := t.Context()
	id = "t-turns"
	if _, err := a.tasks.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired}}); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { _, err := send(ctx, a, id, "m1", "hi"); first <- err }()
	select {
	case <-agent.working:
	case <-time.After(waitFor):
		t.Fatal("the first turn never ran")
	}
	// The task was created INPUT_REQUIRED: the gate's wait for that
	// state means the first turn's answer only once its WORKING is
	// stored, which the agent's yield does not wait for.
	waitState(t, ctx, a, id, a2a.TaskStateWorking)
	armed.Store(true)
	msg := &a2a.Message{ID: "m2", Role: a2a.MessageRoleUser, TaskID: id, Parts: a2a.ContentParts{a2a.NewTextPart("done")}}
	events, done := stream(b.handler.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}))
	last := drain(t, events, done)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := state(last); got != a2a.TaskStateCompleted {
		t.Fatalf("the follow-up's stream ended with %T in %s, want its own COMPLETED", last, got)
	}
}

// failingReadLog is an instance's cluster log whose ReadLog of task id
// fails; reads counts its calls.
type failingReadLog struct {
	pgcluster.LogStore
	id    a2a.TaskID
	reads *atomic.Int32
}

func (l failingReadLog) ReadLog(ctx context.Context, id a2a.TaskID, after int64, limit int) ([]engine.LogEntry, error) {
	if id == l.id {
		l.reads.Add(1)
		return nil, errors.New("connection lost")
	}
	return l.LogStore.ReadLog(ctx, id, after, limit)
}

// #52 (4), K4, K8: a give-up that keeps failing — here because the
// answered check cannot read the log, which is no "not answered": the
// task is not failed on it — is set aside, counted and logged once, and
// the rescue pass goes on: the other dead items are taken over. The next
// pass skips the item set aside.
func TestRescueGoesOnPastFailingGiveUp(t *testing.T) {
	h := newHarness(t)
	h.opts.LeaseTimeout = time.Minute // rescue interval 15 s: the second pass below comes before
	h.opts.MaxAttempts = 2
	var reads atomic.Int32
	h.wrapLog = func(_ string, l pgcluster.LogStore) pgcluster.LogStore {
		return failingReadLog{LogStore: l, id: "t-0", reads: &reads}
	}
	a := h.start(t, "a", newTurnAgent(false))
	a.cluster.StopWork()
	ctx := t.Context()
	for _, id := range []a2a.TaskID{"t-0", "t-1"} {
		if _, err := a.tasks.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
	expiredItem(t, h, a, "t-0", "m0", 2)
	expiredItem(t, h, a, "t-1", "m1", 1)
	if err := a.cluster.Rescue(ctx); err != nil {
		t.Fatalf("rescue pass: %v", err)
	}
	if l, err := a.cluster.ExecutionLease(ctx, "t-1"); err != nil || l.State != "available" {
		t.Fatalf("the other dead item is %+v, %v after the rescue pass; want it taken over (available)", l, err)
	}
	st, err := a.tasks.Get(ctx, "t-0")
	if err != nil {
		t.Fatal(err)
	}
	if st.Task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("task t-0 is %s although its answered check failed", st.Task.Status.State)
	}
	if n := a.cluster.Stats().GiveUpsSetAside.Load(); n != 1 {
		t.Fatalf("%d items set aside, want 1", n)
	}
	before := reads.Load()
	if err := a.cluster.Rescue(ctx); err != nil {
		t.Fatalf("second rescue pass: %v", err)
	}
	if reads.Load() != before || a.cluster.Stats().GiveUpsSetAside.Load() != 1 {
		t.Fatalf("the second pass tried the item set aside again (%d reads, %d set aside)", reads.Load()-before,
			a.cluster.Stats().GiveUpsSetAside.Load())
	}
}

// K8, #52's suspected window: an answered message whose task's log was
// trimmed (idle for the log retention) before its item was taken over is
// not "not answered": the stored task decides (the message is in its
// history and the task waits for input), and the agent does not run
// again.
func TestAnsweredAfterLogTrimmed(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(false)
	a, b, _, id := answerThenLose(t, h, agent, "hi")
	ctx := t.Context()
	if _, err := a.store.TrimLog(ctx, time.Now().Add(time.Hour).UnixMicro(), 100); err != nil {
		t.Fatal(err)
	}
	if log, err := a.store.ReadLog(ctx, id, 0, 10); err != nil || len(log) != 0 {
		t.Fatalf("log after the trim: %d entries, %v", len(log), err)
	}
	if err := b.cluster.Rescue(ctx); err != nil {
		t.Fatal(err)
	}
	waitLease(t, ctx, a, id, "done")
	if n := agent.ran("m1"); n != 1 {
		t.Fatalf("the agent ran %d times for one message", n)
	}
}

// #52's suspected window, K4: a task deleted during its first execution
// (which then fails on its next write) is not created again under the
// same ID by the retry: the item names the task its attempt created, and
// a retry whose named task is gone is finished, not run.
func TestDeleteDuringFirstExecutionNotRecreated(t *testing.T) {
	h := newHarness(t)
	agent := newTurnAgent(true)
	a := h.start(t, "a", agent)
	ctx := t.Context()
	go func() { _, _ = send(ctx, a, "", "m1", "hi") }() // its reader's end is the task log's (engine/tasklog)
	var id a2a.TaskID
	select {
	case id = <-agent.working:
	case <-time.After(waitFor):
		t.Fatal("the execution never ran")
	}
	waitState(t, ctx, a, id, a2a.TaskStateWorking)
	if err := a.store.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	close(agent.hold) // its next write fails: the task is gone
	waitLease(t, ctx, a, id, "done")
	if _, err := a.tasks.Get(ctx, id); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("task after its deletion and the retry: %v, want not found (the agent ran %d times)", err, agent.ran("m1"))
	}
	if o := outcome(t, h, a, id); o != "task deleted" {
		t.Fatalf("item outcome %q, want task deleted", o)
	}
}

// answerAfterCheck is an instance's cluster log that, once armed, writes
// an answer to the armed task (input required, through tasks) right after
// a read of its log comes back with nothing more: the answer of a stalled
// execution whose write was in flight when its lease ran out, committing
// just after a give-up's answered check read the log.
type answerAfterCheck struct {
	pgcluster.LogStore
	id     *atomic.Pointer[a2a.TaskID]
	answer func(a2a.TaskID)
}

func (l answerAfterCheck) ReadLog(ctx context.Context, id a2a.TaskID, after int64, limit int) ([]engine.LogEntry, error) {
	got, err := l.LogStore.ReadLog(ctx, id, after, limit)
	if armed := l.id.Load(); err == nil && len(got) == 0 && armed != nil && *armed == id && l.id.CompareAndSwap(armed, nil) {
		l.answer(id)
	}
	return got, err
}

// K4, K8: a give-up whose answered check ran before the answer of a
// stalled execution committed (its write in flight when its lease ran
// out) does not overwrite that answer with FAILED: the check runs after
// the read of the task the FAILED write is conditional on, so the answer
// makes that write conflict and the next turn finds the message
// answered. Before, the check ran first and the give-up failed the task
// that had just answered.
func TestGiveUpAfterLateAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.opts.LeaseTimeout = time.Minute // no heartbeat nor background rescue during the test
	h.opts.MaxAttempts = 1
	var armed atomic.Pointer[a2a.TaskID]
	var tasks taskstore.Store // b's, set below, before the hook is armed
	answered := make(chan error, 1)
	h.wrapLog = func(_ string, l pgcluster.LogStore) pgcluster.LogStore {
		return answerAfterCheck{LogStore: l, id: &armed, answer: func(id a2a.TaskID) {
			ctx := context.Background()
			st, err := tasks.Get(ctx, id)
			if err == nil {
				task := *st.Task
				task.Status = a2a.TaskStatus{State: a2a.TaskStateInputRequired}
				ev := &a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: task.ContextID, Status: task.Status}
				_, err = tasks.Update(ctx, &taskstore.UpdateRequest{Task: &task, Event: ev, PrevVersion: st.Version})
			}
			answered <- err
		}}
	}
	agent := newGateAgent(1) // creates the task, then waits
	a, b := h.start(t, "a", agent), h.start(t, "b", agent)
	b.cluster.StopWork()
	tasks = b.tasks
	ctx := t.Context()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	_, _ = stream(a.handler.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}))
	var id a2a.TaskID
	select {
	case id = <-agent.started:
	case <-time.After(waitFor):
		t.Fatal("the execution did not start")
	}
	waitState(t, ctx, b, id, a2a.TaskStateSubmitted)
	a.cluster.Stall(time.Hour) // a stalls: its lease runs out
	if _, err := a.pool.Exec(ctx, fmt.Sprintf(`UPDATE %q.a2a_cluster_work SET lease_expires = now() - interval '1 second'
		WHERE task_id = $1 AND state = 'running'`, h.schema), string(id)); err != nil {
		t.Fatal(err)
	}
	armed.Store(&id)
	if err := b.cluster.Rescue(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the late answer: %v", err)
		}
	default:
		t.Fatal("the give-up never read the task's log")
	}
	st, err := b.tasks.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Task.Status.State; got != a2a.TaskStateInputRequired {
		t.Fatalf("task %s after the give-up, want %s: the late answer was overwritten", got, a2a.TaskStateInputRequired)
	}
	if o := outcome(t, h, b, id); o != "answered" {
		t.Fatalf("item outcome %q, want answered", o)
	}
}

// workItems describes the work items in the database, for a failure.
func workItems(t *testing.T, h *harness, in *instance) string {
	rows, err := in.pool.Query(context.Background(), fmt.Sprintf(`SELECT id, task_id, kind, state, attempt,
		coalesce(lease_owner, ''), coalesce(outcome, ''), lease_expires > now() FROM %q.a2a_cluster_work ORDER BY id`, h.schema))
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var (
			id, attempt                  int64
			task, kind, state, owner, oc string
			leased                       *bool
		)
		if err := rows.Scan(&id, &task, &kind, &state, &attempt, &owner, &oc, &leased); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "[%d %s %s %s attempt=%d owner=%q outcome=%q leased=%v] ", id, task, kind, state, attempt, owner, oc, leased != nil && *leased)
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	return b.String()
}

// executingOnA starts instances a and b (b works on nothing; leases of a
// minute, so no heartbeat nor rescue of their own during a test, and
// maxAttempts) and an execution on a that creates its task and waits;
// it returns them and the task.
func executingOnA(t *testing.T, maxAttempts int) (h *harness, a, b *instance, id a2a.TaskID) {
	t.Helper()
	h = newHarness(t)
	h.opts.LeaseTimeout = time.Minute
	h.opts.MaxAttempts = maxAttempts
	agent := newGateAgent(1)
	a, b = h.start(t, "a", agent), h.start(t, "b", agent)
	b.cluster.StopWork()
	_, _ = stream(a.handler.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))}))
	select {
	case id = <-agent.started:
	case <-time.After(waitFor):
		t.Fatal("the execution did not start")
	}
	return h, a, b, id
}

// K4: a lease that has run out in the table is not renewed. A rescuer
// that listed the item as expired gives it up (the task FAILED, the item
// finished) in later statements, fenced by the token only; a heartbeat
// that renewed the lease meanwhile (the holder's, late after its
// connection died under the previous ones) left the holder executing a
// task the rescuer then failed under it (review by helper-40). The
// heartbeat statement now renews nothing once the lease has run out, and
// the holder stops (ErrLeaseLost).
func TestHeartbeatAfterExpiryRenewsNothing(t *testing.T) {
	h, a, _, id := executingOnA(t, 0)
	ctx := t.Context()
	var item int64
	var token string
	if err := a.pool.QueryRow(ctx, fmt.Sprintf(`SELECT id, lease_token FROM %q.a2a_cluster_work WHERE task_id = $1 AND state = 'running'`, h.schema), string(id)).Scan(&item, &token); err != nil {
		t.Fatal(err)
	}
	if n, err := a.cluster.Heartbeat(ctx, item, token); err != nil || n != 1 {
		t.Fatalf("a heartbeat within the lease renewed %d rows (%v), want 1", n, err)
	}
	if _, err := a.pool.Exec(ctx, fmt.Sprintf(`UPDATE %q.a2a_cluster_work SET lease_expires = now() - interval '1 second' WHERE id = $1`, h.schema), item); err != nil {
		t.Fatal(err)
	}
	if n, err := a.cluster.Heartbeat(ctx, item, token); err != nil || n != 0 {
		t.Errorf("a heartbeat after the lease ran out renewed %d rows (%v), want 0: a rescuer that listed it expired may be giving it up", n, err)
	}
}

// K4: a heartbeat begun before its lease ran out that commits after a
// rescuer listed the item as expired keeps the item its holder's: the
// rescuer takes the item under a token of its own only if the lease has
// still run out (re-read after the heartbeat's commit), and gives up
// nothing otherwise (review by helper-41). Before, the rescuer wrote
// FAILED on the task its renewed holder went on executing. The heartbeat
// in flight is a transaction holding the renewed row uncommitted while
// the rescuer runs; it commits once the rescuer waits for its row.
func TestRescuerSkipsLeaseRenewedMeanwhile(t *testing.T) {
	h, a, b, id := executingOnA(t, 1)
	ctx := t.Context()
	waitState(t, ctx, b, id, a2a.TaskStateSubmitted)
	work := fmt.Sprintf("%q.a2a_cluster_work", h.schema)
	if _, err := a.pool.Exec(ctx, `UPDATE `+work+` SET lease_expires = now() - interval '1 second' WHERE task_id = $1`, string(id)); err != nil {
		t.Fatal(err)
	}
	hb, err := a.pool.Begin(ctx) // the holder's heartbeat, in flight
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Rollback(context.WithoutCancel(ctx))
	if _, err := hb.Exec(ctx, `UPDATE `+work+` SET lease_expires = now() + interval '1 minute' WHERE task_id = $1`, string(id)); err != nil {
		t.Fatal(err)
	}
	rescued := make(chan error, 1)
	go func() { rescued <- b.cluster.Rescue(ctx) }()
	for waiting := false; !waiting; { // until the rescuer waits for the heartbeat's row
		select {
		case err := <-rescued:
			t.Fatalf("the rescue ended (%v) without waiting for the item's row", err)
		default:
		}
		if err := a.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE '%a2a_cluster_work%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := hb.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-rescued; err != nil {
		t.Fatal(err)
	}
	st, err := b.tasks.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.cluster.ExecutionLease(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Task.Status.State == a2a.TaskStateFailed || l.State == "done" {
		t.Errorf("the holder renewed its lease before the rescuer's give-up wrote, yet the rescuer gave it up: task %s, item %+v", st.Task.Status.State, l)
	}
}
