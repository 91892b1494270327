package pushdelivery_test

import (
	"bytes"
	"context"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"strings"

	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/fakeclock"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/pushdelivery"
	"github.com/a2astore/a2astore/pushdelivery/outboxtest"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestMemoryConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T, clock func() time.Time) (pushdelivery.Outbox, engine.Store) {
		s := memstore.New(memstore.Options{Log: true})
		return pushdelivery.NewMemory(s, pushdelivery.LocalOptions{Lease: outboxtest.Lease, Rescan: outboxtest.Rescan, Clock: clock}), s
	})
}

func TestPebbleConformance(t *testing.T) {
	outboxtest.Run(t, func(t *testing.T, clock func() time.Time) (pushdelivery.Outbox, engine.Store) {
		s := memstore.New(memstore.Options{Log: true})
		o, err := pushdelivery.OpenPebble(t.TempDir(), s, pushdelivery.LocalOptions{
			Lease: outboxtest.Lease, Rescan: outboxtest.Rescan, Clock: clock, Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		return o, s
	})
}

// countingStore counts Get calls per task, and List calls.
type countingStore struct {
	engine.Store
	mu    sync.Mutex
	gets  map[a2a.TaskID]int
	lists int
}

func (c *countingStore) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.Store.List(ctx, req)
}

func (c *countingStore) takeLists() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.lists
	c.lists = 0
	return n
}

func (c *countingStore) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	c.mu.Lock()
	c.gets[id]++
	c.mu.Unlock()
	return c.Store.Get(ctx, id)
}

func (c *countingStore) take() map[a2a.TaskID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gets
	c.gets = map[a2a.TaskID]int{}
	return g
}

func newTask(t testing.TB, s engine.Store, id a2a.TaskID) {
	t.Helper()
	if _, err := s.Create(context.Background(), &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
}

// drain claims every due record and commits it delivered up to its lease's
// revision, returning how many.
func drain(t *testing.T, o pushdelivery.Outbox, now time.Time) int {
	t.Helper()
	n := 0
	for {
		l, err := o.Claim(context.Background(), now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil {
			return n
		}
		r := l.Record()
		r.Delivered = l.Revision()
		if err := l.Commit(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		n++
	}
}

// Claim reads from the store the revisions of touched tasks only, and
// once per Rescan of the tasks written since the previous rescan (all
// ten here: written within the Rescan margin): not one lookup per
// record per call.
func TestLocalClaimReadsOnlyDirtyTasks(t *testing.T) {
	ctx := context.Background()
	s := &countingStore{Store: memstore.New(memstore.Options{}), gets: map[a2a.TaskID]int{}}
	o := pushdelivery.NewMemory(s, pushdelivery.LocalOptions{Rescan: time.Minute})
	now := time.Unix(1e9, 0)
	for i := range 10 {
		id := a2a.TaskID(fmt.Sprintf("t%d", i))
		newTask(t, s, id)
		if err := o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := drain(t, o, now); n != 10 {
		t.Fatalf("first drain: %d claims, want 10", n)
	}
	s.take()
	if n := drain(t, o, now.Add(time.Second)); n != 0 || len(s.take()) != 0 {
		t.Fatalf("nothing touched: %d claims, store read", n)
	}
	if _, err := s.Replace(ctx, &a2a.Task{ID: "t3", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, 0); err != nil {
		t.Fatal(err)
	}
	if n := drain(t, o, now.Add(2*time.Second)); n != 0 {
		t.Fatalf("untouched change claimed before the rescan")
	}
	o.Touch("t3")
	n := drain(t, o, now.Add(3*time.Second))
	if g := s.take(); n != 1 || len(g) != 1 || g["t3"] != 1 {
		t.Fatalf("touched t3: %d claims, reads %v", n, g)
	}
	if _, err := s.Replace(ctx, &a2a.Task{ID: "t5", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, 0); err != nil {
		t.Fatal(err)
	}
	if n := drain(t, o, now.Add(time.Minute)); n != 1 || len(s.take()) != 10 {
		t.Fatalf("rescan: %d claims, want t5's", n)
	}
}

// A Pebble outbox reopened has every acknowledged record as it was, and
// no lease (a lease does not outlive its process).
func TestPebbleReopenKeepsState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := memstore.New(memstore.Options{})
	open := func() *pushdelivery.Local {
		o, err := pushdelivery.OpenPebble(dir, s, pushdelivery.LocalOptions{Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := open()
	now := time.Unix(1e9, 0).UTC()
	ids := []a2a.TaskID{"a", "a\x01b", "\xffé/x"}
	for _, id := range ids {
		newTask(t, s, id)
		for _, c := range []string{"x", "y", "z"} {
			r := &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{TaskID: id, ID: c, URL: "https://h/" + c}, Created: now}
			if err := o.Save(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := o.Delete(ctx, "a", "y"); err != nil {
		t.Fatal(err)
	}
	if err := o.DeleteAll(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	l, _ := o.Claim(ctx, now, nil)
	r := l.Record()
	r.Delivered, r.LastError, r.NextAt = 1, "x", now
	if err := l.Commit(ctx, r); err != nil {
		t.Fatal(err)
	}
	if held, _ := o.Claim(ctx, now, nil); held == nil { // leased when the process goes
		t.Fatal("nothing to claim")
	}
	want := snapshot(t, o, ids)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	o = open()
	defer o.Close()
	if got := snapshot(t, o, ids); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened:\n%v\nwant\n%v", got, want)
	}
	if n := drain(t, o, now); n != 4 { // a/z, é/x, é/y, é/z: one was leased
		t.Fatalf("after reopen %d claims, want 4 (a lease outlived its process?)", n)
	}
}

func snapshot(t *testing.T, o pushdelivery.Outbox, ids []a2a.TaskID) []string {
	var out []string
	for _, id := range ids {
		rs, err := o.List(context.Background(), id, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%q %+v", id, *r))
		}
	}
	return out
}

// Every acknowledged Save, Commit, Delete and DeleteAll survives a crash
// right after it (a clone of the file system holding only what was
// synced, as after kill -9 and a power cut).
func TestPebbleCrashKeepsAcknowledged(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Options{})
	newTask(t, s, "t1")
	fs := vfs.NewCrashableMem()
	opts := pushdelivery.LocalOptions{Logger: pebblelog.Quiet{}, FS: fs}
	o, err := pushdelivery.OpenPebble("db", s, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	now := time.Unix(1e9, 0).UTC()
	save := func(task a2a.TaskID, id string) error {
		return o.Save(ctx, &pushdelivery.Record{TaskID: task, Config: a2a.PushConfig{ID: id}, Created: now})
	}
	steps := []func() error{
		func() error { return save("t1", "a") },
		func() error { return save("t1", "b") },
		func() error { return save("t2", "a") },
		func() error {
			l, _ := o.Claim(ctx, now, nil)
			r := l.Record()
			r.Delivered, r.Attempts = 1, 2
			return l.Commit(ctx, r)
		},
		func() error { return o.Delete(ctx, "t1", "a") },
		func() error { return o.DeleteAll(ctx, "t2") },
	}
	ids := []a2a.TaskID{"t1", "t2"}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		want := snapshot(t, o, ids)
		crashed, err := pushdelivery.OpenPebble("db", s, pushdelivery.LocalOptions{
			Logger: pebblelog.Quiet{}, FS: fs.CrashClone(vfs.CrashCloneCfg{})})
		if err != nil {
			t.Fatalf("step %d: reopen after crash: %v", i, err)
		}
		got := snapshot(t, crashed, ids)
		crashed.Close()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: after crash\n%v\nwant\n%v", i, got, want)
		}
	}
}

// failingStore fails the Gets of the tasks in bad (nil: none).
type failingStore struct {
	engine.Store
	mu  sync.Mutex
	bad map[a2a.TaskID]bool
}

func (f *failingStore) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	f.mu.Lock()
	bad := f.bad[id]
	f.mu.Unlock()
	if bad {
		return engine.Record{}, errors.New("store cannot read " + string(id))
	}
	return f.Store.Get(ctx, id)
}

func (f *failingStore) fail(ids ...a2a.TaskID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bad = map[a2a.TaskID]bool{}
	for _, id := range ids {
		f.bad[id] = true
	}
}

// localKinds opens a memory and a Pebble outbox over s.
func localKinds(t *testing.T, s engine.Store, opts pushdelivery.LocalOptions) map[string]*pushdelivery.Local {
	o, err := pushdelivery.OpenPebble(t.TempDir(), s, pushdelivery.LocalOptions{
		Rescan: opts.Rescan, Clock: opts.Clock, Metrics: opts.Metrics, Log: opts.Log, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return map[string]*pushdelivery.Local{"memory": pushdelivery.NewMemory(s, opts), "pebble": o}
}

// SPEC N4: a task the store cannot read is set aside — counted once,
// logged once — and every other record is claimed; once the task reads
// again its records are claimed too. (Before, the first failed read
// failed every Claim.)
func TestLocalUnreadableTaskSetAside(t *testing.T) {
	for _, kind := range []string{"memory", "pebble"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			s := &failingStore{Store: memstore.New(memstore.Options{})}
			reg := prometheus.NewRegistry()
			m := pushdelivery.NewMetrics(reg, nil)
			var logs syncBuffer
			o := localKinds(t, s, pushdelivery.LocalOptions{Rescan: time.Hour, Metrics: m,
				Log: slog.New(slog.NewTextHandler(&logs, nil))})[kind]
			now := time.Unix(1e9, 0)
			for i := range 4 {
				id := a2a.TaskID(fmt.Sprintf("t%d", i))
				newTask(t, s, id)
				if err := o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c"}}); err != nil {
					t.Fatal(err)
				}
			}
			s.fail("t1")
			for i := range 3 {
				if n := drain(t, o, now.Add(time.Duration(i)*time.Second)); n != 3*boolInt(i == 0) {
					t.Fatalf("claim %d with t1 unreadable: %d claims, want %d", i, n, 3*boolInt(i == 0))
				}
			}
			if got := setAsideCount(t, reg, pushdelivery.SetAsideUnreadableTask); got != 1 {
				t.Fatalf("set aside counted %v times, want 1", got)
			}
			if n := strings.Count(logs.String(), "set aside"); n != 1 {
				t.Fatalf("set aside logged %d times, want 1:\n%s", n, logs.String())
			}
			s.fail()
			if n := drain(t, o, now.Add(time.Minute)); n != 1 {
				t.Fatalf("t1 readable again: %d claims, want 1", n)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// setAsideCount reads a2astore_push_set_aside_total{kind}.
func setAsideCount(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "a2astore_push_set_aside_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no a2astore_push_set_aside_total{kind=%q}", kind)
	return 0
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestLocalSweepReadsOnlyMissing (SPEC C6): a sweep looks up in the store
// only the tasks whose last read found them missing, not every task with
// a record older than the grace (before: one read per such task, 200
// here, every sweep); the orphans still go.
func TestLocalSweepReadsOnlyMissing(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Options{Log: true})
	cs := &countingStore{Store: s, gets: map[a2a.TaskID]int{}}
	now := time.Now()
	o := pushdelivery.NewMemory(cs, pushdelivery.LocalOptions{Clock: func() time.Time { return now }})
	const n = 200
	old := now.Add(-time.Hour)
	save := func(id a2a.TaskID) {
		if err := o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c"}, Created: old, NextAt: old, Delivered: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		id := a2a.TaskID(fmt.Sprint("t", i))
		newTask(t, s, id)
		save(id)
	}
	save("never") // its task never written
	if err := s.Delete(ctx, "t7"); err != nil {
		t.Fatal(err)
	}
	if l, err := o.Claim(ctx, now, nil); err != nil || l != nil { // reads every task once
		t.Fatalf("claim: %v, %v; want none due", l, err)
	}
	cs.take()
	if got, err := o.Sweep(ctx, 10*time.Minute, 100); err != nil || got != 2 {
		t.Fatalf("sweep: %d, %v; want the 2 orphans", got, err)
	}
	if reads := cs.take(); len(reads) > 2 {
		t.Fatalf("sweep read %d tasks, want only the 2 missing ones", len(reads))
	}
	for _, id := range []a2a.TaskID{"t7", "never"} {
		if _, err := o.Get(ctx, id, "c"); !errors.Is(err, pushdelivery.ErrNotFound) {
			t.Fatalf("%s: %v, want swept", id, err)
		}
	}
}

// TestLocalRescanReadsOnlyWritten (SPEC C6): the periodic rescan of the
// memory and Pebble outboxes reads the tasks written since the previous
// rescan (one list page here), not every task with a record: the same
// reads with 10 and 1,000 idle tasks (before: one read per task per
// rescan, 1,000). A write no Touch announced is still claimed after it.
func TestLocalRescanReadsOnlyWritten(t *testing.T) {
	for _, n := range []int{10, 1000} {
		for _, kind := range []string{"memory", "pebble"} {
			t.Run(fmt.Sprintf("%s/n=%d", kind, n), func(t *testing.T) {
				ctx := context.Background()
				clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				s := memstore.New(memstore.Options{Clock: clock.Micros})
				cs := &countingStore{Store: s, gets: map[a2a.TaskID]int{}}
				o := localKinds(t, cs, pushdelivery.LocalOptions{Rescan: 5 * time.Second, Clock: clock.Now})[kind]
				for i := range n + 1 {
					id := a2a.TaskID(fmt.Sprint("t", i))
					newTask(t, s, id)
					if err := o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c"}, Delivered: 1}); err != nil {
						t.Fatal(err)
					}
				}
				if got := drain(t, o, clock.Now()); got != 0 {
					t.Fatalf("first claim: %d claimed, want none (caught up)", got)
				}
				clock.Advance(time.Hour) // a rescan; the tasks idle since
				drain(t, o, clock.Now())
				clock.Advance(time.Hour)
				if _, err := s.Replace(ctx, &a2a.Task{ID: "t0", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, 0); err != nil {
					t.Fatal(err)
				}
				cs.take()
				cs.takeLists()
				if got := drain(t, o, clock.Now()); got != 1 {
					t.Fatalf("rescan after an untouched write: %d claimed, want t0's record", got)
				}
				if reads, lists := cs.take(), cs.takeLists(); len(reads) != 1 || reads["t0"] != 1 || lists != 1 {
					t.Fatalf("rescan read tasks %v with %d list pages; want t0 once, one page", reads, lists)
				}
			})
		}
	}
}

// SPEC N1, C6: a task deleted after the outbox last read it is in no
// rescan (a rescan sees writes), yet its records go: Sweep looks up
// again at most limit tasks not found in the store for the grace.
func TestLocalSweepFindsDeletedAfterRead(t *testing.T) {
	for _, kind := range []string{"memory", "pebble"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			const n = 50
			clock, s, cs, o := countedLocalWithTasks(t, kind, n)
			drain(t, o, clock.Now()) // every task read, none missing
			if err := s.Delete(ctx, "t7"); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Hour)
			drain(t, o, clock.Now())
			cs.take()
			const limit = 20
			swept := 0
			for range n / limit * 2 {
				got, err := o.Sweep(ctx, 10*time.Minute, limit)
				if err != nil {
					t.Fatal(err)
				}
				swept += got
				if reads := cs.take(); len(reads) > limit {
					t.Fatalf("a sweep read %d tasks, limit %d", len(reads), limit)
				}
			}
			if _, err := o.Get(ctx, "t7", "c"); swept != 1 || !errors.Is(err, pushdelivery.ErrNotFound) {
				t.Fatalf("swept %d; t7's record: %v; want it swept", swept, err)
			}
			if _, err := o.Get(ctx, "t8", "c"); err != nil {
				t.Fatalf("t8's record: %v", err)
			}
		})
	}
}

// SPEC N1: a config of a task deleted and created again, not due for the
// new task (its cursor at the new task's revision), goes at the next
// rescan, which reads the deletion marks of the tasks written since: it
// does not come back to serve the new task once the store forgets the
// deletion (the log retention). Before, it stayed, hidden only while the
// mark was remembered. A config of the new task stays, its task's mark
// read again.
func TestLocalRescanDropsRecordsOfDeletedIncarnation(t *testing.T) {
	for _, kind := range []string{"memory", "pebble"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			clock, s, o := clockedLocal(t, kind, nil)
			save := func(id string) {
				t.Helper()
				inc, err := pushdelivery.Incarnation(ctx, s, "t1")
				if err != nil {
					t.Fatal(err)
				}
				if err := o.Save(ctx, &pushdelivery.Record{TaskID: "t1", Config: a2a.PushConfig{ID: id},
					Created: clock.Now(), NextAt: clock.Now(), Delivered: 1, Incarnation: inc}); err != nil {
					t.Fatal(err)
				}
			}
			newTask(t, s, "t1")
			save("old")
			drain(t, o, clock.Now()) // read: caught up
			clock.Advance(time.Second)
			if err := s.Delete(ctx, "t1"); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
			newTask(t, s, "t1") // revision 1 again
			clock.Advance(time.Hour)
			if got := drain(t, o, clock.Now()); got != 0 {
				t.Fatalf("rescan: %d claimed, want none", got)
			}
			if _, err := o.Get(ctx, "t1", "old"); !errors.Is(err, pushdelivery.ErrNotFound) {
				t.Fatalf("the deleted task's record after a rescan: %v, want removed", err)
			}
			save("new")
			// The task written again: the next rescan reads its mark once
			// more, and keeps the record saved for its incarnation.
			r, err := s.Get(ctx, "t1")
			if err != nil {
				t.Fatal(err)
			}
			r.Task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted}
			if _, err := s.Replace(ctx, r.Task, r.Revision); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Hour)
			drain(t, o, clock.Now())
			if _, err := o.Get(ctx, "t1", "new"); err != nil {
				t.Fatalf("the new task's record after a rescan: %v, want kept", err)
			}
			// The store forgets the deletion: nothing of the first task
			// serves the second.
			if _, err := s.TrimLog(ctx, clock.Now().UnixMicro(), 100); err != nil {
				t.Fatal(err)
			}
			cfgs, err := pushdelivery.NewConfigStore(o, s).List(ctx, "t1")
			if err != nil {
				t.Fatal(err)
			}
			if len(cfgs) != 1 || cfgs[0].ID != "new" {
				t.Fatalf("configs of the task created again: %v, want only new", cfgs)
			}
		})
	}
}

// clockedLocal returns a fake clock, a memstore with a log on it, and the
// Local outbox of kind (Rescan 5 s, on the clock) over the store, or over
// wrap(store) when wrap is not nil.
func clockedLocal(t *testing.T, kind string, wrap func(*memstore.Store) engine.Store) (*fakeclock.Clock, *memstore.Store, *pushdelivery.Local) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Options{Log: true, Clock: clock.Micros})
	var over engine.Store = s
	if wrap != nil {
		over = wrap(s)
	}
	return clock, s, localKinds(t, over, pushdelivery.LocalOptions{Rescan: 5 * time.Second, Clock: clock.Now})[kind]
}

// SPEC N1: a Pebble outbox reopened reads the deletion marks of the tasks
// it loads: a record of a task deleted and created again while no outbox
// ran goes at the first refresh (before: the first rescan only takes
// its start, and the task, written before it, was in no later one: the
// record stayed, to serve the new task once the store forgot the
// deletion). The new task's record stays.
func TestPebbleReopenDropsRecordsOfDeletedIncarnation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Options{Log: true, Clock: clock.Micros})
	open := func() *pushdelivery.Local {
		t.Helper()
		o, err := pushdelivery.OpenPebble(dir, s, pushdelivery.LocalOptions{Rescan: 5 * time.Second, Clock: clock.Now, Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	save := func(o *pushdelivery.Local, task a2a.TaskID) {
		t.Helper()
		inc, err := pushdelivery.Incarnation(ctx, s, task)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Save(ctx, &pushdelivery.Record{TaskID: task, Config: a2a.PushConfig{ID: "c"},
			Created: clock.Now(), NextAt: clock.Now(), Delivered: 1, Incarnation: inc}); err != nil {
			t.Fatal(err)
		}
	}
	o := open()
	newTask(t, s, "again")
	save(o, "again")
	newTask(t, s, "kept")
	clock.Advance(time.Second)
	if err := s.Delete(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	newTask(t, s, "kept")
	save(o, "kept") // for the new incarnation
	drain(t, o, clock.Now())
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if err := s.Delete(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	newTask(t, s, "again")
	o = open()
	defer o.Close()
	clock.Advance(time.Hour)
	if got := drain(t, o, clock.Now()); got != 0 {
		t.Fatalf("after reopening: %d claimed, want none", got)
	}
	if _, err := o.Get(ctx, "again", "c"); !errors.Is(err, pushdelivery.ErrNotFound) {
		t.Fatalf("the deleted task's record after reopening: %v, want removed", err)
	}
	if _, err := o.Get(ctx, "kept", "c"); err != nil {
		t.Fatalf("the new task's record after reopening: %v, want kept", err)
	}
}

// SPEC C6: Sweep's look again at tasks not found for the grace goes
// through the tasks due only, least recently found first: with every
// task found within the grace it visits one entry and reads nothing
// (before: it went through every task with records, under the lock);
// once they are all due, each sweep reads limit of them, and every task
// is read once in (tasks / limit) sweeps.
func TestLocalSweepLooksAgainAtDueOnly(t *testing.T) {
	for _, kind := range []string{"memory", "pebble"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			const n, limit, grace = 200, 20, 10 * time.Minute
			clock, _, cs, o := countedLocalWithTasks(t, kind, n)
			// Every task found, and the rescans past their writes (the
			// second one's window still holds them).
			for range 3 {
				drain(t, o, clock.Now())
				clock.Advance(6 * time.Second)
			}
			sweep := func() (looked int, reads map[a2a.TaskID]int) {
				t.Helper()
				before := o.SweepLooked()
				cs.take()
				if got, err := o.Sweep(ctx, grace, limit); err != nil || got != 0 {
					t.Fatalf("sweep: %d, %v; want nothing swept", got, err)
				}
				return o.SweepLooked() - before, cs.take()
			}
			clock.Advance(grace / 2)
			if looked, reads := sweep(); looked > 1 || len(reads) != 0 {
				t.Fatalf("nothing due: the sweep went through %d tasks and read %d, want 1 and none", looked, len(reads))
			}
			clock.Advance(time.Hour)
			all := map[a2a.TaskID]int{}
			for range n / limit {
				looked, reads := sweep()
				if looked > limit || len(reads) > limit {
					t.Fatalf("the sweep went through %d tasks and read %d, limit %d", looked, len(reads), limit)
				}
				for id, k := range reads {
					all[id] += k
				}
			}
			if len(all) != n {
				t.Fatalf("%d sweeps read %d tasks again, want all %d", n/limit, len(all), n)
			}
			if looked, reads := sweep(); looked > 1 || len(reads) != 0 {
				t.Fatalf("every task found again: the sweep went through %d tasks and read %d, want 1 and none", looked, len(reads))
			}
		})
	}
}

// SPEC N1, C6: a task due for a look again but without a record older
// than the grace (records saved since its last read, when the reads
// after failed: set aside, N4; here records created in the future) goes
// to the back of the order, so that such tasks never hold up the look
// again at the others: the records of a task deleted after its last
// read, found last, still go within (tasks / limit) sweeps.
func TestLocalSweepPassesTasksWithoutOldRecords(t *testing.T) {
	for _, kind := range []string{"memory", "pebble"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			clock, s, o := clockedLocal(t, kind, nil)
			const n, limit, grace = 60, 10, 10 * time.Minute
			save := func(id a2a.TaskID, created time.Time) {
				t.Helper()
				newTask(t, s, id)
				if err := o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c"}, Created: created, Delivered: 1}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				save(a2a.TaskID(fmt.Sprint("t", i)), clock.Now().Add(24*time.Hour)) // never older than the grace here
			}
			save("x", clock.Now())
			for range 3 {
				drain(t, o, clock.Now())
				clock.Advance(6 * time.Second)
			}
			o.Touch("x") // found last
			drain(t, o, clock.Now())
			if err := s.Delete(ctx, "x"); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Hour)
			swept := 0
			for range (n+1)/limit + 1 {
				got, err := o.Sweep(ctx, grace, limit)
				if err != nil {
					t.Fatal(err)
				}
				swept += got
			}
			if _, err := o.Get(ctx, "x", "c"); swept != 1 || !errors.Is(err, pushdelivery.ErrNotFound) {
				t.Fatalf("swept %d; x's record: %v; want it swept", swept, err)
			}
		})
	}
}

// countedLocalWithTasks is clockedLocal over a countingStore, with n
// tasks t0, t1, ... created, each with a record "c" created now and
// delivered up to revision 1.
func countedLocalWithTasks(t *testing.T, kind string, n int) (*fakeclock.Clock, *memstore.Store, *countingStore, *pushdelivery.Local) {
	t.Helper()
	var cs *countingStore
	clock, s, o := clockedLocal(t, kind, func(s *memstore.Store) engine.Store {
		cs = &countingStore{Store: s, gets: map[a2a.TaskID]int{}}
		return cs
	})
	for i := range n {
		id := a2a.TaskID(fmt.Sprint("t", i))
		newTask(t, s, id)
		if err := o.Save(context.Background(), &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c"}, Created: clock.Now(), Delivered: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return clock, s, cs, o
}
