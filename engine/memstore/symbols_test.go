package memstore

import (
	"flag"
	"maps"
	"math/rand/v2"
	"testing"
	"time"
)

var pairSeed = flag.Uint64("memstore.pairseed", 0, "seed of TestPairCounts (0 = from the clock)")

// TestPairCounts: random adds and removals of (owner, context) tasks, so
// that homes fill, empty and take over pairs the map held, keep the same
// counts as a plain map. The seed is printed; -memstore.pairseed replays it.
func TestPairCounts(t *testing.T) {
	seed := *pairSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-memstore.pairseed=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	p := newPairCounts()
	want := map[uint64]int{}
	for i := range 20000 {
		owner, ctx := sym(1+rng.IntN(5)), sym(1+rng.IntN(4))
		k := ownerCtxKey(owner, ctx)
		if want[k] > 0 && rng.IntN(2) == 0 {
			p.add(owner, ctx, -1)
			if want[k]--; want[k] == 0 {
				delete(want, k)
			}
		} else {
			p.add(owner, ctx, 1)
			want[k]++
		}
		if got := p.get(owner, ctx); got != want[k] {
			t.Fatalf("step %d: get(%d, %d) = %d, want %d (seed %d)", i, owner, ctx, got, want[k], seed)
		}
		if got := p.all(); !maps.Equal(got, want) {
			t.Fatalf("step %d: counts %v, want %v (seed %d)", i, got, want, seed)
		}
	}
}
