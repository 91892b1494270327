package authz_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"weak"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/storetest"
)

// liveCounter wraps a store and tracks, with weak pointers, how many of the
// tasks it handed out are still reachable. Every sampleEvery-th call it
// collects garbage and records the peak of (tasks still alive from earlier
// calls) + (tasks handed out by this call): an upper bound of what the
// caller holds at once, measured rather than assumed.
type liveCounter struct {
	engine.Store
	sampleEvery int

	mu       sync.Mutex
	calls    int
	handed   []weak.Pointer[a2a.Task]
	peak     int
	samples  int
	maxBatch int
	gets     int
}

func (l *liveCounter) liveLocked() int {
	runtime.GC()
	n := 0
	kept := l.handed[:0]
	for _, w := range l.handed {
		if w.Value() != nil {
			n++
			kept = append(kept, w)
		}
	}
	clear(l.handed[len(kept):])
	l.handed = kept
	return n
}

func (l *liveCounter) record(tasks ...*a2a.Task) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.calls%l.sampleEvery == 0 {
		l.samples++
		l.peak = max(l.peak, l.liveLocked()+len(tasks))
	}
	for _, t := range tasks {
		l.handed = append(l.handed, weak.Make(t))
	}
}

func (l *liveCounter) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := l.Store.List(ctx, req)
	if err == nil {
		l.mu.Lock()
		l.maxBatch = max(l.maxBatch, len(resp.Tasks))
		l.mu.Unlock()
		l.record(resp.Tasks...)
	}
	return resp, err
}

func (l *liveCounter) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	rec, err := l.Store.Get(ctx, id)
	if err == nil {
		l.mu.Lock()
		l.gets++
		l.mu.Unlock()
		l.record(rec.Task)
	}
	return rec, err
}

// TestBoundedMemory: over 100k tasks of which the caller owns 1%, the
// dispatcher's scan holds at most one batch and one page of tasks at a
// time (A3). The policy decides by owner but does not narrow: it scans.
func TestBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("100k tasks")
	}
	const n, page = 100_000, 50
	c := storetest.NewManualClock(1_000_000)
	mem := newMem(t, c)
	bg := context.Background()
	for i := range n {
		c.Advance(1)
		owner := "other"
		if i%100 == 7 {
			owner = "alice"
		}
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%06d", i)), ContextID: fmt.Sprint("ctx", i%10),
			Status:  a2a.TaskStatus{State: a2a.TaskStateWorking},
			History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("some history"))}}
		if _, err := mem.CreateOwned(bg, task, owner); err != nil {
			t.Fatal(err)
		}
	}
	alice := authz.WithCaller(bg, "alice")
	for _, tc := range []struct {
		name  string
		req   engine.ListRequest
		every int // GC sample period, in store calls
	}{
		{"total/full", engine.ListRequest{PageSize: page, IncludeTotalSize: true}, 250},
		{"total/light", engine.ListRequest{PageSize: page, IncludeTotalSize: true, Projection: engine.ProjectionLight}, 250},
		{"nototal/full", engine.ListRequest{PageSize: page}, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := &liveCounter{Store: mem, sampleEvery: tc.every}
			d := authz.New(lc, scanOwner{engine.ProjectionLight})
			req := tc.req
			pages, tasks := 0, 0
			for {
				resp, err := d.List(alice, &req)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				tasks += len(resp.Tasks)
				if req.IncludeTotalSize && resp.TotalSize != n/100 {
					t.Fatalf("total %d, want %d", resp.TotalSize, n/100)
				}
				if resp.NextPageToken == "" || pages == 2 {
					break
				}
				req.PageToken = resp.NextPageToken
			}
			if tasks != 2*page {
				t.Fatalf("%d tasks in 2 pages", tasks)
			}
			t.Logf("peak tasks held %d over %d samples; max batch %d; %d full reads for %d pages",
				lc.peak, lc.samples, lc.maxBatch, lc.gets, pages)
			if lc.samples < 2 || lc.peak > authz.BatchSize+page || lc.maxBatch > authz.BatchSize || lc.gets > pages*page {
				t.Fatalf("peak %d (samples %d), max batch %d, gets %d: want peak <= %d", lc.peak, lc.samples, lc.maxBatch, lc.gets, authz.BatchSize+page)
			}
		})
	}
}

// TestRowsIndependentOfOutOfScope: the rows the dispatcher reads depend only
// on the narrowed scope, not on how many tasks lie outside it (A1, A3).
func TestRowsIndependentOfOutOfScope(t *testing.T) {
	if testing.Short() {
		t.Skip("100k tasks")
	}
	build := func(outside int) engine.Store {
		c := storetest.NewManualClock(1_000_000)
		mem := newMem(t, c)
		for i := range 1000 + outside {
			c.Advance(1)
			ctxID := "other"
			id := fmt.Sprintf("o%06d", i)
			// The in-scope tasks get identical IDs and times in both
			// stores: one every (outside/1000+1) ticks.
			if i%(outside/1000+1) == 0 {
				ctxID, id = "mine", fmt.Sprintf("m%06d", i/(outside/1000+1))
				c.Set(int64(2_000_000 + i/(outside/1000+1)))
			}
			if _, err := mem.Create(context.Background(), working(a2a.TaskID(id), ctxID)); err != nil {
				t.Fatal(err)
			}
		}
		return mem
	}
	ctx := authz.WithAllowedContexts(context.Background(), "mine")
	run := func(s engine.Store) (string, int, int, int) {
		pr := &probe{Store: s}
		pages := traverse(t, ctx, authz.New(pr, authz.ContextAllowList{}),
			engine.ListRequest{PageSize: 100, IncludeTotalSize: true})
		var st engine.ListStats
		for _, p := range pages {
			st.Add(p.Stats)
		}
		return jsonOf(pages), pr.rows, len(pr.lists), st.Examined
	}
	small, big := build(9_000), build(99_000)
	p1, rows1, calls1, ex1 := run(small)
	p2, rows2, calls2, ex2 := run(big)
	t.Logf("rows %d/%d, store calls %d/%d, store entries examined %d/%d", rows1, rows2, calls1, calls2, ex1, ex2)
	if p1 != p2 || rows1 != rows2 || calls1 != calls2 {
		t.Fatalf("out-of-scope tasks changed the scan: rows %d vs %d, calls %d vs %d, pages equal %v", rows1, rows2, calls1, calls2, p1 == p2)
	}
	if ex1 != ex2 {
		t.Fatalf("memstore examined %d vs %d entries", ex1, ex2)
	}
	if rows1 == 0 || len(p1) < 100 {
		t.Fatal("nothing in scope")
	}
}
