package pebblestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/internal/pebblelog"
)

// markerCount counts the zero-counter markers in the database.
func markerCount(t *testing.T, s *Store) int {
	t.Helper()
	m, err := s.collect([]byte{tagMarker}, func(k, v []byte) ([]byte, error) { return k, nil })
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestZeroSweeperOffWritePath: a write that zeroes counters returns
// without deleting them (the sweeper is held); a crash then leaves its
// marker, which Open redoes; the store itself sweeps once the sweeper runs.
func TestZeroSweeperOffWritePath(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	zero := counterKeyOf(counterContext, desckeyOf("c1"))
	s.zeros.sweeping.Lock() // the sweeper is halfway: it cannot take a batch
	held := true
	defer func() { // before Close, which waits for the sweeper
		if held {
			s.zeros.sweeping.Unlock()
		}
	}()
	if _, err := s.Create(ctx, &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if n, found, err := s.counterValue(zero); err != nil || !found || n != 0 {
		t.Fatalf("before the sweep: context counter %d, found %v, %v; want a zero key", n, found, err)
	}
	if n := markerCount(t, s); n != 1 {
		t.Fatalf("%d markers before the sweep, want 1", n)
	}

	// Killed halfway: the synced marker survives and Open redoes it.
	crashed, err := Open("db", Options{FS: fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0, RNG: rand.New(rand.NewPCG(1, 1))}), Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if m := markerCount(t, crashed); m != 0 {
		t.Errorf("%d markers after Open, want 0", m)
	}
	if _, found, _ := crashed.counterValue(zero); found {
		t.Error("Open left the zero counter of a pending marker")
	}
	if err := crashed.CheckInvariants(); err != nil {
		t.Error(err)
	}
	crashed.Close()

	s.zeros.sweeping.Unlock()
	held = false
	if err := s.sweepPending(nil); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.counterValue(zero); found || markerCount(t, s) != 0 {
		t.Errorf("after the sweep: zero counter found %v, %d markers; want neither", found, markerCount(t, s))
	}
}

// TestZeroSweeperWakes: the sweeper goroutine, woken by the write, deletes
// the zero counters and the marker on its own (no CheckInvariants, no
// Close, no sweepPending from the test).
func TestZeroSweeperWakes(t *testing.T) {
	s, err := Open("db", Options{FS: vfs.NewMem(), Logger: pebblelog.Quiet{}, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	swept := make(chan struct{}, 1)
	s.zeros.onSwept = func() {
		select {
		case swept <- struct{}{}:
		default:
		}
	}
	ctx := context.Background()
	if _, err := s.Create(ctx, &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	<-swept // Delete's marker is the only one: the sweep that ran took it
	if _, found, _ := s.counterValue(counterKeyOf(counterContext, desckeyOf("c1"))); found {
		t.Error("the sweeper left the zero context counter")
	}
	if n := markerCount(t, s); n != 0 {
		t.Errorf("%d markers after the sweep, want 0", n)
	}
}

// TestZeroSweeperBackpressure: with the sweeper stopped, writers sweep
// themselves once maxPending markers wait, so the queue stays bounded;
// the rest is swept by Close (or Open) and the invariants hold.
func TestZeroSweeperBackpressure(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s.stopZeroSweeper(true)
	ctx := context.Background()
	most := 0
	for i := range maxPending + 2*sweepBatch {
		id := a2a.TaskID(fmt.Sprintf("t%d", i))
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: string(id), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		s.zeros.mu.Lock()
		most = max(most, len(s.zeros.pending))
		s.zeros.mu.Unlock()
	}
	if most >= maxPending {
		t.Errorf("%d markers queued at most, want fewer than %d", most, maxPending)
	}
	reopenChecked(t, s, fs).Close()
}
