package pgcluster_test

import (
	"context"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgcluster"
	"github.com/a2astore/a2astore/pgstore"
)

// benchInstance is a bare Cluster and its unscoped task store.
type benchInstance struct {
	*pgcluster.Cluster
	tasks taskstore.Store
}

// benchCluster opens a bare Cluster named name on dsn/schema.
func benchCluster(b *testing.B, dsn, schema, name string) benchInstance {
	b.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	store, err := pgstore.New(ctx, pool, pgcluster.StoreOptions(pgstore.Options{Schema: schema}))
	if err != nil {
		b.Fatal(err)
	}
	c, err := pgcluster.New(ctx, pool, pgcluster.Options{Schema: schema, Instance: name, TaskStore: a2aserver.TaskStore(store), Log: store, PollInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	<-c.Connected()
	return benchInstance{c, a2aserver.TaskStore(store)}
}

// reportLatencies reports p50, p99 and max of ds in milliseconds.
func reportLatencies(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(ds[len(ds)/2]), "p50-ms")
	b.ReportMetric(ms(ds[len(ds)*99/100]), "p99-ms")
	b.ReportMetric(ms(ds[len(ds)-1]), "max-ms")
}

// Event delivery across instances: a task write on instance A (one
// statement: the task row, its log entry and pg_notify) until a reader on
// instance B, waiting, returns its event (NOTIFY → B's listener → B's log
// read). Writes are paced 1 ms after the previous delivery so that the
// reader is waiting. Issue #22's target: p99 ≤ 10 ms on loopback.
func BenchmarkEventDelivery(b *testing.B) {
	dsn := pgtest.DSN(b)
	schema := pgtest.Schema(b, dsn)
	a, bb := benchCluster(b, dsn, schema, "a"), benchCluster(b, dsn, schema, "b")
	ctx := context.Background()
	id := a2a.TaskID("bench")
	task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	v, err := a.tasks.Create(ctx, task)
	if err != nil {
		b.Fatal(err)
	}
	r, err := bb.QueueManager().CreateReader(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ev := &a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: "c", Status: task.Status}
	delivered := make(chan time.Time)
	go func() {
		for {
			if _, err := r.Read(ctx); err != nil {
				close(delivered)
				return
			}
			delivered <- time.Now()
		}
	}()
	var ds []time.Duration
	pace := time.NewTimer(0)
	for b.Loop() {
		<-pace.C
		start := time.Now()
		if v, err = a.tasks.Update(ctx, &taskstore.UpdateRequest{Task: task, Event: ev, PrevVersion: v}); err != nil {
			b.Fatal(err)
		}
		at, ok := <-delivered
		if !ok {
			b.Fatal("reader failed")
		}
		ds = append(ds, at.Sub(start))
		pace.Reset(time.Millisecond)
	}
	reportLatencies(b, ds)
}

// Work dispatch: a work item written on instance A until the handler on
// instance B (the only one reading work) is called with it.
func BenchmarkWorkDispatch(b *testing.B) {
	dsn := pgtest.DSN(b)
	schema := pgtest.Schema(b, dsn)
	a, bb := benchCluster(b, dsn, schema, "a"), benchCluster(b, dsn, schema, "b")
	started := make(chan struct{})
	bb.WorkQueue().RegisterHandler(workqueue.HandlerConfig{}, func(context.Context, *workqueue.Payload) (a2a.SendMessageResult, error) {
		started <- struct{}{}
		return &a2a.Task{}, nil
	})
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		p := &workqueue.Payload{Type: workqueue.PayloadTypeExecute, TaskID: a2a.NewTaskID(),
			ExecuteRequest: &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))}}
		if _, err := a.WorkQueue().Write(ctx, p); err != nil {
			b.Fatal(err)
		}
		<-started
		ds = append(ds, time.Since(start))
	}
	reportLatencies(b, ds)
}

// blockAgent runs until its context ends and reports when that happened.
type blockAgent struct{ stopped chan time.Time }

func (a blockAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		<-ctx.Done()
		a.stopped <- time.Now()
	}
}

func (blockAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// Cancel latency across instances: the cancel until the execution's
// context on A ends. listener=up: CancelTask on B (its cancel item runs,
// writes CANCELED and NOTIFYs A). listener=down: A's notification
// connection is gone and held away, and B writes CANCELED to the store as
// a cancel item does; only A's heartbeat can find it (K8; lease 3 s, so a
// heartbeat every second).
func BenchmarkCancelLatency(b *testing.B) {
	for _, listener := range []string{"up", "down"} {
		b.Run("listener="+listener, func(b *testing.B) {
			h := newHarness(b)
			h.opts.LeaseTimeout = 3 * time.Second
			agent := blockAgent{stopped: make(chan time.Time, 1)}
			a, bb := h.start(b, "a", agent), h.start(b, "b", agent)
			bb.cluster.StopWork() // a executes; b claims cancels only while a is away
			ctx := context.Background()
			admin, err := pgxpool.New(ctx, pgtest.AdminDSN(b))
			if err != nil {
				b.Fatal(err)
			}
			defer admin.Close()
			var hold chan struct{}
			a.cluster.BeforeReconnect(func() { <-hold })
			// listenerDown cuts a's notification connection and holds it
			// away until the returned function is called.
			listenerDown := func() func() {
				hold = make(chan struct{})
				if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
					pgcluster.ListenerApplicationName+" a"); err != nil {
					b.Fatal(err)
				}
				return func() { close(hold) }
			}
			var ds []time.Duration
			for b.Loop() {
				res, err := bb.handler.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x")),
					Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
				if err != nil {
					b.Fatal(err)
				}
				id := res.(*a2a.Task).ID
				for st, _ := bb.tasks.Get(ctx, id); st == nil || st.Task.Status.State != a2a.TaskStateWorking; st, _ = bb.tasks.Get(ctx, id) {
					waitTick(ctx)
				}
				if listener == "up" {
					start := time.Now()
					if _, err := bb.handler.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id}); err != nil {
						b.Fatal(err)
					}
					ds = append(ds, (<-agent.stopped).Sub(start))
					continue
				}
				release := listenerDown()
				start := time.Now()
				if err := cancelInStore(ctx, bb, id); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, (<-agent.stopped).Sub(start))
				release() // back up for the next message's work notification
				for a.cluster.Stats().Reconnects.Load() < int64(len(ds)) {
					waitTick(ctx)
				}
			}
			reportLatencies(b, ds)
		})
	}
}

// cancelInStore writes CANCELED as a cancel item's canceler does.
func cancelInStore(ctx context.Context, in *instance, id a2a.TaskID) error {
	st, err := in.tasks.Get(ctx, id)
	if err != nil {
		return err
	}
	task := *st.Task
	task.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled}
	ev := &a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: task.ContextID, Status: task.Status}
	_, err = in.tasks.Update(ctx, &taskstore.UpdateRequest{Task: &task, Event: ev, PrevVersion: st.Version})
	return err
}
