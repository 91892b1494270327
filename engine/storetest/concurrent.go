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

// runConcurrent returns every broken guarantee it saw.
func runConcurrent(e *env, seed uint64, c concurrency) []error {
	var (
		mu   sync.Mutex
		errs []error
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	stable := map[a2a.TaskID]engine.Record{}
	for i := range stableTasks {
		ctx := "ctx-a"
		if i%2 == 1 {
			ctx = "ctx-b"
		}
		tk := spec{id: a2a.TaskID(fmt.Sprintf("stable-%02d", i)), ctx: ctx, state: allStates[i%len(allStates)], ts: statusAt(i % 5), history: 2, artifacts: 1, tag: "s"}.build()
		r, err := e.s.Create(e.ctx, tk)
		if err != nil {
			return []error{fmt.Errorf("setup: %w", err)}
		}
		stable[tk.ID] = r
		e.tick(1)
	}
	var raceWins [raceIDs]atomic.Int32
	var wg sync.WaitGroup
	for w := range c.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			live := map[a2a.TaskID]engine.Record{}
			var order []a2a.TaskID
			created := 0
			for i := range c.writerOps {
				if e.clock != nil {
					e.clock.Advance(rng.Int64N(3))
				}
				if i%10 == 0 && i/10 < raceIDs {
					_, err := e.s.Create(e.ctx, task(a2a.TaskID(fmt.Sprintf("race-%02d", i/10)), "ctx-r"))
					switch {
					case err == nil:
						raceWins[i/10].Add(1)
					case !errors.Is(err, engine.ErrAlreadyExists):
						fail("writer %d: racing Create: %v", w, err)
					}
					continue
				}
				if len(live) < 2 || len(live) < maxLive && rng.IntN(4) == 0 {
					id := a2a.TaskID(fmt.Sprintf("w%d-%03d", w, created))
					created++
					ctx := "ctx-a"
					if rng.IntN(2) == 0 {
						ctx = "ctx-w"
					}
					r, err := e.s.Create(e.ctx, spec{id: id, ctx: ctx, state: a2a.TaskStateWorking, ts: statusAt(1), history: 1, tag: "w"}.build())
					if err != nil {
						fail("writer %d: Create(%s): %v", w, id, err)
						continue
					}
					live[id] = r
					order = append(order, id)
					continue
				}
				id := order[rng.IntN(len(order))]
				prev := live[id]
				var (
					r   engine.Record
					err error
					op  string
				)
				switch x := rng.IntN(10); {
				case x < 4:
					op = "conditional Replace"
					next := clone(prev.Task)
					next.Metadata = map[string]any{"i": float64(i)}
					if rng.IntN(2) == 0 {
						next.ContextID = "ctx-a"
					}
					r, err = e.s.Replace(e.ctx, next, prev.Revision)
				case x < 7:
					op = "AppendHistory"
					r, err = e.s.AppendHistory(e.ctx, id, newMessage(fmt.Sprintf("w%d-m%d", w, i)))
				case x < 8:
					op = "Cancel"
					r, err = e.s.Cancel(e.ctx, id)
					if prev.Task.Status.State.Terminal() {
						if !errors.Is(err, engine.ErrNotCancelable) {
							fail("writer %d: Cancel of a canceled task: %v", w, err)
						}
						continue
					}
				case x < 9:
					op = "Get"
					r, err = e.s.Get(e.ctx, id)
					if err == nil && diffRecord(r, prev) != "" {
						fail("writer %d: Get(%s) of its own task: %s", w, id, diffRecord(r, prev))
					}
					r = prev
				default:
					if err := e.s.Delete(e.ctx, id); err != nil {
						fail("writer %d: Delete(%s): %v", w, id, err)
					}
					delete(live, id)
					for j, o := range order {
						if o == id {
							order = append(order[:j], order[j+1:]...)
							break
						}
					}
					continue
				}
				if err != nil {
					fail("writer %d: %s(%s) of its own task: %v", w, op, id, err)
					continue
				}
				if op != "Get" && (r.Revision != prev.Revision+1 || r.Cursor.UpdatedAt <= prev.Cursor.UpdatedAt) {
					fail("writer %d: %s(%s): revision %d→%d, time %d→%d", w, op, id, prev.Revision, r.Revision, prev.Cursor.UpdatedAt, r.Cursor.UpdatedAt)
				}
				live[id] = r
			}
		}()
	}
	var pages atomic.Int64
	for tr := range c.traversers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1000+uint64(tr)))
			for n := range c.traversals {
				var req engine.ListRequest
				switch rng.IntN(3) {
				case 1:
					req.ContextID = "ctx-a"
				case 2:
					req.Status = a2a.TaskStateWorking
				}
				start := map[a2a.TaskID]bool{}
				for id, r := range stable {
					if (req.ContextID == "" || r.Task.ContextID == req.ContextID) && (req.Status == "" || r.Task.Status.State == req.Status) {
						start[id] = true
					}
				}
				check := newTravCheck(start) // writers never touch stable tasks
				for page := 0; ; page++ {
					req.PageSize = 1 + rng.IntN(10)
					req.IncludeTotalSize = rng.IntN(2) == 0
					if page == 0 && n%3 == 0 {
						req.PageSize, req.IncludeTotalSize = specMaxPageSize, true
					}
					resp, err := e.s.List(e.ctx, &req)
					if err != nil {
						fail("traverser %d: List: %v", tr, err)
						break
					}
					pages.Add(1)
					if msg := checkPage(req, resp); msg != "" {
						fail("traverser %d traversal %d page %d: %s", tr, n, page, msg)
						break
					}
					if err := check.page(resp); err != nil {
						fail("traverser %d traversal %d page %d: %v", tr, n, page, err)
						break
					}
					// L8: count and page come from one view.
					if req.IncludeTotalSize && len(resp.Tasks) > resp.TotalSize {
						fail("traverser %d: %d tasks on a page but total %d (L8)", tr, len(resp.Tasks), resp.TotalSize)
					}
					if req.IncludeTotalSize && req.PageToken == "" && resp.NextPageToken == "" && len(resp.Tasks) != resp.TotalSize {
						fail("traverser %d: a first page holding every match has %d tasks but total %d (L8)", tr, len(resp.Tasks), resp.TotalSize)
					}
					for i, tk := range resp.Tasks {
						if r, ok := stable[tk.ID]; ok && (resp.TaskCursors[i] != r.Cursor || tk.ContextID != r.Task.ContextID) {
							fail("traverser %d: stable task %q at %s, created at %s", tr, string(tk.ID), fmtCursor(resp.TaskCursors[i]), fmtCursor(r.Cursor))
						}
					}
					if resp.NextPageToken == "" {
						if err := check.finish(); err != nil {
							fail("traverser %d traversal %d (%s): %v", tr, n, fmtReq(req), err)
						}
						break
					}
					if page > 500 {
						fail("traverser %d: traversal does not end", tr)
						break
					}
					req.PageToken = resp.NextPageToken
				}
			}
		}()
	}
	wg.Wait()
	for i := range min(raceIDs, (c.writerOps+9)/10) {
		if n := raceWins[i].Load(); n != 1 {
			fail("race-%02d was created %d times by concurrent Creates, want exactly 1", i, n)
		}
	}
	if pages.Load() < int64(c.traversers*c.traversals) {
		fail("only %d pages listed", pages.Load())
	}
	return errs
}
