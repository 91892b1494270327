package pgcluster_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgcluster"
	"github.com/a2astore/a2astore/pgstore"
)

// benchCluster opens a bare Cluster named name on dsn/schema.
func benchCluster(b *testing.B, dsn, schema, name string) *pgcluster.Cluster {
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
	return c
}

// reportLatencies reports p50, p99 and max of ds in milliseconds.
func reportLatencies(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(ds[len(ds)/2]), "p50-ms")
	b.ReportMetric(ms(ds[len(ds)*99/100]), "p99-ms")
	b.ReportMetric(ms(ds[len(ds)-1]), "max-ms")
}

// Event delivery across instances: an event written on instance A (one
// INSERT … pg_notify) until a reader on instance B, waiting, returns it
// (NOTIFY → B's listener → the reader's query). Writes are paced 1 ms
// after the previous delivery so that the reader is waiting (otherwise its
// query finds the row without a notification). Issue #22's target: p99
// ≤ 10 ms on loopback.
func BenchmarkEventDelivery(b *testing.B) {
	dsn := pgtest.DSN(b)
	schema := pgtest.Schema(b, dsn)
	a, bb := benchCluster(b, dsn, schema, "a"), benchCluster(b, dsn, schema, "b")
	ctx := context.Background()
	id := a2a.TaskID("bench")
	r, err := bb.QueueManager().CreateReader(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	w, _ := a.QueueManager().CreateWriter(ctx, id)
	ev := &a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
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
	v := 0
	pace := time.NewTimer(0)
	for b.Loop() {
		v++
		<-pace.C
		start := time.Now()
		if err := w.Write(ctx, &eventqueue.Message{Event: ev, TaskVersion: taskstore.TaskVersion(v)}); err != nil {
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
