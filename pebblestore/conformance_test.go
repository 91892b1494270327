package pebblestore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/storetest"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

var _ engine.Checker = (*Store)(nil)

// openTest opens a store in dir on fs (nil: disk) with clock, closed at
// tb's cleanup.
func openTest(tb testing.TB, fs vfs.FS, dir string, clock engine.Clock) *Store {
	return openTestOpts(tb, dir, Options{Clock: clock, FS: fs})
}

// openTestOpts opens a store in dir with opts (quiet), closed at tb's
// cleanup.
func openTestOpts(tb testing.TB, dir string, opts Options) *Store {
	opts.Logger = pebblelog.Quiet{}
	s, err := Open(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return s
}

func conformance(t *testing.T, open func(tb testing.TB) (vfs.FS, string)) {
	storetest.Run(t, harness(open))
}

// harness describes to storetest the stores opened where open says: Run
// and the stress tests (stress_test.go) take it.
func harness(open func(tb testing.TB) (vfs.FS, string)) storetest.Harness {
	return storetest.Harness{
		Open: func(tb testing.TB, clock engine.Clock) engine.Store {
			fs, dir := open(tb)
			return openTest(tb, fs, dir, clock)
		},
		OpenLogged: func(tb testing.TB, clock engine.Clock) engine.Store {
			fs, dir := open(tb)
			return openTestOpts(tb, dir, Options{Clock: clock, FS: fs, Log: true})
		},
		ClockInjection: true,
		BinaryIDs:      true,
		ListStats:      true,
	}
}

// inMem opens stores in a fresh in-memory file system.
func inMem(testing.TB) (vfs.FS, string) { return vfs.NewMem(), "db" }

func TestConformanceMem(t *testing.T) {
	conformance(t, inMem)
}

func TestConformanceDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("on-disk conformance skipped in -short mode")
	}
	conformance(t, func(tb testing.TB) (vfs.FS, string) { return nil, tb.TempDir() })
}
