package pebblestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/pebblestore/internal/desckey"
)

// keyCount compacts the whole database and counts its keys.
func keyCount(t *testing.T, s *Store) int {
	t.Helper()
	if err := s.sweepPending(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), []byte{0}, []byte{0xFF}, true); err != nil {
		t.Fatal(err)
	}
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// lifecycle creates n tasks (each in its own context, every third with an
// owner, every fifth sharing a context), moves them submitted → working →
// completed, then removes them: even ones with Delete, odd ones by
// retention.
func lifecycle(t *testing.T, s *Store, clock *int64, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		tk := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%d", i)), ContextID: fmt.Sprintf("ctx-%d", i), Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
		if i%5 == 0 {
			tk.ContextID = "shared"
		}
		owner := ""
		if i%3 == 0 {
			owner = fmt.Sprintf("owner-%d", i)
		}
		if _, err := s.CreateOwned(ctx, tk, owner); err != nil {
			t.Fatal(err)
		}
		for _, st := range []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted} {
			tk.Status.State = st
			*clock++
			if _, err := s.Replace(ctx, tk, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < n; i += 2 {
		if err := s.Delete(ctx, a2a.TaskID(fmt.Sprintf("t%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	req := engine.RetainRequest{TerminalBefore: *clock + 1, Limit: 100}
	for {
		res, err := s.RemoveExpired(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Next == nil {
			break
		}
		req.After = res.Next
	}
}

// reopenChecked closes s, opens the database in fs again and checks its
// invariants.
func reopenChecked(t *testing.T, s *Store, fs vfs.FS) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		s.Close()
		t.Fatalf("after reopening: %v", err)
	}
	return s
}

// TestEmptiedStoreKeysConstant: however many tasks a store once held, once
// they are all gone and compacted the same number of keys remains (the
// format keys and the global counters): no zero-valued counter key stays
// behind for a context, an owner or their states.
func TestEmptiedStoreKeysConstant(t *testing.T) {
	var counts []int
	for _, n := range []int{10, 100, 1000} {
		var clock int64 = 1_000_000
		s, err := Open("db", Options{FS: vfs.NewMem(), Logger: pebblelog.Quiet{}, NoSync: true, Clock: func() int64 { return clock }})
		if err != nil {
			t.Fatal(err)
		}
		lifecycle(t, s, &clock, n)
		if err := s.CheckInvariants(); err != nil {
			t.Errorf("n=%d: %v", n, err)
		}
		counts = append(counts, keyCount(t, s))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(counts); i++ {
		if counts[i] != counts[0] {
			t.Fatalf("keys left in an emptied, compacted store after 10, 100, 1000 tasks: %v, want the same", counts)
		}
	}
	t.Logf("keys left: %d", counts[0])
}

// TestZeroCountersOfOlderReleaseSwept: a database an older release wrote
// (zero-valued counter keys, no zerofree key) loses them at the next Open,
// and CheckInvariants flags them before.
func TestZeroCountersOfOlderReleaseSwept(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	// What an older release left: merges that sum to zero, no sweep.
	for i := range 600 { // more than one sweep batch
		k := counterKeyOf(counterContext, fmt.Appendf(nil, "gone-%d", i))
		_ = s.db.Merge(k, counterDelta(1), nil)
		_ = s.db.Merge(k, counterDelta(-1), nil)
	}
	if err := s.db.Delete(zeroFreeKey, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err == nil {
		t.Fatal("CheckInvariants accepts zero-valued counter keys")
	}
	s = reopenChecked(t, s, fs)
	defer s.Close()
	if n := keyCount(t, s); n != 2 { // the format and zerofree keys
		t.Errorf("%d keys after the sweep, want the 2 meta keys", n)
	}
}

// TestMarkerRedoneAtOpen: a crash between a write and its zero deletes
// leaves its marker; Open deletes the zero counters it lists (and not the
// others) and the marker.
func TestMarkerRedoneAtOpen(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Create(ctx, &a2a.Task{ID: "live", ContextID: "kept", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	zero := counterKeyOf(counterContext, []byte("gone"))
	kept := counterKeyOf(counterContext, desckeyOf("kept"))
	b := s.db.NewBatch()
	_ = b.Merge(zero, counterDelta(0), nil)
	_ = b.Set([]byte{tagMarker, 9}, encodeMarker([][]byte{zero, kept}), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s = reopenChecked(t, s, fs)
	defer s.Close()
	if _, found, _ := s.counterValue(kept); !found {
		t.Error("the marker's nonzero counter was deleted")
	}
}

// TestConcurrentZeroDeletes: writers that share contexts and owners
// create, move and delete tasks concurrently (deleting counters at zero
// while others merge into them); every counter ends exact and no zero key
// stays (run with -race).
func TestConcurrentZeroDeletes(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	s, err := Open("db", Options{FS: vfs.NewMem(), Logger: pebblelog.Quiet{}, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range 150 {
				tk := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("w%d-%d", w, i)), ContextID: fmt.Sprintf("c%d", r.IntN(3)),
					Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
				if _, err := s.CreateOwned(ctx, tk, fmt.Sprintf("o%d", r.IntN(2))); err != nil {
					t.Error(err)
					return
				}
				tk.Status.State, tk.ContextID = a2a.TaskStateWorking, fmt.Sprintf("c%d", r.IntN(3))
				if _, err := s.Replace(ctx, tk, 0); err != nil {
					t.Error(err)
					return
				}
				if r.IntN(4) != 0 {
					if err := s.Delete(ctx, tk.ID); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func desckeyOf(s string) []byte { return desckey.AppendAscending(nil, []byte(s)) }
