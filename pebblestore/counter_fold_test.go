package pebblestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// counterSteps reads the counter k and returns the points the read
// stepped over.
func counterSteps(t *testing.T, s *Store, k []byte) uint64 {
	t.Helper()
	it, err := s.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	before := it.Stats().InternalStats.PointCount
	if _, _, err := s.readCounter(it, k); err != nil {
		t.Fatal(err)
	}
	return it.Stats().InternalStats.PointCount - before
}

// createWorking creates tasks t0 … t(n-1), WORKING, in context c.
func createWorking(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Create(context.Background(), &a2a.Task{ID: a2a.TaskID(fmt.Sprint("t", i)), ContextID: "c",
			Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
}

// SPEC C5: a total's read does not grow with the writes before it. 500
// creates leave 500 deltas of the all-tasks counter in the memtable; the
// first total reads them all and queues a fold, after which a total reads
// the folded value and the deltas since (a few points), and is still
// exact. Without the fold the read stays at 500 points.
func TestTotalFoldsCounterDeltas(t *testing.T) {
	s := openTestOpts(t, t.TempDir(), Options{NoSync: true})
	s.stopZeroSweeper(true) // the test folds, so it knows when
	ctx := context.Background()
	createWorking(t, s, 500)
	all := counterKeyOf(counterTotal)
	if n := counterSteps(t, s, all); n < 500 {
		t.Fatalf("the counter's read stepped over %d points after 500 creates: the test sets up nothing", n)
	}
	total := func(want int) {
		t.Helper()
		resp, err := s.List(ctx, &engine.ListRequest{PageSize: 1, IncludeTotalSize: true})
		if err != nil || resp.TotalSize != want {
			t.Fatalf("total %d (%v), want %d", resp.TotalSize, err, want)
		}
	}
	total(500) // queues the fold
	if err := s.foldPending(nil); err != nil {
		t.Fatal(err)
	}
	if n := counterSteps(t, s, all); n > 2 {
		t.Errorf("after the fold the counter's read stepped over %d points, want at most 2", n)
	}
	total(500)
	for i := range 10 {
		if err := s.Delete(ctx, a2a.TaskID(fmt.Sprint("t", i))); err != nil {
			t.Fatal(err)
		}
	}
	total(490)
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Folds under writers lose no delta: writers create and delete tasks in
// a few contexts while another goroutine reads totals and folds what they
// queue; every counter then matches a recount (CheckInvariants). It fails
// when writers do not hold the global counters' stripes (a fold's set
// overwrites a delta merged between its read and its commit).
func TestCounterFoldsUnderWriters(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	s := openTestOpts(t, t.TempDir(), Options{NoSync: true})
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := range 600 {
				id := a2a.TaskID(fmt.Sprintf("w%d-%d", w, i))
				if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: fmt.Sprint("c", rng.IntN(3)),
					Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
					t.Error(err)
					return
				}
				if rng.IntN(3) == 0 {
					if err := s.Delete(ctx, id); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	folds := make(chan int)
	go func() {
		n := 0
		defer func() { folds <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, c := range []string{"", "c0", "c1"} {
				if _, err := s.List(ctx, &engine.ListRequest{ContextID: c, PageSize: 1, IncludeTotalSize: true}); err != nil {
					t.Error(err)
					return
				}
			}
			if err := s.foldPending(nil); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	wg.Wait()
	close(stop)
	t.Logf("%d rounds of totals and folds beside the writers", <-folds)
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A fold never waits for a writer in flight: were it to wait for the
// shared side of a global counter's stripe (a Sync commit's fsync), every
// later writer would queue behind it. It queues the key again instead,
// and folds it once the stripe is free.
func TestFoldDoesNotWaitForWriters(t *testing.T) {
	s := openTestOpts(t, t.TempDir(), Options{NoSync: true})
	s.stopZeroSweeper(true)
	createWorking(t, s, 100)
	all := counterKeyOf(counterTotal)
	stripe := &s.counterLocks[s.counterStripe(all)]
	stripe.RLock() // a writer in flight
	s.queueFold(all)
	done := make(chan error, 1)
	go func() { done <- s.foldPending(nil) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		stripe.RUnlock()
		t.Fatal("the fold waited 10 s for a writer in flight")
	}
	stripe.RUnlock()
	if n := counterSteps(t, s, all); n < 100 {
		t.Fatalf("folded under a writer's stripe: the read steps over %d points", n)
	}
	if err := s.foldPending(nil); err != nil { // queued again: folded now
		t.Fatal(err)
	}
	if n := counterSteps(t, s, all); n > 2 {
		t.Errorf("the key queued again was not folded: %d points", n)
	}
}

// A held stripe sends back only its own keys: a fold that finds the
// all-tasks counter's stripe held (every writer holds it) still folds an
// owner's counter whose stripe nobody holds. It failed when a fold tried
// all its stripes at once and queued every key again on one held.
func TestFoldTakesFreeStripes(t *testing.T) {
	s := openTestOpts(t, t.TempDir(), Options{NoSync: true})
	s.stopZeroSweeper(true)
	ctx := context.Background()
	for i := range 200 {
		if _, err := s.CreateOwned(ctx, &a2a.Task{ID: a2a.TaskID(fmt.Sprint("t", i)), ContextID: "c",
			Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, "o1"); err != nil {
			t.Fatal(err)
		}
	}
	all := counterKeyOf(counterTotal)
	owner := counterKey(&engine.Query{Owner: "o1"}) // not a global counter: never the all-tasks counter's stripe
	s.queueFold(all)
	s.queueFold(owner)
	stripe := &s.counterLocks[s.counterStripe(all)]
	stripe.RLock() // a writer in flight
	err := s.foldPending(nil)
	stripe.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if n := counterSteps(t, s, owner); n > 2 {
		t.Errorf("the owner's counter, whose stripe nobody held, was not folded: its read steps over %d points", n)
	}
	if n := counterSteps(t, s, all); n < 200 {
		t.Errorf("the all-tasks counter was folded under a writer's stripe: %d points", n)
	}
}

// SPEC C5 under Sync writers back to back, where some writer nearly always
// holds the all-tasks counter's stripe: a key whose stripe folds found
// held foldWaitAfter times is folded by the next fold, which waits for
// the stripe (the writers then wait behind it for one commit). Before,
// every fold only tried, and the key was never folded while writers ran.
func TestFoldWaitsForAStripeHeldAgain(t *testing.T) {
	s := openTestOpts(t, t.TempDir(), Options{NoSync: true})
	s.stopZeroSweeper(true)
	createWorking(t, s, 100)
	all := counterKeyOf(counterTotal)
	stripe := &s.counterLocks[s.counterStripe(all)]
	stripe.RLock() // writers in flight, one after another
	s.queueFold(all)
	for range foldWaitAfter {
		if err := s.foldPending(nil); err != nil {
			stripe.RUnlock()
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.foldPending(nil) }()
	for waiting := false; !waiting; { // until the fold waits for the stripe
		select {
		case err := <-done:
			stripe.RUnlock()
			t.Fatalf("the fold returned (%v) without waiting for a stripe held %d times before", err, foldWaitAfter)
		default:
		}
		if waiting = !stripe.TryRLock(); !waiting {
			stripe.RUnlock()
			runtime.Gosched()
		}
	}
	stripe.RUnlock() // the writer in flight commits
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := counterSteps(t, s, all); n > 2 {
		t.Errorf("after the fold that waited, the counter's read steps over %d points", n)
	}
}
