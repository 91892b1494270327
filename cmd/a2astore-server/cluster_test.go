package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/loadgen/load"
	"github.com/a2astore/a2astore/pgcluster"
)

// clusterWait bounds every wait of the cluster tests: a condition not met
// by then fails the test.
const clusterWait = 30 * time.Second

// clusterServer is one -cluster server process of a test.
type clusterServer struct {
	*child
	name   string
	killed bool
}

// clusterFixture is N cluster servers on one test database.
type clusterFixture struct {
	dsn     string
	db      *pgxpool.Pool
	servers []*clusterServer
}

// startCluster starts len(names) servers with -cluster on one new
// database, args added to each, in parallel.
func startCluster(t *testing.T, names []string, args ...string) *clusterFixture {
	t.Helper()
	if testing.Short() {
		t.Skip("starts server processes")
	}
	f := &clusterFixture{dsn: pgtest.DSN(t)}
	f.servers = make([]*clusterServer, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			a := append([]string{"-backend", "pg", "-pg-dsn", f.dsn, "-cluster", "-cluster-instance", name,
				"-cluster-lease", "1s", "-cluster-poll", "1h",
				"-http", "127.0.0.1:0", "-grpc", "127.0.0.1:0", "-metrics", ""}, args...)
			c, err := spawn(a...)
			if err != nil {
				errs[i] = err
				return
			}
			f.servers[i] = &clusterServer{child: c, name: name}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range f.servers {
			if s != nil && !s.killed {
				s.stopCleanly(t)
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if f.db, err = pgxpool.New(context.Background(), f.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.db.Close)
	return f
}

// lease returns the latest execution item of id ("" owner when none yet).
func (f *clusterFixture) lease(t *testing.T, id a2a.TaskID) pgcluster.Lease {
	t.Helper()
	var l pgcluster.Lease
	var owner *string
	var err error
	for range 3 { // a database restart leaves the pool dead connections to drop
		err = f.db.QueryRow(t.Context(), `SELECT lease_owner, state, attempt FROM a2a_cluster_work
		WHERE task_id = $1 AND kind = 'execute' ORDER BY id DESC LIMIT 1`, string(id)).Scan(&owner, &l.State, &l.Attempt)
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if owner != nil {
		l.Owner = *owner
	}
	return l
}

// waitUntil polls cond (a condition wait, paced, bounded by clusterWait).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(clusterWait)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// executing waits until a server holds id's lease and returns it and
// another server.
func (f *clusterFixture) executing(t *testing.T, id a2a.TaskID) (executor, other *clusterServer) {
	t.Helper()
	var l pgcluster.Lease
	waitUntil(t, "a running execution", func() bool { l = f.lease(t, id); return l.State == "running" })
	for _, s := range f.servers {
		if s.name == l.Owner {
			executor = s
		} else if other == nil && !s.killed {
			other = s
		}
	}
	if executor == nil || other == nil {
		t.Fatalf("lease owner %q", l.Owner)
	}
	return executor, other
}

// waitTask polls GetTask of id on c until its state satisfies ok and
// returns the task.
func waitTask(t *testing.T, c *a2aclient.Client, id a2a.TaskID, what string, ok func(a2a.TaskState) bool) *a2a.Task {
	t.Helper()
	var got *a2a.Task
	waitUntil(t, what, func() bool {
		var err error
		got, err = c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
		return err == nil && ok(got.Status.State)
	})
	return got
}

func sendReturning(t *testing.T, ctx context.Context, c *a2aclient.Client) a2a.TaskID {
	t.Helper()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")),
		Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage returned %T", res)
	}
	return task.ID
}

// step is the step number a synthetic agent's status event carries in its
// message ("step N"), 0 for none; terminal reports a terminal state.
func step(ev a2a.Event) (n int, st a2a.TaskState) {
	var status a2a.TaskStatus
	switch v := ev.(type) {
	case *a2a.Task:
		status = v.Status
	case *a2a.TaskStatusUpdateEvent:
		status = v.Status
	default:
		return -1, ""
	}
	if status.Message != nil && len(status.Message.Parts) == 1 {
		_, _ = fmt.Sscanf(status.Message.Parts[0].Text(), "step %d", &n)
	}
	return n, status.State
}

// checkSteps checks that events (a snapshot first) continue the steps
// without gap or repeat from the snapshot's, and end with COMPLETED.
func checkSteps(t *testing.T, who string, events []a2a.Event, steps int) {
	t.Helper()
	if len(events) == 0 {
		t.Fatalf("%s: no events", who)
	}
	prev, _ := step(events[0])
	for i, ev := range events[1:] {
		n, st := step(ev)
		last := i == len(events)-2
		switch {
		case last && st != a2a.TaskStateCompleted:
			t.Fatalf("%s: last event %v in state %q, want completed", who, ev, st)
		case last:
		case st != a2a.TaskStateWorking || n != prev+1:
			t.Fatalf("%s: event %d is step %d (%q) after step %d: events must follow without gap or repeat", who, i+1, n, st, prev)
		default:
			prev = n
		}
	}
	if prev != steps {
		t.Fatalf("%s: completed after step %d of %d", who, prev, steps)
	}
}

// stepArgs are the server flags of an agent that goes through steps
// working updates, "step N" each, think apart, without artifact.
func stepArgs(steps int, think string) []string {
	return []string{"-status-updates", fmt.Sprint(steps), "-history-messages", fmt.Sprint(steps), "-artifact-bytes", "0", "-think-time", think}
}

// collect reads a stream to its end.
func collect(t *testing.T, who string, seq func(yield func(a2a.Event, error) bool)) []a2a.Event {
	t.Helper()
	var events []a2a.Event
	for ev, err := range seq {
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		events = append(events, ev)
	}
	return events
}

// K1, K2 across processes: a task sent on A; a subscriber on the server
// that does not execute it gets every later step in order, the terminal
// event last; a stream on A dropped after its first step is resumed by a
// resubscription on the other server, which continues without gap.
func TestClusterSubscribeAcrossServers(t *testing.T) {
	const steps = 4
	// Steps long enough (2 s in all) for the resubscription and the second
	// subscriber to come before the end on a loaded machine.
	f := startCluster(t, []string{"a", "b"}, stepArgs(steps, "500ms")...)
	ctx := t.Context()
	a := f.servers[0].client(t, a2a.TransportProtocolJSONRPC)

	// Stream on A; drop it after the first working step.
	sctx, drop := context.WithCancel(ctx)
	var first []a2a.Event
	for ev, err := range a.SendStreamingMessage(sctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))}) {
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, ev)
		if n, _ := step(ev); n == 1 {
			break
		}
	}
	drop()
	id := first[0].(*a2a.Task).ID
	_, other := f.executing(t, id)
	oc := other.child.client(t, a2a.TransportProtocolGRPC)
	resumed := collect(t, "resubscribe on "+other.name, oc.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}))
	checkSteps(t, "resubscribe on "+other.name, resumed, steps)
	if n, _ := step(resumed[0]); n < 1 {
		t.Fatalf("resubscription snapshot at step %d, before the dropped stream's step 1", n)
	}

	// A second task: the subscriber on the other server from the start.
	id2 := sendReturning(t, ctx, a)
	_, other = f.executing(t, id2)
	oc = other.child.client(t, a2a.TransportProtocolHTTPJSON)
	events := collect(t, "subscribe on "+other.name, oc.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id2}))
	checkSteps(t, "subscribe on "+other.name, events, steps)
	if len(events) < 3 {
		t.Fatalf("subscriber saw %d events: the execution ended before it subscribed", len(events))
	}
}

// K3 across processes: a CancelTask on the server that does not execute
// the task stops the execution on the other (its agent thinks for an
// hour: only a canceled context ends it), and the task stays CANCELED.
func TestClusterCancelAcrossServers(t *testing.T) {
	f := startCluster(t, []string{"a", "b"}, "-status-updates", "1", "-think-time", "1h")
	ctx := t.Context()
	id := sendReturning(t, ctx, f.servers[0].client(t, a2a.TransportProtocolJSONRPC))
	executor, other := f.executing(t, id)
	task, err := other.client(t, a2a.TransportProtocolGRPC).CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask on %s answered %q", other.name, task.Status.State)
	}
	waitUntil(t, "the execution on "+executor.name+" to stop", func() bool { return f.lease(t, id).State == "done" })
	for _, s := range f.servers {
		got, err := s.client(t, a2a.TransportProtocolJSONRPC).GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("task %q on %s after the execution stopped", got.Status.State, s.name)
		}
	}
}

// K4 across processes: kill -9 of the executing server; the other takes
// the work over once the lease (1 s) expires, resumes the stored task and
// completes it.
func TestClusterKillExecutingServer(t *testing.T) {
	const steps = 3
	// The kill must come before the end: 1.2 s after the first step.
	f := startCluster(t, []string{"a", "b"}, stepArgs(steps, "600ms")...)
	ctx := t.Context()
	id := sendReturning(t, ctx, f.servers[0].client(t, a2a.TransportProtocolJSONRPC))
	executor, survivor := f.executing(t, id)
	sc := survivor.client(t, a2a.TransportProtocolJSONRPC)
	waitTask(t, sc, id, "the task to work", func(st a2a.TaskState) bool { return st == a2a.TaskStateWorking })
	executor.killed = true
	if err := executor.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-executor.done
	killed := time.Now()
	got := waitTask(t, sc, id, "the survivor to complete the task", a2a.TaskState.Terminal)
	elapsed := time.Since(killed)
	if got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("task %q after takeover", got.Status.State)
	}
	// The item is done just after the task's last write.
	var l pgcluster.Lease
	waitUntil(t, "the execution item to be done", func() bool { l = f.lease(t, id); return l.State == "done" })
	if l.Owner != survivor.name || l.Attempt != 2 {
		t.Fatalf("execution item %+v, want done by %s on attempt 2", l, survivor.name)
	}
	t.Logf("killed %s; %s completed the task %v later (lease 1s, %d steps of 600ms)", executor.name, survivor.name, elapsed.Round(time.Millisecond), steps)
}

// K2 across processes: the notification connection of the subscriber's
// server is terminated (pg_terminate_backend) mid-run; it reconnects and
// the subscriber still gets every step and the terminal event (the
// safety-net poll is an hour).
func TestClusterListenerTerminated(t *testing.T) {
	const steps = 4
	f := startCluster(t, []string{"a", "b"}, stepArgs(steps, "500ms")...) // the subscription must come before the end
	ctx := t.Context()
	admin, err := pgxpool.New(ctx, pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	id := sendReturning(t, ctx, f.servers[0].client(t, a2a.TransportProtocolJSONRPC))
	_, other := f.executing(t, id)
	var events []a2a.Event
	terminated := false
	for ev, err := range other.client(t, a2a.TransportProtocolJSONRPC).SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
		if !terminated {
			terminated = true
			var n int
			if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
				pgcluster.ListenerApplicationName+" "+other.name).Scan(&n); err != nil || n != 1 {
				t.Fatalf("terminated %d notification connections of %s: %v", n, other.name, err)
			}
		}
	}
	checkSteps(t, "subscriber on "+other.name, events, steps)
	if !strings.Contains(other.logs(), "notification connection lost") {
		t.Fatalf("%s did not log the lost connection", other.name)
	}
}

// K5 across processes: with -policy owner, alice's task sent on A is
// hers on every server: bob cannot read, cancel or subscribe to it on B,
// alice can, and each sees only their own tasks in lists.
func TestClusterOwnerPolicy(t *testing.T) {
	f := startCluster(t, []string{"a", "b"}, "-policy", "owner", "-caller-header", "X-A2astore-Caller", "-status-updates", "0")
	ctx := t.Context()
	a := f.servers[0].client(t, a2a.TransportProtocolJSONRPC)
	res, err := a.SendMessage(as(ctx, "alice"), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	b := f.servers[1].client(t, a2a.TransportProtocolGRPC)
	if _, err := b.GetTask(as(ctx, "alice"), &a2a.GetTaskRequest{ID: id}); err != nil {
		t.Fatalf("alice on b: %v", err)
	}
	if _, err := b.GetTask(as(ctx, "bob"), &a2a.GetTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob reads alice's task on b: %v", err)
	}
	if _, err := b.CancelTask(as(ctx, "bob"), &a2a.CancelTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob cancels alice's task on b: %v", err)
	}
	for _, err := range b.SubscribeToTask(as(ctx, "bob"), &a2a.SubscribeToTaskRequest{ID: id}) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("bob subscribes to alice's task on b: %v", err)
		}
		break
	}
	for user, want := range map[string]int{"alice": 1, "bob": 0} {
		list, err := b.ListTasks(as(ctx, user), &a2a.ListTasksRequest{})
		if err != nil || list.TotalSize != want {
			t.Fatalf("%s lists on b: %v, %v; want %d", user, list, err, want)
		}
	}
}

// K6 across processes: PostgreSQL restarts while a task executes. The
// acknowledged task still ends (taken over or finished with a reason, not
// left WORKING), and both servers go on: a task sent afterwards completes
// and a subscriber on the other server gets every step (its notification
// connection came back).
func TestClusterDatabaseRestart(t *testing.T) {
	const steps = 3
	f := startCluster(t, []string{"a", "b"}, stepArgs(steps, "200ms")...)
	ctx := t.Context()
	a := f.servers[0].client(t, a2a.TransportProtocolJSONRPC)
	id := sendReturning(t, ctx, a)
	f.executing(t, id)
	pgtest.Restart(t)
	waitUntil(t, "the task to end after the restart", func() bool {
		got, err := a.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		return err == nil && got.Status.State.Terminal()
	})
	got, err := a.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCompleted && (got.Status.State != a2a.TaskStateFailed || got.Status.Message == nil) {
		t.Fatalf("task %q after the restart (message %v): want completed, or failed with a reason", got.Status.State, got.Status.Message)
	}
	t.Logf("task running across the restart ended %q (execution item %+v)", got.Status.State, f.lease(t, id))

	var id2 a2a.TaskID
	waitUntil(t, "a SendMessage to succeed after the restart", func() bool {
		res, err := a.SendMessage(ctx, &a2a.SendMessageRequest{
			Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")),
			Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
		})
		if err == nil {
			id2 = res.(*a2a.Task).ID
		}
		return err == nil
	})
	_, other := f.executing(t, id2)
	events := collect(t, "subscribe on "+other.name, other.client(t, a2a.TransportProtocolGRPC).SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id2}))
	checkSteps(t, "subscribe on "+other.name+" after the restart", events, steps)
}

// K1 under load: loadgen spreads its calls over two -cluster servers
// (-target http://a,http://b: each call on the next server, so SendMessage,
// GetTask, CancelTask and the pages of one traversal alternate), with its
// L7 checks live across them: 0 violations.
func TestClusterLoadgen(t *testing.T) {
	f := startCluster(t, []string{"a", "b"})
	res, err := load.Run(t.Context(), load.Config{
		Target: f.servers[0].base + "," + f.servers[1].base, Transport: "jsonrpc", Workload: "traversal-under-churn",
		Concurrency: 4, Ops: 400, Initial: 40, PageSize: 10, Seed: 22,
	})
	if err == nil {
		err = res.Err()
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Traversals == 0 {
		t.Fatal("no traversal checked")
	}
	var ops int64
	for _, st := range res.Ops {
		ops += st.Count
	}
	t.Logf("%d operations over two servers, %d traversals checked", ops, res.Traversals)
}

// -cluster runs only on the pg backend: on any other the server refuses
// to start with a clear error and binds nothing.
func TestClusterNeedsPG(t *testing.T) {
	for _, backend := range []string{"mem", "pebble"} {
		cfg := config{Backend: backend, PebbleDir: t.TempDir(), Cluster: clusterConfig{Enabled: true},
			HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"}
		if _, err := newServer(t.Context(), cfg); !errors.Is(err, errClusterBackend) {
			t.Errorf("-cluster -backend %s: %v, want %v", backend, err, errClusterBackend)
		}
	}
}

// K4 at a graceful shutdown: SIGTERM of the server executing a task whose
// agent outlives the shutdown grace (200 ms) hands the execution over:
// the other server takes the work item at once — the lease (1 min) never
// expires in this test — resumes the stored task and completes it; the
// task is never FAILED and the handed-over attempt is not counted.
// Without the handover the task ends FAILED (Executions.Abort); without
// the lease release it waits for the lease to expire.
func TestClusterShutdownHandsOver(t *testing.T) {
	const steps = 3
	f := startCluster(t, []string{"a", "b"}, append(stepArgs(steps, "700ms"), "-cluster-lease", "1m", "-shutdown-timeout", "200ms")...)
	ctx := t.Context()
	id := sendReturning(t, ctx, f.servers[0].client(t, a2a.TransportProtocolJSONRPC))
	executor, survivor := f.executing(t, id)
	sc := survivor.client(t, a2a.TransportProtocolJSONRPC)
	waitTask(t, sc, id, "the task to work", func(st a2a.TaskState) bool { return st == a2a.TaskStateWorking })
	executor.killed = true // stopped here
	if err := executor.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("%s exited with %v\n%s", executor.name, err, executor.logs())
	}
	got := waitTask(t, sc, id, "the survivor to complete the task", a2a.TaskState.Terminal)
	if got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("task %q after the handover, want completed\n%s", got.Status.State, executor.logs())
	}
	var l pgcluster.Lease
	waitUntil(t, "the execution item to be done", func() bool { l = f.lease(t, id); return l.State == "done" })
	if l.Owner != survivor.name || l.Attempt != 1 {
		t.Fatalf("execution item %+v, want done by %s on attempt 1 (a handover is not a failed attempt)", l, survivor.name)
	}
	if !strings.Contains(executor.logs(), "handed agent executions over") {
		t.Fatalf("%s did not log the handover\n%s", executor.name, executor.logs())
	}
}

// K1: a second SendMessage to a task still executing (on either server,
// over every transport) is refused with A2A's UnsupportedOperationError
// saying that the execution is in progress — a client's mistake, not the
// internal error workqueue.ErrLeaseAlreadyTaken alone made of it — and
// the execution goes on to complete.
func TestClusterSendToRunningTask(t *testing.T) {
	const inProgress = "task execution is already in progress"
	f := startCluster(t, []string{"a", "b"}, "-status-updates", "1", "-think-time", "1h")
	ctx := t.Context()
	id := sendReturning(t, ctx, f.servers[0].client(t, a2a.TransportProtocolJSONRPC))
	f.executing(t, id)
	// Cancel the hour-long execution before the servers stop (cleanups run
	// last first): a shutdown with it running would wait out its hand-over.
	t.Cleanup(func() {
		_, _ = f.servers[0].client(t, a2a.TransportProtocolJSONRPC).CancelTask(context.Background(), &a2a.CancelTaskRequest{ID: id})
	})
	for _, s := range f.servers {
		for _, tr := range transports {
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("again"))
			msg.TaskID = id
			_, err := s.client(t, tr).SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
			if tr == a2a.TransportProtocolGRPC {
				continue // a2a-go's gRPC client does not know the spec's code: checked on the wire below
			}
			if !errors.Is(err, a2a.ErrUnsupportedOperation) || !strings.Contains(err.Error(), inProgress) {
				t.Errorf("second SendMessage on %s over %s: %v, want unsupported operation: %s", s.name, tr, err, inProgress)
			}
		}
		_, err := s.grpcA2A(t).SendMessage(ctx, &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: a2a.NewMessageID(),
			Role: a2apb.Role_ROLE_USER, TaskId: string(id), Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "again"}}}}})
		st := status.Convert(err)
		if st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), inProgress) || grpcReason(st) != "UNSUPPORTED_OPERATION" {
			t.Errorf("second SendMessage on %s over gRPC: %v (reason %q), want Unimplemented UNSUPPORTED_OPERATION: %s", s.name, err, grpcReason(st), inProgress)
		}
	}
	if l := f.lease(t, id); l.State != "running" || l.Attempt != 1 {
		t.Fatalf("execution item %+v after the refused messages, want still running its first attempt", l)
	}
}

// grpcA2A is a raw gRPC client of the server's A2A service.
func (cs *child) grpcA2A(t *testing.T) a2apb.A2AServiceClient {
	t.Helper()
	var card a2a.AgentCard
	getJSON(t, cs.base+a2asrv.WellKnownAgentCardPath, &card)
	for _, in := range card.SupportedInterfaces {
		if in.ProtocolBinding != a2a.TransportProtocolGRPC {
			continue
		}
		conn, err := grpc.NewClient(in.URL, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return a2apb.NewA2AServiceClient(conn)
	}
	t.Fatal("no gRPC interface in the agent card")
	return nil
}

// grpcReason is the A2A ErrorInfo reason of st, "" when none.
func grpcReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
