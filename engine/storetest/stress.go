package storetest

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/a2astore/a2astore/engine"
)

// StressOptions tunes the backend stress tests RunInterleavedModel,
// RunSameIDHammer and RunTrimLogClockBack, which take the same Harness as
// Run: its OpenLogged (the model and trim tests, with an injected clock)
// and Open (the hammer, on the wall clock). The zero value runs the
// defaults.
type StressOptions struct {
	// Reopen, when set, closes s and returns a store over the same data
	// reading clock: RunInterleavedModel then closes and reopens the store
	// now and then between its steps (a persistent backend's restart).
	Reopen func(tb testing.TB, s engine.Store, clock engine.Clock) engine.Store
	// ModelSteps is the number of random steps of RunInterleavedModel
	// (0: 1,200); ShortModelSteps replaces it under -short and under the
	// race detector (0: 300): make test runs -race, and the steps run on
	// one goroutine, where it finds nothing while costing 5-8x; the
	// concurrent phase keeps its ModelTraversals.
	ModelSteps, ShortModelSteps int
	// ModelTraversals is the number of traversals of the model test's
	// concurrent phase (0: 150); ShortModelTraversals replaces it under
	// -short (0: 50).
	ModelTraversals, ShortModelTraversals int
	// InlineID is the ID length up to which the store keeps an ID beside
	// its index entry rather than in its record (0: 40): the model test's
	// IDs are just under, at and past it.
	InlineID int
	// LargeBody is the body size past which the store keeps a task apart
	// (0: 32 KiB): a few of the model test's bodies straddle it.
	LargeBody int
	// QuietInvariants says the store's CheckInvariants holds only when no
	// write is in flight (Pebble deletes a write's zero counters after it
	// commits): RunSameIDHammer then checks them only once its writers
	// stop, not between their writes too.
	QuietInvariants bool
}

func (o StressOptions) modelSteps() int {
	if testing.Short() || raceEnabled {
		return cmp0(o.ShortModelSteps, 300)
	}
	return cmp0(o.ModelSteps, 1200)
}

func (o StressOptions) modelTraversals() int {
	if testing.Short() {
		return cmp0(o.ShortModelTraversals, 50)
	}
	return cmp0(o.ModelTraversals, 150)
}

// cmp0 returns v, or def when v is 0.
func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// stressSeed returns the seed of a stress test, -storetest.seed when set
// (else random), and logs it.
func stressSeed(t testing.TB) uint64 {
	t.Helper()
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("storetest seed %d (rerun with -storetest.seed=%d)", seed, seed)
	return seed
}

// wallClock is the wall clock as an engine.Clock, for a harness that takes
// one (nil otherwise: the store's own).
func wallClock(h Harness) engine.Clock {
	if !h.ClockInjection {
		return nil
	}
	return func() int64 { return time.Now().UnixMicro() }
}
