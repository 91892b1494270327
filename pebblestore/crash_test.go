package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/storetest"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// idLog is the history of one task ID in the crash test: ops[j-1] is the
// j-th operation started on it (true: it left the task deleted), acked the
// number acknowledged. State "after op 0" is absent.
type idLog struct {
	ops   []bool
	acked int
}

type crashPoint struct {
	fs      *vfs.MemFS
	lo, hi  map[string]int // per ID: acked before the clone, started after it
	cloneNo int
}

// TestCrash runs synced mutations from several goroutines on a crashable
// in-memory FS, takes crash clones at random points, and checks each clone:
// every mutation acknowledged before the clone survives, nothing that was
// never written appears, and the invariants hold.
func TestCrash(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	fs := vfs.NewCrashableMem()
	var tick atomic.Int64
	clock := func() int64 { return tick.Add(1) }
	s, err := Open("db", Options{Clock: clock, FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	const writers, idsPerWriter, opsPerWriter, clones = 4, 5, 150, 12
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	logs := map[string]*idLog{}
	totalAcked := 0
	var wg sync.WaitGroup
	for w := range writers {
		wrng := rand.New(rand.NewPCG(seed, uint64(10+w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for range opsPerWriter {
				id := fmt.Sprintf("w%d-%d", w, wrng.IntN(idsPerWriter))
				mu.Lock()
				l := logs[id]
				if l == nil {
					l = &idLog{}
					logs[id] = l
				}
				exists := len(l.ops) > 0 && !l.ops[len(l.ops)-1]
				v := len(l.ops) + 1
				del := exists && wrng.IntN(4) == 0
				l.ops = append(l.ops, del)
				mu.Unlock()
				tk := task(id, fmt.Sprintf("c%d", v%3), states[v%len(states)])
				tk.Metadata = map[string]any{"v": float64(v)}
				var err error
				switch {
				case del:
					err = s.Delete(ctx, a2a.TaskID(id))
				case exists:
					_, err = s.Replace(ctx, tk, 0)
				default:
					_, err = s.Create(ctx, tk)
				}
				if err != nil {
					t.Errorf("%s op %d: %v", id, v, err)
					return
				}
				mu.Lock()
				l.acked = v
				totalAcked++
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	var points []crashPoint
	for c := range clones {
		target := (c + 1) * writers * opsPerWriter / (clones + 1)
		mu.Lock()
		for totalAcked < target {
			cond.Wait()
		}
		lo := map[string]int{}
		for id, l := range logs {
			lo[id] = l.acked
		}
		mu.Unlock()
		clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(seed, uint64(100+c)))})
		mu.Lock()
		hi := map[string]int{}
		for id, l := range logs {
			hi[id] = len(l.ops)
		}
		mu.Unlock()
		points = append(points, crashPoint{fs: clone, lo: lo, hi: hi, cloneNo: c})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range points {
		checkCrashPoint(t, p, logs, clock)
	}
}

func checkCrashPoint(t *testing.T, p crashPoint, logs map[string]*idLog, clock engine.Clock) {
	t.Helper()
	s, err := Open("db", Options{Clock: clock, FS: p.fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatalf("clone %d: reopen: %v", p.cloneNo, err)
	}
	defer s.Close()
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("clone %d: invariants: %v", p.cloneNo, err)
	}
	ctx := context.Background()
	curs, _ := traverse(t, s, engine.ListRequest{PageSize: 100})
	for _, c := range curs {
		if _, ok := p.hi[string(c.ID)]; !ok {
			t.Errorf("clone %d: task %q was never written before the clone", p.cloneNo, c.ID)
		}
	}
	for id, l := range logs {
		lo, hi := p.lo[id], p.hi[id]
		r, err := s.Get(ctx, a2a.TaskID(id))
		switch {
		case errors.Is(err, engine.ErrNotFound):
			ok := false
			for j := lo; j <= hi && !ok; j++ {
				ok = j == 0 || l.ops[j-1]
			}
			if !ok {
				t.Errorf("clone %d: %q absent, but ops %d..%d never left it deleted", p.cloneNo, id, lo, hi)
			}
		case err != nil:
			t.Fatalf("clone %d: get %q: %v", p.cloneNo, id, err)
		default:
			v, _ := r.Task.Metadata["v"].(float64)
			j := int(v)
			if j < lo || j > hi || j == 0 || l.ops[j-1] {
				t.Errorf("clone %d: %q at version %d, want a write in %d..%d", p.cloneNo, id, j, lo, hi)
			}
		}
	}
}

// TestFaultInjection fails the k-th filesystem operation of a workload for
// k = 0, 1, 2, … until the workload runs without reaching the fault. Every
// call must return (success or error, no panic, no hang), and the files
// left behind must reopen on a clean FS with the invariants holding.
func TestFaultInjection(t *testing.T) {
	for k := 0; ; k++ {
		if k > 5000 {
			t.Fatal("workload does not complete")
		}
		mem := vfs.NewCrashableMem()
		inj := &errorfs.Counter{Injector: errorfs.OnIndex(int32(k))}
		faultWorkload(t, errorfs.Wrap(mem, inj))
		clean := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		s, err := Open("db", Options{FS: clean, Clock: storetest.NewManualClock(1 << 40).Now, Logger: pebblelog.Quiet{}})
		if err != nil {
			// Open itself may have failed before creating a database.
			if inj.Load() > 0 {
				if _, statErr := clean.Stat("db/CURRENT"); statErr != nil {
					continue
				}
			}
			t.Fatalf("k=%d: reopen on a clean FS: %v", k, err)
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatalf("k=%d: invariants after reopen: %v", k, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("k=%d: close: %v", k, err)
		}
		if inj.Load() == 0 {
			t.Logf("workload completed without a fault at k=%d", k)
			return
		}
	}
}

// faultWorkload runs a fixed sequence of calls; errors are expected once
// the fault fires, panics and hangs are not.
func faultWorkload(t *testing.T, fs vfs.FS) {
	clock := storetest.NewManualClock(1)
	s, err := Open("db", Options{FS: fs, Clock: clock.Now, Logger: pebblelog.Quiet{}})
	if err != nil {
		return
	}
	ctx := context.Background()
	for i := range 8 {
		clock.Advance(1)
		_, _ = s.Create(ctx, task(fmt.Sprintf("t%d", i), fmt.Sprintf("c%d", i%2), a2a.TaskStateWorking))
	}
	for i := range 8 {
		clock.Advance(1)
		switch i % 4 {
		case 0:
			_, _ = s.Replace(ctx, task(fmt.Sprintf("t%d", i), "c9", a2a.TaskStateSubmitted), 0)
		case 1:
			_, _ = s.Cancel(ctx, a2a.TaskID(fmt.Sprintf("t%d", i)))
		case 2:
			_, _ = s.AppendHistory(ctx, a2a.TaskID(fmt.Sprintf("t%d", i)), &a2a.Message{ID: "m", Role: a2a.MessageRoleUser})
		case 3:
			_ = s.Delete(ctx, a2a.TaskID(fmt.Sprintf("t%d", i)))
		}
		_, _ = s.Get(ctx, a2a.TaskID(fmt.Sprintf("t%d", i)))
		_, _ = s.List(ctx, &engine.ListRequest{PageSize: 3, IncludeTotalSize: true})
	}
	_ = s.Close()
}
