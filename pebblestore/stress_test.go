package pebblestore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/storetest"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// TestInterleavedModel runs storetest's interleaved model test (S4, L5,
// L7, L8, K7, R1) on an in-memory file system, closing the store and
// opening the database again now and then (fewer steps and more
// traversals than memstore's: a Pebble step costs more).
func TestInterleavedModel(t *testing.T) {
	fs := vfs.NewMem()
	var live *Store // closed at cleanup; Reopen closes the others
	open := func(tb testing.TB, clock engine.Clock) engine.Store {
		s, err := Open("db", Options{FS: fs, Log: true, Logger: pebblelog.Quiet{}, Clock: clock})
		if err != nil {
			tb.Fatal(err)
		}
		live = s
		return s
	}
	t.Cleanup(func() {
		if live != nil {
			live.Close()
		}
	})
	h := harness(inMem)
	h.OpenLogged = open
	storetest.RunInterleavedModel(t, h, storetest.StressOptions{
		ModelSteps:      700,
		ModelTraversals: 250,
		Reopen: func(tb testing.TB, s engine.Store, clock engine.Clock) engine.Store {
			if err := s.(*Store).Close(); err != nil {
				tb.Fatalf("close: %v", err)
			}
			return open(tb, clock)
		},
	})
}

// TestSameIDHammer runs storetest's same-ID write hammer (S7, S9, R1) with
// the log off and on. Pebble's CheckInvariants is for a quiet store (a
// write's zero counters are deleted after it commits), so it runs once
// the writers stop.
func TestSameIDHammer(t *testing.T) {
	storetest.RunSameIDHammer(t, harness(inMem), storetest.StressOptions{QuietInvariants: true})
}

// TestTrimLogClockBack runs storetest's clock-back trim test (K7, S4): a
// task written behind where TrimLog goes on still has its log trimmed.
func TestTrimLogClockBack(t *testing.T) { storetest.RunTrimLogClockBack(t, harness(inMem)) }
