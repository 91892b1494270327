package pushdelivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/pushdelivery"
)

// benchEnv is a store with its log, the backend's outbox over it and a
// worker, on the wall clock: what a2astore-server runs per backend.
type benchEnv struct {
	store  engine.LogStore
	outbox pushdelivery.Outbox
	w      *pushdelivery.Worker
	pool   *pgxpool.Pool // pg only
	dsn    string        // pg only
	schema string        // pg only
}

// openBenchEnv opens backend's store and outbox (pg: in a fresh database
// and schema, or in those of share, a second instance on its tables) and
// starts a worker with the given options (Outbox, Store and Logger set
// here; Client when nil).
func openBenchEnv(tb testing.TB, backend string, share *benchEnv, o pushdelivery.Options) *benchEnv {
	tb.Helper()
	e := &benchEnv{}
	switch backend {
	case "mem":
		s := memstore.New(memstore.Options{Log: true})
		e.store, e.outbox = s, pushdelivery.NewMemory(s, pushdelivery.LocalOptions{})
	case "pebble":
		dir := tb.TempDir()
		s, err := pebblestore.Open(filepath.Join(dir, "tasks"), pebblestore.Options{Log: true, Logger: pebblelog.Quiet{}})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		ob, err := pushdelivery.OpenPebble(filepath.Join(dir, "push"), s, pushdelivery.LocalOptions{Logger: pebblelog.Quiet{}})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = ob.Close() })
		e.store, e.outbox = s, ob
	case "pg":
		if share != nil {
			e.dsn, e.schema = share.dsn, share.schema
		} else {
			e.dsn = pgtest.DSN(tb) // a database of its own
			e.schema = pgtest.Schema(tb, e.dsn)
		}
		e.pool = newPool(tb, e.dsn, "bench")
		e.outbox, e.store = openPG(tb, e.pool, e.schema, time.Now)
	}
	o.Outbox, o.Store = e.outbox, e.store
	if o.Client == nil {
		o.Client = pushdelivery.NewClient(pushdelivery.ClientOptions{AllowPrivate: true})
	}
	o.Logger = slog.New(slog.DiscardHandler)
	e.w = pushdelivery.Start(context.Background(), o)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.w.Close(ctx)
	})
	return e
}

// hook saves a config of task to u with its cursor at 0.
func (e *benchEnv) hook(tb testing.TB, task a2a.TaskID, u string) {
	tb.Helper()
	p, _ := url.Parse(u)
	r := &pushdelivery.Record{TaskID: task, Config: a2a.PushConfig{TaskID: task, ID: "c", URL: u},
		Dest: p.Scheme + "://" + p.Host, Created: time.Now()}
	if err := e.outbox.Save(context.Background(), r); err != nil {
		tb.Fatal(err)
	}
}

// event writes the next revision of task (created when missing) with a
// status update event, and returns it.
func (e *benchEnv) event(tb testing.TB, task a2a.TaskID) int64 {
	tb.Helper()
	ctx := context.Background()
	r, err := e.store.Get(ctx, task)
	if err != nil {
		rec, err := e.store.Create(ctx, &a2a.Task{ID: task, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}})
		if err != nil {
			tb.Fatal(err)
		}
		return rec.Revision
	}
	r.Task.Status = a2a.TaskStatus{State: a2a.TaskStateWorking}
	ev := &a2a.TaskStatusUpdateEvent{TaskID: task, ContextID: r.Task.ContextID, Status: r.Task.Status}
	if r, err = e.store.Replace(engine.WithEvent(ctx, ev), r.Task, r.Revision); err != nil {
		tb.Fatal(err)
	}
	return r.Revision
}

// touch tells an outbox that tracks due tasks (the local ones) that task
// has a new event, as the worker's Wake does, without waking the worker.
func (e *benchEnv) touch(task a2a.TaskID) {
	if t, ok := e.outbox.(interface{ Touch(a2a.TaskID) }); ok {
		t.Touch(task)
	}
}

// walBytes is the PostgreSQL WAL insert position.
func (e *benchEnv) walBytes(tb testing.TB) int64 {
	var pos int64
	if err := e.pool.QueryRow(context.Background(), `SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint`).Scan(&pos); err != nil {
		tb.Fatal(err)
	}
	return pos
}

// received is a webhook answering 200 that sends "task/revision" of each
// notification on got; while down (when non-nil and true) it answers 503.
func received(tb testing.TB, got chan string, down *atomic.Bool) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down != nil && down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var sr a2a.StreamResponse
		_ = json.NewDecoder(r.Body).Decode(&sr)
		got <- string(taskOf(sr.Event)) + "/" + r.Header.Get(pushdelivery.HeaderRevision)
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}

// taskOf is the task an event is about.
func taskOf(ev a2a.Event) a2a.TaskID {
	switch v := ev.(type) {
	case *a2a.Task:
		return v.ID
	case *a2a.TaskStatusUpdateEvent:
		return v.TaskID
	case *a2a.TaskArtifactUpdateEvent:
		return v.TaskID
	}
	return ""
}

// waitFor reads got until want arrives (earlier notifications, repeats
// included, are passed over).
func waitFor(tb testing.TB, got chan string, want string) {
	tb.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case s := <-got:
			if s == want {
				return
			}
		case <-timeout:
			tb.Fatalf("no notification %s within a minute", want)
		}
	}
}

// readN reads n notifications from got.
func readN(tb testing.TB, got chan string, n int) {
	tb.Helper()
	timeout := time.After(time.Minute)
	for range n {
		select {
		case <-got:
		case <-timeout:
			tb.Fatalf("fewer than %d notifications within a minute", n)
		}
	}
}

// BenchmarkCommitToWebhook: one task's event committed through the
// backend's store to its webhook's having it (loopback HTTP), p50 and p99
// in µs. local: the writing process's worker, woken by the commit as
// a2a-go's sender wakes it in the server; pg-cross: the write on one
// instance, the delivery by another's worker, which learns of it only by
// polling (Poll 250 ms, the default).
func BenchmarkCommitToWebhook(b *testing.B) {
	for _, backend := range []string{"mem", "pebble", "pg", "pg-cross"} {
		b.Run("backend="+backend, func(b *testing.B) {
			got := make(chan string, 16)
			u := received(b, got, nil)
			var writer, deliverer *benchEnv
			if backend == "pg-cross" {
				writer = openBenchEnv(b, "pg", nil, pushdelivery.Options{Poll: time.Hour})
				_ = writer.w.Close(context.Background()) // instance A only writes
				deliverer = openBenchEnv(b, "pg", writer, pushdelivery.Options{})
			} else {
				writer = openBenchEnv(b, backend, nil, pushdelivery.Options{Poll: time.Hour})
				deliverer = writer
			}
			writer.hook(b, "t1", u)
			rev := writer.event(b, "t1")
			deliverer.w.Wake("t1")
			waitFor(b, got, fmt.Sprintf("t1/%d", rev))
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				rev := writer.event(b, "t1")
				if backend != "pg-cross" {
					deliverer.w.Wake("t1")
				}
				waitFor(b, got, fmt.Sprintf("t1/%d", rev))
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkBackendDeliveries: an event on each of 256 tasks, then the time
// until every webhook (four destinations) has its event: deliveries/s of
// one worker with its defaults (4 in flight, 2 per destination); on
// PostgreSQL also the WAL bytes the deliveries write per event (claims
// and commits; the events' own writes excluded).
func BenchmarkBackendDeliveries(b *testing.B) {
	const n = 256
	for _, backend := range []string{"mem", "pebble", "pg"} {
		b.Run("backend="+backend, func(b *testing.B) {
			got := make(chan string, n)
			e := openBenchEnv(b, backend, nil, pushdelivery.Options{Poll: time.Hour})
			ids := make([]a2a.TaskID, n)
			var urls []string
			for range 4 {
				urls = append(urls, received(b, got, nil))
			}
			for i := range ids {
				ids[i] = a2a.TaskID("t" + strconv.Itoa(i))
				e.hook(b, ids[i], urls[i%len(urls)])
				e.event(b, ids[i])
				e.w.Wake(ids[i]) // as a2a-go's sender does after each event
			}
			e.w.Wake("")
			readN(b, got, n)
			var wal int64
			for b.Loop() {
				b.StopTimer()
				for _, id := range ids {
					e.event(b, id)
					e.touch(id) // what Wake tells a local outbox, without starting the worker
				}
				var w0 int64
				if e.pool != nil {
					w0 = e.walBytes(b)
				}
				b.StartTimer()
				e.w.Wake("")
				readN(b, got, n)
				if e.pool != nil {
					b.StopTimer()
					wal += e.walBytes(b) - w0
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "deliveries/s")
			if e.pool != nil {
				b.ReportMetric(float64(wal)/float64(b.N*n), "walB/delivery")
			}
		})
	}
}

// TestBacklogRecovery (A2ASTORE_PUSH_BACKLOG=1; a measurement, not a
// check: real time, about two minutes): on PostgreSQL, 200 tasks with a
// webhook each get events at 50/s while the receiver answers 503 for
// 60 s; then it answers 200. Logged: the backlog and the time from the
// receiver's recovery to the last event's delivery, with the worker's
// default backoff (1 s doubling to 60 s, full jitter).
func TestBacklogRecovery(t *testing.T) {
	if os.Getenv("A2ASTORE_PUSH_BACKLOG") == "" {
		t.Skip("a two-minute measurement: A2ASTORE_PUSH_BACKLOG=1 runs it")
	}
	const tasks, rate, outage = 200, 50, 60 * time.Second
	got := make(chan string, 1<<16)
	var down atomic.Bool
	down.Store(true)
	e := openBenchEnv(t, "pg", nil, pushdelivery.Options{})
	u := received(t, got, &down)
	for i := range tasks {
		e.hook(t, a2a.TaskID("t"+strconv.Itoa(i)), u)
	}
	last := map[string]int64{}
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	events, end := 0, time.Now().Add(outage)
	for time.Now().Before(end) {
		<-tick.C
		id := "t" + strconv.Itoa(events%tasks)
		last[id] = e.event(t, a2a.TaskID(id))
		e.w.Wake(a2a.TaskID(id))
		events++
	}
	up := time.Now()
	down.Store(false)
	pending := len(last)
	seen := map[string]bool{}
	for pending > 0 {
		select {
		case s := <-got:
			for id, rev := range last {
				if s == fmt.Sprintf("%s/%d", id, rev) && !seen[id] {
					seen[id] = true
					pending--
				}
			}
		case <-time.After(5 * time.Minute):
			t.Fatalf("%d tasks still waiting for their last event 5 minutes after recovery", pending)
		}
	}
	t.Logf("backlog: %d events on %d tasks written at %d/s during a %v outage; all delivered %v after the receiver recovered",
		events, len(last), rate, outage, time.Since(up).Round(time.Millisecond))
}
