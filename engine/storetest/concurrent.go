package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// The concurrent test: writers and traversers on goroutines, bounded, with
// the L7 guarantees checked per traversal against a set of stable tasks no
// writer touches, and no call allowed to fail with ErrInternal.

func testConcurrent(t testing.TB, e *env) {
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("storetest seed %d (rerun with -storetest.seed=%d)", seed, seed)
	for _, err := range runConcurrent(e, seed, concurrency{writers: 4, writerOps: 120, traversers: 3, traversals: 10}) {
		t.Errorf("seed %d: %v", seed, err)
	}
}

type concurrency struct {
	writers, writerOps     int
	traversers, traversals int
}

const (
	stableTasks = 40
	raceIDs     = 12 // IDs every writer tries to create: one must win
	maxLive     = 7  // tasks a writer keeps alive
)

// concurrentRun is one run's shared state: the stable tasks, what the
// writers and traversers report, and the broken guarantees seen.
type concurrentRun struct {
	e      *env
	seed   uint64
	c      concurrency
	stable map[a2a.TaskID]engine.Record // created before the run; no writer touches them

	raceWins [raceIDs]atomic.Int32 // successful Creates of race-NN
	pages    atomic.Int64          // pages the traversers listed

	mu   sync.Mutex
	errs []error
}

// runConcurrent returns every broken guarantee it saw.
func runConcurrent(e *env, seed uint64, c concurrency) []error {
	r := &concurrentRun{e: e, seed: seed, c: c, stable: map[a2a.TaskID]engine.Record{}}
	if err := r.createStable(); err != nil {
		return []error{fmt.Errorf("setup: %w", err)}
	}
	var wg sync.WaitGroup
	for w := range c.writers {
		wg.Go(func() { r.newWriter(w).run() })
	}
	for tr := range c.traversers {
		wg.Go(func() { r.newTraverser(tr).run() })
	}
	wg.Wait()
	for i := range min(raceIDs, (c.writerOps+9)/10) {
		if n := r.raceWins[i].Load(); n != 1 {
			r.fail("race-%02d was created %d times by concurrent Creates, want exactly 1", i, n)
		}
	}
	if r.pages.Load() < int64(c.traversers*c.traversals) {
		r.fail("only %d pages listed", r.pages.Load())
	}
	return r.errs
}

// fail records a broken guarantee (the first 20).
func (r *concurrentRun) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Errorf(format, args...))
	}
}

// stableOwners are the owners of the stable tasks on an OwnerStore ("":
// none); writers create tasks of the first one too.
var stableOwners = []string{"owner-0", "owner-1", ""}

// createStable creates the tasks the traversals must see exactly once, on
// an OwnerStore with owners.
func (r *concurrentRun) createStable() error {
	for i := range stableTasks {
		ctx := "ctx-a"
		if i%2 == 1 {
			ctx = "ctx-b"
		}
		tk := spec{id: a2a.TaskID(fmt.Sprintf("stable-%02d", i)), ctx: ctx, state: allStates[i%len(allStates)], ts: statusAt(i % 5), history: 2, artifacts: 1, tag: "s"}.build()
		var rec engine.Record
		var err error
		if r.e.o != nil {
			rec, err = r.e.o.CreateOwned(r.e.ctx, tk, stableOwners[i%len(stableOwners)])
		} else {
			rec, err = r.e.s.Create(r.e.ctx, tk)
		}
		if err != nil {
			return err
		}
		r.stable[tk.ID] = rec
		r.e.tick(1)
	}
	return nil
}

// writer races on shared IDs and mutates tasks of its own, checking each
// result against what it last saw of the task.
type writer struct {
	r       *concurrentRun
	n       int // writer number
	rng     *rand.Rand
	live    map[a2a.TaskID]engine.Record // its tasks, as last written
	order   []a2a.TaskID                 // live's keys, in creation order
	created int
}

func (r *concurrentRun) newWriter(n int) *writer {
	return &writer{r: r, n: n, rng: rand.New(rand.NewPCG(r.seed, uint64(n))), live: map[a2a.TaskID]engine.Record{}}
}

func (w *writer) run() {
	for i := range w.r.c.writerOps {
		w.step(i)
	}
}

// step is operation i: every tenth a racing Create, else a Create of its
// own while it has few tasks, else a mutation of one of them.
func (w *writer) step(i int) {
	e := w.r.e
	if e.clock != nil {
		e.clock.Advance(w.rng.Int64N(3))
	}
	switch {
	case i%10 == 0 && i/10 < raceIDs:
		w.race(i / 10)
	case len(w.live) < 2 || len(w.live) < maxLive && w.rng.IntN(4) == 0:
		w.create()
	default:
		w.mutate(i)
	}
}

// race tries to create race-k, which every writer tries: one must win.
func (w *writer) race(k int) {
	e := w.r.e
	_, err := e.s.Create(e.ctx, task(a2a.TaskID(fmt.Sprintf("race-%02d", k)), "ctx-r"))
	switch {
	case err == nil:
		w.r.raceWins[k].Add(1)
	case !errors.Is(err, engine.ErrAlreadyExists):
		w.r.fail("writer %d: racing Create: %v", w.n, err)
	}
}

// create creates a task of its own.
func (w *writer) create() {
	e := w.r.e
	id := a2a.TaskID(fmt.Sprintf("w%d-%03d", w.n, w.created))
	w.created++
	ctx := "ctx-a"
	if w.rng.IntN(2) == 0 {
		ctx = "ctx-w"
	}
	tk := spec{id: id, ctx: ctx, state: a2a.TaskStateWorking, ts: statusAt(1), history: 1, tag: "w"}.build()
	var rec engine.Record
	var err error
	if e.o != nil && w.rng.IntN(2) == 0 {
		rec, err = e.o.CreateOwned(e.ctx, tk, stableOwners[0])
	} else {
		rec, err = e.s.Create(e.ctx, tk)
	}
	if err != nil {
		w.r.fail("writer %d: Create(%s): %v", w.n, id, err)
		return
	}
	w.live[id] = rec
	w.order = append(w.order, id)
}

// mutate runs a random operation on one of its tasks: conditional
// Replace, AppendHistory, Cancel, Get or Delete. Every successful mutation
// must advance revision and time (S2, S4, S7).
func (w *writer) mutate(i int) {
	e := w.r.e
	id := w.order[w.rng.IntN(len(w.order))]
	prev := w.live[id]
	var (
		rec engine.Record
		err error
		op  string
	)
	switch x := w.rng.IntN(10); {
	case x < 4:
		op = "conditional Replace"
		next := clone(prev.Task)
		next.Metadata = map[string]any{"i": float64(i)}
		if w.rng.IntN(2) == 0 {
			next.ContextID = "ctx-a"
		}
		rec, err = e.s.Replace(e.ctx, next, prev.Revision)
	case x < 7:
		op = "AppendHistory"
		rec, err = e.s.AppendHistory(e.ctx, id, newMessage(fmt.Sprintf("w%d-m%d", w.n, i)))
	case x < 8:
		op = "Cancel"
		rec, err = e.s.Cancel(e.ctx, id)
		if prev.Task.Status.State.Terminal() {
			if !errors.Is(err, engine.ErrNotCancelable) {
				w.r.fail("writer %d: Cancel of a canceled task: %v", w.n, err)
			}
			return
		}
	case x < 9:
		if got, err := e.s.Get(e.ctx, id); err != nil {
			w.r.fail("writer %d: Get(%s) of its own task: %v", w.n, id, err)
		} else if d := diffRecord(got, prev); d != "" {
			w.r.fail("writer %d: Get(%s) of its own task: %s", w.n, id, d)
		}
		return
	default:
		if err := e.s.Delete(e.ctx, id); err != nil {
			w.r.fail("writer %d: Delete(%s): %v", w.n, id, err)
		}
		w.forget(id)
		return
	}
	if err != nil {
		w.r.fail("writer %d: %s(%s) of its own task: %v", w.n, op, id, err)
		return
	}
	if rec.Revision != prev.Revision+1 || rec.Cursor.UpdatedAt <= prev.Cursor.UpdatedAt {
		w.r.fail("writer %d: %s(%s): revision %d→%d, time %d→%d", w.n, op, id, prev.Revision, rec.Revision, prev.Cursor.UpdatedAt, rec.Cursor.UpdatedAt)
	}
	if rec.Owner != prev.Owner {
		w.r.fail("writer %d: %s(%s): owner %q→%q (O2)", w.n, op, id, prev.Owner, rec.Owner)
	}
	w.live[id] = rec
}

// forget drops a deleted task.
func (w *writer) forget(id a2a.TaskID) {
	delete(w.live, id)
	for j, o := range w.order {
		if o == id {
			w.order = append(w.order[:j], w.order[j+1:]...)
			return
		}
	}
}

// traverser runs whole traversals beside the writers, checking each page
// and, at the end, that every stable task it should see was seen exactly
// once (L7).
type traverser struct {
	r   *concurrentRun
	n   int // traverser number
	rng *rand.Rand
}

func (r *concurrentRun) newTraverser(n int) *traverser {
	return &traverser{r: r, n: n, rng: rand.New(rand.NewPCG(r.seed, 1000+uint64(n)))}
}

func (t *traverser) run() {
	for n := range t.r.c.traversals {
		t.traverse(n)
	}
}

// traverse runs traversal n: unfiltered, one context or one state, and on
// an OwnerStore one owner (whose tasks writers create and mutate) or
// another owner in one context.
func (t *traverser) traverse(n int) {
	var req engine.ListRequest
	kinds := 3
	if t.r.e.o != nil {
		kinds = 5
	}
	switch t.rng.IntN(kinds) {
	case 1:
		req.ContextID = "ctx-a"
	case 2:
		req.Status = a2a.TaskStateWorking
	case 3:
		req.Owner = stableOwners[0]
	case 4:
		req.Owner, req.ContextID = stableOwners[1], "ctx-a"
	}
	start := map[a2a.TaskID]bool{}
	for id, rec := range t.r.stable {
		if (req.ContextID == "" || rec.Task.ContextID == req.ContextID) && (req.Status == "" || rec.Task.Status.State == req.Status) &&
			(req.Owner == "" || rec.Owner == req.Owner) {
			start[id] = true
		}
	}
	check := newTravCheck(start) // writers never touch stable tasks
	for page := 0; t.step(&req, check, n, page); page++ {
		if page > 500 {
			t.r.fail("traverser %d: traversal does not end", t.n)
			return
		}
	}
}

// step lists one page of traversal n with a random page size, with or
// without a total, checks it and moves req to the next page. It reports
// whether the traversal goes on.
func (t *traverser) step(req *engine.ListRequest, check *travCheck, n, page int) bool {
	e := t.r.e
	req.PageSize = 1 + t.rng.IntN(10)
	req.IncludeTotalSize = t.rng.IntN(2) == 0
	if page == 0 && n%3 == 0 {
		req.PageSize, req.IncludeTotalSize = specMaxPageSize, true
	}
	resp, err := e.s.List(e.ctx, req)
	if err != nil {
		t.r.fail("traverser %d: List: %v", t.n, err)
		return false
	}
	t.r.pages.Add(1)
	if msg := e.checkPage(*req, resp); msg != "" {
		t.r.fail("traverser %d traversal %d page %d: %s", t.n, n, page, msg)
		return false
	}
	if err := check.page(resp); err != nil {
		t.r.fail("traverser %d traversal %d page %d: %v", t.n, n, page, err)
		return false
	}
	// L8: count and page come from one view.
	if req.IncludeTotalSize && len(resp.Tasks) > resp.TotalSize {
		t.r.fail("traverser %d: %d tasks on a page but total %d (L8)", t.n, len(resp.Tasks), resp.TotalSize)
	}
	if req.IncludeTotalSize && req.PageToken == "" && resp.NextPageToken == "" && len(resp.Tasks) != resp.TotalSize {
		t.r.fail("traverser %d: a first page holding every match has %d tasks but total %d (L8)", t.n, len(resp.Tasks), resp.TotalSize)
	}
	for i, tk := range resp.Tasks {
		rec, ok := t.r.stable[tk.ID]
		if ok && (resp.TaskCursors[i] != rec.Cursor || tk.ContextID != rec.Task.ContextID) {
			t.r.fail("traverser %d: stable task %q at %s, created at %s", t.n, string(tk.ID), fmtCursor(resp.TaskCursors[i]), fmtCursor(rec.Cursor))
		}
		if ok && e.o != nil && resp.TaskOwners[i] != rec.Owner {
			t.r.fail("traverser %d: stable task %q listed with owner %q, created for %q (O5)", t.n, string(tk.ID), resp.TaskOwners[i], rec.Owner)
		}
	}
	if resp.NextPageToken == "" {
		if err := check.finish(); err != nil {
			t.r.fail("traverser %d traversal %d (%s): %v", t.n, n, fmtReq(*req), err)
		}
		return false
	}
	req.PageToken = resp.NextPageToken
	return true
}
