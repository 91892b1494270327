package memstore

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

// TestSameIDHammer (review rev14-C): goroutines race creates, conditional
// and unconditional replaces, cancels, appends, deletes and retention
// sweeps (terminal and stuck) on three IDs whose bodies straddle chunk
// sizes. Afterwards CheckInvariants holds and no two successful writes
// returned the same (ID, incarnation, revision).
func TestSameIDHammer(t *testing.T) {
	runSameIDHammer(t, New(Options{Log: true}))
}

type hammerStore interface {
	engine.OwnerStore
	engine.ConditionalStore
	engine.Retainer
	engine.Checker
}

func runSameIDHammer(t *testing.T, s hammerStore) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
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
					err = s.Delete(ctx, id)
					continue
				case 6:
					_, err = s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: time.Now().UnixMicro() + 1e6, StuckBefore: time.Now().UnixMicro() - int64(r.IntN(2000)), Limit: 1 + r.IntN(3)})
					if err != nil {
						t.Errorf("retain: %v", err)
						failed.Store(true)
					}
					continue
				case 7:
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
