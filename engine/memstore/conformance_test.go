package memstore_test

import (
	"testing"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
)

func TestConformance(t *testing.T) { conformance(t, memstore.New) }

// TestConformanceCollidingIDs: the contract holds when task IDs' hashes
// collide (the ID map keeps such IDs beside its hash map): every ID
// hashes to one of three values.
func TestConformanceCollidingIDs(t *testing.T) {
	conformance(t, func(opts memstore.Options) *memstore.Store { return memstore.NewColliding(opts, 3) })
}

// TestConformanceIDsInRecords: the contract holds with every ID in its
// record (the conformance suite's IDs are all short enough for the
// entries).
func TestConformanceIDsInRecords(t *testing.T) { conformance(t, memstore.NewIDsInRecords) }

func conformance(t *testing.T, newStore func(memstore.Options) *memstore.Store) {
	storetest.Run(t, harness(newStore))
}

// harness describes the stores newStore makes to storetest: Run and the
// stress tests (stress_test.go) take it.
func harness(newStore func(memstore.Options) *memstore.Store) storetest.Harness {
	open := func(log bool) func(tb testing.TB, clock engine.Clock) engine.Store {
		return func(tb testing.TB, clock engine.Clock) engine.Store {
			s := newStore(memstore.Options{Clock: clock, Log: log})
			tb.Cleanup(func() { s.Close() })
			return s
		}
	}
	return storetest.Harness{
		Open:           open(false),
		OpenLogged:     open(true),
		ClockInjection: true,
		BinaryIDs:      true,
		ListStats:      true,
	}
}
