package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// hammerStore is what RunSameIDHammer needs of a store.
type hammerStore interface {
	engine.OwnerStore
	engine.ConditionalStore
	engine.Retainer
	engine.Checker
}

// RunSameIDHammer races writers on three IDs (S7, S9, R1): four
// goroutines create (with owners), replace conditionally and not, cancel
// and append conditionally, delete, and sweep retention (terminal and
// stuck) on IDs whose bodies straddle chunk sizes (most under 3 KB, some
// 40 KB; one ID 61 bytes long), on the wall clock. No two successful
// writes may return the same revision of one ID within one incarnation
// (between two Creates), and CheckInvariants must hold between the writes
// (unless StressOptions.QuietInvariants) and after them. It runs on
// Harness.Open's store ("log-off") and, when set, on OpenLogged's
// ("log-on"). The seed is logged and set with -storetest.seed.
func RunSameIDHammer(t *testing.T, h Harness, o StressOptions) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	t.Run("log-off", func(t *testing.T) { runSameIDHammer(t, h.Open(t, wallClock(h)), o) })
	if h.OpenLogged != nil {
		t.Run("log-on", func(t *testing.T) { runSameIDHammer(t, h.OpenLogged(t, wallClock(h)), o) })
	}
}

func runSameIDHammer(t *testing.T, store engine.Store, o StressOptions) {
	s, ok := store.(hammerStore)
	if !ok {
		t.Fatalf("%T is not an OwnerStore, ConditionalStore, Retainer and Checker", store)
	}
	seed := stressSeed(t)
	ctx := context.Background()
	ids := []a2a.TaskID{"a", "b" + a2a.TaskID(strings.Repeat("x", 60)), "c"}
	type key struct {
		id  a2a.TaskID
		inc int64
		rev int64
	}
	var mu sync.Mutex
	got := map[key]string{}
	var incs [3]atomic.Int64 // bumped before and after each create
	var wg sync.WaitGroup
	var failed atomic.Bool
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range 400 {
				k := r.IntN(len(ids))
				id := ids[k]
				n := r.IntN(3000)
				if r.IntN(20) == 0 {
					n = 40000
				}
				tk := &a2a.Task{ID: id, ContextID: []string{"x", "y"}[r.IntN(2)],
					Status:   a2a.TaskStatus{State: []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}[r.IntN(2)]},
					Metadata: map[string]any{"t": strings.Repeat("z", n)}}
				var rec engine.Record
				var err error
				op := r.IntN(8)
				inc := incs[k].Load()
				switch op {
				case 0:
					// A create bumps the incarnation counter before and
					// after: odd while one is in flight.
					incs[k].Add(1)
					rec, err = s.CreateOwned(ctx, tk, []string{"", "o1", "o2"}[r.IntN(3)])
					incs[k].Add(1)
				case 1:
					rec, err = s.Replace(ctx, tk, 0)
				case 2:
					cur, gerr := s.Get(ctx, id)
					if gerr != nil {
						continue
					}
					rec, err = s.Replace(ctx, tk, cur.Revision)
				case 3:
					rec, err = s.CancelIf(ctx, id, 0)
				case 4:
					rec, err = s.AppendHistoryIf(ctx, id, &a2a.Message{ID: fmt.Sprint(w, "-", i), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("m")}}, 0)
				case 5:
					_ = s.Delete(ctx, id) // missing or not: nothing to record
					continue
				case 6:
					_, err = s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: time.Now().UnixMicro() + 1e6, StuckBefore: time.Now().UnixMicro() - int64(r.IntN(2000)), Limit: 1 + r.IntN(3)})
					if err != nil {
						t.Errorf("retain: %v", err)
						failed.Store(true)
					}
					continue
				case 7:
					if o.QuietInvariants {
						continue
					}
					if err := s.CheckInvariants(); err != nil {
						t.Errorf("seed %d: invariants mid-run: %v", seed, err)
						failed.Store(true)
						return
					}
					continue
				}
				if err != nil || op == 0 || inc%2 == 1 || incs[k].Load() != inc {
					continue // a create in flight during the write: its incarnation is unknown
				}
				mu.Lock()
				kk := key{id, inc, rec.Revision}
				if prev, dup := got[kk]; dup {
					t.Errorf("seed %d: %q revision %d (incarnation %d) returned twice: %s and op %d", seed, id, rec.Revision, inc, prev, op)
					failed.Store(true)
				}
				got[kk] = fmt.Sprint("op ", op)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
}
