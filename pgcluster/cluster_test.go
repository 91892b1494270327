package pgcluster_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgcluster"
	"github.com/a2astore/a2astore/pgstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// waitFor bounds every wait of these tests: a condition not met by then
// is a failure, not a reason to sleep longer.
const waitFor = 20 * time.Second

// gateAgent emits a submitted task, then one working update per value
// received on steps, then completes. It reports the cause of its
// context's end on stopped when stopped early.
type gateAgent struct {
	steps   chan struct{}
	n       int
	stopped chan error
	started chan a2a.TaskID
}

func newGateAgent(n int) *gateAgent {
	return &gateAgent{steps: make(chan struct{}), n: n, stopped: make(chan error, 10), started: make(chan a2a.TaskID, 10)}
}

func (a *gateAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		a.started <- ec.TaskID
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		for range a.n {
			select {
			case <-a.steps:
			case <-ctx.Done():
				a.stopped <- context.Cause(ctx)
				return
			}
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (a *gateAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// instance is one server's share of a test cluster.
type instance struct {
	name    string
	cluster *pgcluster.Cluster
	handler a2asrv.RequestHandler
	tasks   taskstore.Store // unscoped
	pool    *pgxpool.Pool
	store   *pgstore.Store
}

type harness struct {
	dsn, schema string
	opts        pgcluster.Options
	owners      bool // apply authz.OwnerPolicy
	// wrap, when set, wraps an instance's handler task store (the one
	// a2a-go's cluster mode uses: frontend reads and execution writes).
	wrap func(name string, ts taskstore.Store) taskstore.Store
	// push, when set, is the instances' push configuration store
	// (through FencePushConfigs; nothing is sent).
	push push.ConfigStore
	// wrapLog, when set, wraps the store an instance's cluster reads
	// (Options.Log).
	wrapLog func(name string, l pgcluster.LogStore) pgcluster.LogStore
	// poolConfig, when set, adjusts an instance's pool before it opens.
	poolConfig func(name string, cfg *pgxpool.Config)
	// limits are the task store's (pgstore.Options.Limits).
	limits engine.Limits
}

func newHarness(t testing.TB) *harness {
	dsn := pgtest.DSN(t)
	return &harness{dsn: dsn, schema: pgtest.Schema(t, dsn), opts: pgcluster.Options{
		LeaseTimeout: time.Second,
		RetryDelay:   10 * time.Millisecond,
		// Far beyond every wait of the tests: delivery is woken by
		// notifications or the tests fail.
		PollInterval: time.Hour,
	}}
}

func (h *harness) start(t testing.TB, name string, agent a2asrv.AgentExecutor) *instance {
	t.Helper()
	ctx := t.Context()
	pcfg, err := pgxpool.ParseConfig(h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if h.poolConfig != nil {
		h.poolConfig(name, pcfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := pgstore.New(ctx, pool, pgcluster.StoreOptions(pgstore.Options{Schema: h.schema, Limits: h.limits}))
	if err != nil {
		t.Fatal(err)
	}
	system := a2aserver.TaskStore(store)
	opts := h.opts
	opts.Schema, opts.Instance, opts.TaskStore, opts.Log = h.schema, name, system, store
	if h.wrapLog != nil {
		opts.Log = h.wrapLog(name, store)
	}
	c, err := pgcluster.New(ctx, pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	select {
	case <-c.Connected():
	case <-time.After(waitFor):
		t.Fatal("listener did not connect")
	}
	ts := system
	var interceptors []a2asrv.CallInterceptor
	if h.owners {
		ts = a2aserver.TaskStore(authz.New(store, authz.OwnerPolicy{}))
		interceptors = append(interceptors, a2aserver.HeaderIdentity{Header: "x-caller", Required: true})
	}
	interceptors = append(interceptors, a2aserver.TaskGuard(ts))
	if h.wrap != nil {
		ts = h.wrap(name, ts)
	}
	options := []a2asrv.RequestHandlerOption{a2asrv.WithCallInterceptors(interceptors...),
		a2asrv.WithClusterMode(a2asrv.ClusterConfig{QueueManager: c.QueueManager(), WorkQueue: c.WorkQueue(), TaskStore: c.FenceTaskStore(ts)})}
	if h.push != nil {
		options = append(options, a2asrv.WithPushNotifications(pgcluster.FencePushConfigs(h.push), nopSender{}))
	}
	handler, err := a2aserver.SubscribeFromLog(a2asrv.NewHandler(agent, options...), ts, store, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &instance{name: name, cluster: c, handler: handler, tasks: system, pool: pool, store: store}
}

// caller is a call context carrying identity user in the x-caller header.
func caller(ctx context.Context, user string) context.Context {
	params := map[string][]string{}
	if user != "" {
		params["x-caller"] = []string{user}
	}
	ctx, _ = a2asrv.NewCallContext(ctx, a2asrv.NewServiceParams(params))
	return ctx
}

// stream collects the events of seq on a goroutine until it ends.
func stream(seq iter.Seq2[a2a.Event, error]) (<-chan a2a.Event, <-chan error) {
	events, done := make(chan a2a.Event, 100), make(chan error, 1)
	go func() {
		defer close(events)
		for ev, err := range seq {
			if err != nil {
				done <- err
				return
			}
			events <- ev
		}
		done <- nil
	}()
	return events, done
}

func next(t *testing.T, events <-chan a2a.Event) a2a.Event {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("stream ended early")
		}
		return ev
	case <-time.After(waitFor):
		t.Fatal("no event")
	}
	return nil
}

func state(ev a2a.Event) a2a.TaskState {
	switch v := ev.(type) {
	case *a2a.Task:
		return v.Status.State
	case *a2a.TaskStatusUpdateEvent:
		return v.Status.State
	}
	return ""
}

// sendAndWait sends a message on in and returns the task ID once the
// agent runs it (on whichever instance).
func sendAndWait(t *testing.T, ctx context.Context, in *instance, agent *gateAgent) (a2a.TaskID, <-chan a2a.Event) {
	t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	events, _ := stream(in.handler.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}))
	first := next(t, events)
	task, ok := first.(*a2a.Task)
	if !ok {
		t.Fatalf("first event %T, want the submitted task", first)
	}
	return task.ID, events
}

// other returns the instance of ins that does not hold taskID's lease.
func other(t *testing.T, ctx context.Context, taskID a2a.TaskID, ins ...*instance) (executor, rest *instance) {
	t.Helper()
	l, err := ins[0].cluster.ExecutionLease(ctx, taskID)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if in.name == l.Owner {
			executor = in
		} else {
			rest = in
		}
	}
	if executor == nil || rest == nil {
		t.Fatalf("lease owner %q is not one of the instances", l.Owner)
	}
	return executor, rest
}

// K1, K2: a subscriber on the instance that does not execute the task
// receives every later event in order, the terminal one last, and the
// persisted versions are the store revisions 1..n.
func TestSubscribeOnOtherInstance(t *testing.T) {
	h := newHarness(t)
	agent := newGateAgent(3)
	a, b := h.start(t, "a", agent), h.start(t, "b", agent)
	ctx := t.Context()
	id, sendEvents := sendAndWait(t, ctx, a, agent)
	_, sub := other(t, ctx, id, a, b)

	events, done := stream(sub.handler.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}))
	snap := next(t, events)
	if state(snap) != a2a.TaskStateSubmitted {
		t.Fatalf("snapshot state %q", state(snap))
	}
	var got []a2a.TaskState
	for range 3 {
		agent.steps <- struct{}{}
		got = append(got, state(next(t, events)))
	}
	got = append(got, state(next(t, events)))
	want := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateWorking, a2a.TaskStateWorking, a2a.TaskStateCompleted}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("subscriber on %s got %v, want %v", sub.name, got, want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := <-events; ok {
		t.Fatal("event after the terminal one")
	}
	// The sender's stream ends the same way.
	var last a2a.Event
	for ev := range sendEvents {
		last = ev
	}
	if state(last) != a2a.TaskStateCompleted {
		t.Fatalf("sender's last event %v", last)
	}
	// K7: the log holds one entry per revision, 1..the store's.
	st, err := a.tasks.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	log, err := a.store.ReadLog(ctx, id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range log {
		if l.Revision != int64(i+1) {
			t.Fatalf("entry %d has revision %d", i+1, l.Revision)
		}
	}
	if len(log) == 0 || log[len(log)-1].Revision != int64(st.Version) || !log[len(log)-1].State.Terminal() {
		t.Fatalf("log of %d entries, store revision %d", len(log), st.Version)
	}
}

// K2, K7: readers follow the task log: one created before the task exists
// gets every entry from revision 1, one created later starts after the
// revision it found; history revisions deliver nothing; the final entry
// (terminal or interrupted) comes without version, so that a2a-go's
// subscription cannot skip it as older than its snapshot.
func TestEventReaderFromLog(t *testing.T) {
	h := newHarness(t)
	a, b := h.start(t, "a", newGateAgent(0)), h.start(t, "b", newGateAgent(0))
	ctx := t.Context()
	id := a2a.TaskID("t1")
	early, err := b.cluster.QueueManager().CreateReader(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	v, err := a.tasks.Create(ctx, task) // written by the other instance
	if err != nil {
		t.Fatal(err)
	}
	late, err := b.cluster.QueueManager().CreateReader(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	update := func(ev a2a.Event) {
		t.Helper()
		if v, err = a.tasks.Update(ctx, &taskstore.UpdateRequest{Task: task, Event: ev, PrevVersion: v}); err != nil {
			t.Fatal(err)
		}
	}
	task.Status.Message = &a2a.Message{ID: "s1", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.NewTextPart("busy")}}
	update(&a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: "c", Status: task.Status})
	msg := &a2a.Message{ID: "m2", Role: a2a.MessageRoleUser, TaskID: id, Parts: a2a.ContentParts{a2a.NewTextPart("more")}}
	task.History = append(task.History, msg)
	update(msg) // a history revision
	task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted}
	update(&a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: "c", Status: task.Status})
	read := func(r eventqueue.Reader) []int64 {
		var vs []int64
		for {
			rctx, cancel := context.WithTimeout(ctx, waitFor)
			msg, err := r.Read(rctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			vs = append(vs, int64(msg.TaskVersion))
			if state(msg.Event) == a2a.TaskStateCompleted {
				return vs
			}
		}
	}
	if got := fmt.Sprint(read(early)); got != "[1 2 0]" {
		t.Errorf("early reader got versions %s, want [1 2 0] (the history revision 3 delivers nothing; the final one unversioned)", got)
	}
	if got := fmt.Sprint(read(late)); got != "[2 0]" {
		t.Errorf("late reader got versions %s, want [2 0]", got)
	}
	_ = early.Close()
	rctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	if _, err := early.Read(rctx); !errors.Is(err, eventqueue.ErrQueueClosed) {
		t.Errorf("read after close: %v, want ErrQueueClosed", err)
	}
}

// K3: CancelTask on the instance that does not execute the task cancels
// the execution's context on the other, the task ends CANCELED and stays so.
func TestCancelOnOtherInstance(t *testing.T) {
	h := newHarness(t)
	// No lease renewal during the test: a renewal that read the task
	// CANCELED would stop the execution before the cancel's notification
	// (CancelsSeen, not CanceledHere), and this test is about the latter.
	h.opts.LeaseTimeout = time.Minute
	agent := newGateAgent(1)
	a, b := h.start(t, "a", agent), h.start(t, "b", agent)
	ctx := t.Context()
	id, _ := sendAndWait(t, ctx, a, agent)
	executor, canceler := other(t, ctx, id, a, b)
	task, err := canceler.handler.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel answered %q", task.Status.State)
	}
	select {
	case cause := <-agent.stopped:
		if !errors.Is(cause, pgcluster.ErrCanceled) {
			t.Fatalf("execution stopped by %v, want pgcluster.ErrCanceled", cause)
		}
	case <-time.After(waitFor):
		t.Fatalf("execution on %s still running after the cancel on %s", executor.name, canceler.name)
	}
	waitLease(t, ctx, a, id, "done")
	st, err := a.tasks.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("task %q after the execution stopped", st.Task.Status.State)
	}
	if n := executor.cluster.Stats().CanceledHere.Load(); n != 1 {
		t.Fatalf("executor canceled %d executions, want 1", n)
	}
}

// waitLease waits until taskID's execution item is in state.
func waitLease(t *testing.T, ctx context.Context, in *instance, id a2a.TaskID, state string) pgcluster.Lease {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		l, err := in.cluster.ExecutionLease(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if l.State == state {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution item %+v, want state %s", l, state)
		}
		waitTick(ctx)
	}
}

// waitTick paces condition polls (a condition wait, not a sleep to let
// something happen).
func waitTick(ctx context.Context) {
	t := time.NewTimer(5 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// K5: the caller's identity travels with the work: the task created on
// the executing instance is the sender's, and on every instance only the
// owner sees it.
func TestOwnerAcrossInstances(t *testing.T) {
	h := newHarness(t)
	h.owners = true
	agent := newGateAgent(0)
	a, b := h.start(t, "a", agent), h.start(t, "b", agent)
	ctx := t.Context()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	res, err := a.handler.SendMessage(caller(ctx, "alice"), &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	for _, in := range []*instance{a, b} {
		if _, err := in.handler.GetTask(caller(ctx, "alice"), &a2a.GetTaskRequest{ID: id}); err != nil {
			t.Errorf("alice on %s: %v", in.name, err)
		}
		if _, err := in.handler.GetTask(caller(ctx, "bob"), &a2a.GetTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("bob on %s: %v, want task not found", in.name, err)
		}
		if _, err := in.handler.CancelTask(caller(ctx, "bob"), &a2a.CancelTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("bob cancels on %s: %v, want task not found", in.name, err)
		}
		for _, err := range in.handler.SubscribeToTask(caller(ctx, "bob"), &a2a.SubscribeToTaskRequest{ID: id}) {
			if !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("bob subscribes on %s: %v, want task not found", in.name, err)
			}
			break
		}
		list, err := in.handler.ListTasks(caller(ctx, "bob"), &a2a.ListTasksRequest{})
		if err != nil || len(list.Tasks) != 0 {
			t.Errorf("bob lists on %s: %v, %v", in.name, list, err)
		}
	}
}

// K4: the work of a dead instance (an expired lease) is taken over by a
// live one, which resumes the stored task; a task out of attempts is
// finished as FAILED with a reason.
func TestTakeover(t *testing.T) {
	for _, tc := range []struct {
		name    string
		attempt int
		want    a2a.TaskState
	}{
		{"rerun", 1, a2a.TaskStateCompleted},
		{"give-up", pgcluster.DefaultMaxAttempts, a2a.TaskStateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			agent := newGateAgent(0)
			live := h.start(t, "live", agent)
			ctx := t.Context()
			// What a dead instance leaves: a WORKING task and its
			// execution item claimed, lease expired.
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
			task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "ctx", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}, History: []*a2a.Message{msg}}
			msg.TaskID, msg.ContextID = "", ""
			if _, err := live.tasks.Create(ctx, task); err != nil {
				t.Fatal(err)
			}
			payload := fmt.Sprintf(`{"Type":"execute","TaskID":%q,"ExecuteRequest":{"message":{"messageId":%q,"role":"ROLE_USER","parts":[{"text":"hi"}]}}}`, task.ID, msg.ID)
			_, err := live.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %q.a2a_cluster_work (task_id, kind, payload, state, attempt, lease_owner, lease_token, lease_expires)
				VALUES ($1, 'execute', $2, 'running', $3, 'dead', 'tok', now() - interval '1 second')`, h.schema), string(task.ID), payload, tc.attempt)
			if err != nil {
				t.Fatal(err)
			}
			if err := live.cluster.Rescue(ctx); err != nil {
				t.Fatal(err)
			}
			l := waitLease(t, ctx, live, task.ID, "done")
			st, err := live.tasks.Get(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st.Task.Status.State != tc.want {
				t.Fatalf("task %q after takeover (lease %+v), want %q", st.Task.Status.State, l, tc.want)
			}
			if tc.want == a2a.TaskStateFailed && st.Task.Status.Message == nil {
				t.Fatal("failed without a reason")
			}
			if tc.want == a2a.TaskStateCompleted && (l.Owner != "live" || l.Attempt != 2) {
				t.Fatalf("lease %+v, want owner live at attempt 2", l)
			}
		})
	}
}

// K2: when the notification connection is terminated, the listener
// reconnects and a waiting reader still gets the event written while it
// was away (its notification reached nobody): the listener is held before
// reconnecting until the event is committed, and the safety-net poll is an
// hour, so only the reconnect's catch-up can deliver it.
func TestListenerReconnect(t *testing.T) {
	h := newHarness(t)
	a, b := h.start(t, "a", newGateAgent(0)), h.start(t, "b", newGateAgent(0))
	ctx := t.Context()
	admin, err := pgxpool.New(ctx, pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	idle := make(chan struct{}, 1)
	a.cluster.OnIdle(func(a2a.TaskID) {
		select {
		case idle <- struct{}{}:
		default:
		}
	})
	reconnecting, release := make(chan struct{}), make(chan struct{})
	var hold, unhold sync.Once
	a.cluster.BeforeReconnect(func() {
		hold.Do(func() {
			close(reconnecting)
			<-release
		})
	})
	// Before the cluster's Close (cleanups run last first).
	t.Cleanup(func() { unhold.Do(func() { close(release) }) })
	id := a2a.TaskID("t-reconnect")
	r, err := a.cluster.QueueManager().CreateReader(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan *eventqueue.Message, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		rctx, cancel := context.WithTimeout(ctx, waitFor)
		defer cancel()
		msg, err := r.Read(rctx)
		if err != nil {
			t.Error(err)
			return
		}
		got <- msg
	})
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(waitFor):
			t.Fatal(what)
		}
	}
	wait(idle, "reader did not wait")
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		pgcluster.ListenerApplicationName+" a").Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminated %d listener connections: %v", n, err)
	}
	wait(reconnecting, "listener did not notice the lost connection")
	// Written by the other instance: only a's listener could wake a's
	// reader.
	if _, err := b.tasks.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	unhold.Do(func() { close(release) })
	select {
	case msg := <-got:
		if msg.TaskVersion != 1 {
			t.Fatalf("version %d", msg.TaskVersion)
		}
	case <-time.After(waitFor):
		t.Fatal("the event written while the listener was away was not delivered")
	}
	if a.cluster.Stats().Reconnects.Load() == 0 {
		t.Fatal("listener did not count its reconnect")
	}
}

// K6: the cleaner drops finished work items, task-less replies and the
// event rows of the release before the log, older than the retention
// window, and keeps the rest. (Push configs are pushdelivery's: they go
// with their task.)
func TestCleaner(t *testing.T) {
	h := newHarness(t)
	h.opts.Retention = time.Hour
	a := h.start(t, "a", newGateAgent(0))
	ctx := t.Context()
	for _, tk := range []struct {
		id    a2a.TaskID
		state a2a.TaskState
	}{{"ended", a2a.TaskStateCompleted}, {"running", a2a.TaskStateWorking}, {"recent", a2a.TaskStateCompleted}} {
		if _, err := a.tasks.Create(ctx, &a2a.Task{ID: tk.id, ContextID: "c", Status: a2a.TaskStatus{State: tk.state}}); err != nil {
			t.Fatal(err)
		}
	}
	w, _ := a.cluster.QueueManager().CreateWriter(ctx, "reply")
	reply := &a2a.Message{ID: "r", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}
	if err := w.Write(ctx, &eventqueue.Message{Event: reply}); err != nil {
		t.Fatal(err)
	}
	q := func(sql string) {
		t.Helper()
		if _, err := a.pool.Exec(ctx, fmt.Sprintf(sql, h.schema)); err != nil {
			t.Fatal(err)
		}
	}
	q(`UPDATE %q.a2a_tasks SET updated_at = now() - interval '2 hours' WHERE id = 'ended'`)
	q(`INSERT INTO %q.a2a_cluster_events (task_id, seq, version, final, event, created_at) VALUES
		('legacy', 1, 1, false, '{}', now() - interval '2 hours'), ('legacy', 2, 2, true, '{}', now() - interval '2 hours'),
		('reply-old', 1, 0, true, '{}', now() - interval '2 hours')`)
	q(`INSERT INTO %q.a2a_cluster_work (task_id, kind, payload, state, finished_at) VALUES
		('old', 'execute', '{}', 'done', now() - interval '2 hours'),
		('new', 'execute', '{}', 'done', now()),
		('open', 'execute', '{}', 'available', NULL)`)
	if err := a.cluster.Clean(ctx); err != nil {
		t.Fatal(err)
	}
	count := func(sql string) (n int) {
		t.Helper()
		if err := a.pool.QueryRow(ctx, fmt.Sprintf(sql, h.schema)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		sql  string
		want int
		what string
	}{
		{`SELECT count(*) FROM %q.a2a_cluster_events WHERE task_id IN ('legacy', 'reply-old')`, 0, "old event rows"},
		{`SELECT count(*) FROM %q.a2a_cluster_events WHERE task_id = 'reply'`, 1, "recent reply"},
		{`SELECT count(*) FROM %q.a2a_cluster_work WHERE task_id IN ('new', 'open')`, 2, "recent or open work items"},
		{`SELECT count(*) FROM %q.a2a_cluster_work WHERE task_id = 'old'`, 0, "old finished work items"},
	} {
		if n := count(c.sql); n != c.want {
			t.Errorf("%d %s left, want %d", n, c.what, c.want)
		}
	}
}

// K4: an instance stalled past its lease (its clock jumps 2 lease timeouts
// ahead, as after a pause) whose work another instance took over writes
// nothing more to the task: its agent's next event is refused by the
// fenced task store, and the task is the new owner's to complete.
// Without FenceTaskStore the stalled execution stores its event under
// the new owner (and the new owner's first write then conflicts).
func TestStalledExecutionWritesNothing(t *testing.T) {
	h := newHarness(t)
	h.opts.LeaseTimeout = time.Minute // no heartbeat or rescue of its own during the test
	ctx := t.Context()
	agentA, agentB := newGateAgent(2), newGateAgent(2)
	a := h.start(t, "a", agentA)
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	if _, err := a.handler.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
		t.Fatal(err)
	}
	var id a2a.TaskID
	select {
	case id = <-agentA.started:
	case <-time.After(waitFor):
		t.Fatal("a did not start the execution")
	}
	waitRevision := func(want taskstore.TaskVersion) *taskstore.StoredTask {
		t.Helper()
		deadline := time.Now().Add(waitFor)
		for {
			st, err := a.tasks.Get(ctx, id)
			if err == nil && st.Version == want {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("task at %+v (%v), want revision %d", st, err, want)
			}
			waitTick(ctx)
		}
	}
	waitRevision(1) // submitted
	// a stalls (and claims nothing meanwhile); its lease expires and b
	// takes the work over.
	a.cluster.StopWork()
	a.cluster.Stall(2 * h.opts.LeaseTimeout)
	if _, err := a.pool.Exec(ctx, fmt.Sprintf(`UPDATE %q.a2a_cluster_work SET lease_expires = now() - interval '1 second' WHERE task_id = $1`, h.schema), string(id)); err != nil {
		t.Fatal(err)
	}
	b := h.start(t, "b", agentB)
	if err := b.cluster.Rescue(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-agentB.started:
	case <-time.After(waitFor):
		t.Fatal("b did not take the execution over")
	}
	// a wakes up and its agent goes on: nothing of it is stored.
	agentA.steps <- struct{}{}
	select {
	case <-agentA.stopped:
	case <-time.After(waitFor):
		t.Fatal("the stalled execution on a did not stop")
	}
	if st := waitRevision(1); st.Task.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("task %q after the stalled execution's event, want still submitted", st.Task.Status.State)
	}
	agentB.steps <- struct{}{}
	agentB.steps <- struct{}{}
	if st := waitRevision(4); st.Task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("task %q after b's execution, want completed", st.Task.Status.State)
	}
}

// Any valid schema name works, up to PostgreSQL's 63 bytes: the
// notification channel ("a2a_cluster:" and the schema) would be longer
// than an identifier may be, which pg_notify refuses ("channel name too
// long") — every event and work write failed — and LISTEN silently
// truncates. A subscriber on the other instance gets every event.
func TestLongSchemaName(t *testing.T) {
	h := newHarness(t)
	h.schema = h.schema + "_" + strings.Repeat("x", 62-len(h.schema))
	ctx := t.Context()
	admin, err := pgxpool.New(ctx, h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ident := pgx.Identifier{h.schema}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+ident+" CASCADE") })
	agent := newGateAgent(1)
	a, b := h.start(t, "a", agent), h.start(t, "b", agent)
	id, _ := sendAndWait(t, ctx, a, agent)
	_, sub := other(t, ctx, id, a, b)
	events, done := stream(sub.handler.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}))
	next(t, events) // snapshot
	agent.steps <- struct{}{}
	if st := state(next(t, events)); st != a2a.TaskStateWorking {
		t.Fatalf("first event %q on %s", st, sub.name)
	}
	if st := state(next(t, events)); st != a2a.TaskStateCompleted {
		t.Fatalf("last event %q on %s", st, sub.name)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
