package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// BenchmarkRetain measures retention (R1) on every backend, named
//
//	BenchmarkRetain/backend=B/op=remove/n=N/batch=K  one batch of K removals (tasks/s)
//	BenchmarkRetain/backend=B/op=find/n=N/batch=K    one batch that examines K tasks and removes none
//
// remove: a store of n finished (completed) tasks; each iteration removes
// the K oldest with one RemoveExpired (every terminal task is due), and
// the timer stops while K new tasks are created, so the store keeps n
// tasks. find: a store of n working tasks, none due: each iteration seeks
// the tail of the ordering index and examines K entries, the cost of
// finding the next batch, which stays flat as n grows (examined/op is K).
// Sizes: sizes() (BENCH_SIZES).
func BenchmarkRetain(b *testing.B) {
	const batch = 500
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			e := be.setup(b)
			for _, n := range sizes() {
				k := min(batch, n/2)
				b.Run(fmt.Sprintf("op=remove/n=%d/batch=%d", n, k), func(b *testing.B) {
					benchRetainRemove(b, e, n, k)
				})
			}
			for _, n := range sizes() {
				k := min(batch, n/2)
				b.Run(fmt.Sprintf("op=find/n=%d/batch=%d", n, k), func(b *testing.B) {
					benchRetainFind(b, e, n, k)
				})
			}
		})
	}
}

// retainStores numbers the stores retainStore opens: the testing package
// calls a benchmark function more than once (b.N = 1, then more), and a
// store reopened by name would still hold the previous run's tasks.
var retainStores atomic.Int64

// retainStore opens a store of its own (not a shared fixture: the
// benchmark removes tasks) holding n light tasks in state.
func retainStore(b *testing.B, e *env, name string, n int, state a2a.TaskState) (engine.Retainer, *retainFill) {
	b.Helper()
	clock := &taskgen.StepClock{Start: 1_700_000_000_000_000, Every: 1}
	name = fmt.Sprintf("%s_%d", name, retainStores.Add(1))
	s, err := e.open(b, name, clock.Now)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if c, ok := s.(io.Closer); ok {
			c.Close()
		}
	})
	r, ok := engine.AsRetainer(s)
	if !ok {
		b.Skipf("%T is no engine.Retainer", s)
	}
	f := &retainFill{s: s, state: state, parallel: e.parallel}
	f.create(b, n)
	if e.pool != nil { // statistics for the planner, as after autovacuum
		if _, err := e.pool.Exec(context.Background(), "VACUUM ANALYZE "+pgTableNamed(name)); err != nil {
			b.Fatal(err)
		}
	}
	return r, f
}

// retainFill creates the light tasks of a retention store.
type retainFill struct {
	s        engine.Store
	state    a2a.TaskState
	parallel bool
	next     int
}

// create adds k tasks (from 4 goroutines where one round trip per Create
// is the cost: pg).
func (f *retainFill) create(b *testing.B, k int) {
	b.Helper()
	ctx := context.Background()
	workers := 1
	if f.parallel {
		workers = 4
	}
	first := f.next
	f.next += k
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := first + w; i < first+k; i += workers {
				t := lightTask(i)
				t.Status.State = f.state
				if _, err := f.s.Create(ctx, t); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

func benchRetainRemove(b *testing.B, e *env, n, batch int) {
	r, f := retainStore(b, e, fmt.Sprintf("retain_done_n%d", n), n, a2a.TaskStateCompleted)
	ctx := context.Background()
	req := engine.RetainRequest{TerminalBefore: math.MaxInt64, Limit: batch}
	removed := 0
	var spent time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		res, err := r.RemoveExpired(ctx, req)
		spent += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if res.Removed != batch {
			b.Fatalf("removed %d, want %d", res.Removed, batch)
		}
		removed += res.Removed
		b.StopTimer()
		f.create(b, res.Removed)
		b.StartTimer()
	}
	b.ReportMetric(float64(removed)/spent.Seconds(), "tasks/s")
}

func benchRetainFind(b *testing.B, e *env, n, batch int) {
	r, _ := retainStore(b, e, fmt.Sprintf("retain_working_n%d", n), n, a2a.TaskStateWorking)
	ctx := context.Background()
	req := engine.RetainRequest{TerminalBefore: math.MaxInt64, Limit: batch}
	examined := 0
	b.ReportAllocs()
	for b.Loop() {
		res, err := r.RemoveExpired(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if res.Removed != 0 || res.Next == nil {
			b.Fatalf("find removed %d, Next %v: want none removed and more to come", res.Removed, res.Next)
		}
		examined += res.Examined
	}
	b.ReportMetric(float64(examined)/float64(b.N), "examined/op")
}
