package pgcluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgcluster"
	"github.com/a2astore/a2astore/pgstore"
)

var flagSweepStep = flag.Int("sweep.step", 1, "TestFaultSweep kills every step-th statement (1: every one)")

// killer is a pgx tracer that terminates the connection about to run the
// k-th statement of its pool (counting from 1; 0: none), as a crash or a
// network fault between two statements would.
type killer struct {
	k     int64
	armed atomic.Bool // statements count once the instances have started
	n     atomic.Int64
	admin *pgxpool.Pool
	hit   atomic.Bool
	sql   atomic.Pointer[string] // the statement killed
}

func (k *killer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	k.at(data, func() {
		_, _ = k.admin.Exec(context.Background(), "SELECT pg_terminate_backend($1)", conn.PgConn().PID())
	})
	return ctx
}

// at runs fault if this is the k-th statement.
func (k *killer) at(data pgx.TraceQueryStartData, fault func()) {
	if k.armed.Load() && k.n.Add(1) == k.k {
		k.hit.Store(true)
		k.sql.Store(&data.SQL)
		fault()
	}
}

func (*killer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// handOverAt is a killer that, at the k-th statement of the instances it
// traces, hands over the executions of the instance running it (as a
// server shutting down past its grace period does) instead of killing
// the connection.
type handOverAt struct {
	*killer
	handOver func()
}

func (h handOverAt) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	h.at(data, func() { go h.handOver() })
	return ctx
}

// sweepAgent is turnAgent that also records any run of a message the
// task's log shows answered already (an agent run twice for one answer).
type sweepAgent struct {
	*turnAgent
	store *pgstore.Store
	mu    sync.Mutex
	again []string
}

func (a *sweepAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	if answeredIn(a.store, ec.TaskID, ec.Message.ID) {
		a.mu.Lock()
		a.again = append(a.again, ec.Message.ID)
		a.mu.Unlock()
	}
	return a.turnAgent.Execute(ctx, ec)
}

// answeredIn reports whether id's log shows msgID answered: an entry in a
// terminal or interrupted state after the one that brought the message in
// (its history entry, or the task's first entry holding it).
func answeredIn(s *pgstore.Store, id a2a.TaskID, msgID string) bool {
	log, err := s.ReadLog(context.Background(), id, 0, engine.MaxLogRead)
	if err != nil {
		return false
	}
	in := false
	for _, l := range log {
		ev, _ := l.Event(id)
		task, _ := ev.(*a2a.Task)
		var m a2a.Message
		switch {
		case l.Kind == engine.LogMessage && json.Unmarshal(l.Body, &m) == nil && m.ID == msgID:
			in = true
		case l.Revision == 1 && task != nil && slices.ContainsFunc(task.History, func(m *a2a.Message) bool { return m.ID == msgID }):
			in = true
		case in && (l.State.Terminal() || l.State == a2a.TaskStateInputRequired || l.State == a2a.TaskStateAuthRequired):
			return true
		}
	}
	return false
}

// TestFaultSweep (#28): a lifecycle with a subscriber, a follow-up and a
// cancel, with the executing instance's connection killed at its k-th
// statement, for every k the clean run reaches. After each k: the
// subscriber and every call end (bounded waits), the task ends terminal
// and CANCELED stays CANCELED once a cancel answered it, the stored task
// and its log agree (K7), and no message the log shows answered is run
// again (K8).
//
// It runs in three modes: the connection killed (the attempt fails and is
// retried); the connection killed with MaxAttempts 1 (the failed attempt
// is given up: #52); and, instead of a kill, a HandOver of the executing
// instance at its k-th statement, with a second executing instance to
// take the work over (#52).
func TestFaultSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("fault sweep skipped in -short mode")
	}
	for _, mode := range []sweepMode{sweepKill, sweepGiveUp, sweepHandOver} {
		t.Run(string(mode), func(t *testing.T) {
			total := sweepRun(t, 0, mode)
			t.Logf("a clean lifecycle runs %d statements on the executing instances", total)
			step := int64(max(*flagSweepStep, 1))
			for k := int64(1); k <= total; k += step {
				t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) { sweepRun(t, k, mode) })
			}
		})
	}
}

// sweepMode is the fault TestFaultSweep injects at its k-th statement.
type sweepMode string

const (
	sweepKill     sweepMode = "kill"
	sweepGiveUp   sweepMode = "giveup"
	sweepHandOver sweepMode = "handover"
)

// sweepRun runs the lifecycle with the fault of mode at statement k and
// checks it; it returns how many statements the executing instances ran.
func sweepRun(t *testing.T, k int64, mode sweepMode) int64 {
	h := newHarness(t)
	if mode == sweepGiveUp {
		h.opts.MaxAttempts = 1
	}
	admin, err := pgxpool.New(t.Context(), pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	kill := &killer{k: k, admin: admin}
	var executors sync.Map // name -> *instance
	h.poolConfig = func(name string, cfg *pgxpool.Config) {
		switch {
		case name == "b":
		case mode == sweepHandOver:
			cfg.ConnConfig.Tracer = handOverAt{kill, func() {
				in, _ := executors.Load(name)
				c := in.(*instance).cluster
				c.StopWork()
				ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
				defer cancel()
				_, _ = c.HandOver(ctx)
			}}
		default:
			cfg.ConnConfig.Tracer = kill
		}
	}
	t.Cleanup(func() {
		if p := kill.sql.Load(); p != nil && t.Failed() {
			t.Logf("killed statement %d: %.200s", k, *p)
		}
	})
	agent := &sweepAgent{turnAgent: newTurnAgent(true)}
	a := h.start(t, "a", agent)
	executors.Store("a", a)
	agent.store = a.store
	b := h.start(t, "b", agent)
	b.cluster.StopWork() // a executes (and c, handing over); b answers the calls
	if mode == sweepHandOver {
		executors.Store("c", h.start(t, "c", agent))
	}
	kill.armed.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 2*waitFor)
	defer cancel()

	res, err := send(ctx, b, "", "m1", "nohold")
	if mode == sweepGiveUp && errors.Is(err, pgcluster.ErrGaveUp) {
		return kill.n.Load() // given up before any task was stored: the caller has its answer (#52)
	}
	if err != nil {
		t.Fatalf("first message: %v", err)
	}
	id := res.(*a2a.Task).ID
	events, done := stream(b.handler.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}))
	follow := make(chan error, 1)
	go func() { _, err := send(ctx, b, id, "m2", "hold"); follow <- err }()
	waitFollowUp(t, ctx, b, id)
	canceled, cerr := b.handler.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
	last := drain(t, events, done)
	select {
	case <-follow:
	case <-ctx.Done():
		t.Fatal("the follow-up never returned")
	}
	st := waitTerminal(t, ctx, b, id)
	if cerr == nil && canceled.Status.State == a2a.TaskStateCanceled && st != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask answered CANCELED, the task ended %s", st)
	}
	if last != nil && state(last) != st {
		t.Fatalf("subscriber ended with %s, task %s", state(last), st)
	}
	checkLogMatches(t, b, id)
	if len(agent.again) > 0 {
		t.Fatalf("messages %v run again after the log showed them answered", agent.again)
	}
	if k > 0 && !kill.hit.Load() {
		t.Logf("statement %d never ran (fewer statements this time)", k)
	}
	return kill.n.Load()
}

// waitFollowUp waits until the follow-up is running (its history revision
// and more are in the task), or the task ended.
func waitFollowUp(t *testing.T, ctx context.Context, in *instance, id a2a.TaskID) {
	t.Helper()
	for {
		st, err := in.tasks.Get(ctx, id)
		if err == nil && (st.Task.Status.State == a2a.TaskStateWorking && len(st.Task.History) >= 2 || st.Task.Status.State.Terminal()) {
			return // running, or the lifecycle ended early (a failed write fails the task)
		}
		if ctx.Err() != nil {
			t.Fatalf("the follow-up never ran: %v, %v", st, err)
		}
		waitTick(ctx)
	}
}

// drain returns the last event of a stream, failing if it does not end,
// or ends with an error but UnsupportedOperation (a subscription to a
// task that had ended already: W6).
func drain(t *testing.T, events <-chan a2a.Event, done <-chan error) a2a.Event {
	t.Helper()
	var last a2a.Event
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				if err := <-done; err != nil && !(last == nil && errors.Is(err, a2a.ErrUnsupportedOperation)) {
					t.Fatalf("subscriber ended with %v", err)
				}
				return last
			}
			last = ev
		case <-time.After(2 * waitFor):
			t.Fatalf("the subscriber never ended (last event %v)", last)
		}
	}
}

// waitTerminal waits for the task to end and returns its state.
func waitTerminal(t *testing.T, ctx context.Context, in *instance, id a2a.TaskID) a2a.TaskState {
	t.Helper()
	for {
		st, err := in.tasks.Get(ctx, id)
		if err == nil && st.Task.Status.State.Terminal() {
			return st.Task.Status.State
		}
		if ctx.Err() != nil {
			t.Fatalf("the task never ended: %v", st)
		}
		waitTick(ctx)
	}
}

// checkLogMatches checks K7 on the task: one entry per revision 1..its
// own, the last in its state.
func checkLogMatches(t *testing.T, in *instance, id a2a.TaskID) {
	t.Helper()
	rec, err := in.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	log, err := in.store.ReadLog(context.Background(), id, 0, engine.MaxLogRead)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(log)) != rec.Revision || log[len(log)-1].State != rec.Task.Status.State {
		t.Fatalf("log of %d entries (last %v) for revision %d in state %s", len(log), log[len(log)-1], rec.Revision, rec.Task.Status.State)
	}
	if err := in.store.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
