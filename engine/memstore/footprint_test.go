package memstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// BenchmarkFootprint reports the live heap a store holds per task after
// loading n tasks and collecting garbage, for light tasks (a 36-byte ID,
// one of 16 contexts, a state and a status timestamp) and realistic ones
// (internal/taskgen's default shape), without owners, with 1,000 owners
// drawn from a Zipf distribution, and with an owner per task (the owner
// indexes' worst case). It builds one store per iteration: run it with
// -benchtime 1x.
func BenchmarkFootprint(b *testing.B) {
	const n = 100_000
	shapes := []struct {
		name string
		task func(gen *taskgen.Gen, i int) *a2a.Task
	}{
		{"light", func(_ *taskgen.Gen, i int) *a2a.Task {
			ts := time.Unix(1_700_000_000+int64(i), 0).UTC()
			return &a2a.Task{
				ID:        a2a.TaskID(fmt.Sprintf("%08d-0000-4000-8000-%012d", i, i)),
				ContextID: fmt.Sprintf("ctx-%02d", i%16),
				Status:    a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts},
			}
		}},
		{"realistic", (*taskgen.Gen).Task},
	}
	owners := []struct {
		name  string
		owner func(rng *rand.Rand, z *rand.Zipf, i int) string
	}{
		{"none", func(*rand.Rand, *rand.Zipf, int) string { return "" }},
		{"1000", func(_ *rand.Rand, z *rand.Zipf, _ int) string { return fmt.Sprintf("user-%04d", z.Uint64()) }},
		{"per-task", func(_ *rand.Rand, _ *rand.Zipf, i int) string { return fmt.Sprintf("user-%07d", i) }},
	}
	for _, sh := range shapes {
		for _, ow := range owners {
			b.Run(fmt.Sprintf("n=%d/tasks=%s/owners=%s", n, sh.name, ow.name), func(b *testing.B) {
				for b.Loop() {
					gen := taskgen.New(taskgen.Shape{})
					rng := rand.New(rand.NewPCG(1, 2))
					z := rand.NewZipf(rng, 1.1, 1, 999)
					b.ReportMetric(heapPerTask(b, n, func(s *memstore.Store, i int) error {
						_, err := s.CreateOwned(context.Background(), sh.task(gen, i), ow.owner(rng, z, i))
						return err
					}), "heap-bytes/task")
				}
			})
		}
	}
}

// heapPerTask loads n tasks with add into a new store and returns the heap
// growth per task once the garbage is collected.
func heapPerTask(b *testing.B, n int, add func(s *memstore.Store, i int) error) float64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := memstore.New(memstore.Options{})
	for i := range n {
		if err := add(s, i); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}
