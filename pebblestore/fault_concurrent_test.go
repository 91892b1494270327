package pebblestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/storetest"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// TestFaultInjectionConcurrent is TestFaultInjection with four concurrent
// writers: a fault must not leave any of them (or Close) blocked.
func TestFaultInjectionConcurrent(t *testing.T) {
	errs := 0
	for k := 0; ; k++ {
		if k > 5000 {
			t.Fatal("workload does not complete")
		}
		mem := vfs.NewCrashableMem()
		inj := &errorfs.Counter{Injector: errorfs.OnIndex(int32(k))}
		s, err := Open("db", Options{FS: errorfs.Wrap(mem, inj), Clock: storetest.NewManualClock(1).Now, Logger: pebblelog.Quiet{}})
		if err == nil {
			var wg sync.WaitGroup
			var mu sync.Mutex
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					for i := range 6 {
						id := a2a.TaskID(fmt.Sprintf("w%d-%d", w, i%3))
						var err error
						switch i / 3 {
						case 0:
							_, err = s.Create(ctx, task(string(id), "c", a2a.TaskStateWorking))
						default:
							_, err = s.Replace(ctx, task(string(id), "d", a2a.TaskStateSubmitted), 0)
						}
						if err == nil {
							_, err = s.List(ctx, &engine.ListRequest{PageSize: 2, IncludeTotalSize: true})
						}
						if err != nil {
							mu.Lock()
							errs++
							mu.Unlock()
						}
					}
				}()
			}
			wg.Wait()
			_ = s.Close()
		}
		clean := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		if _, statErr := clean.Stat("db/CURRENT"); statErr != nil && inj.Load() > 0 {
			continue
		}
		r, err := Open("db", Options{FS: clean, Clock: storetest.NewManualClock(1 << 40).Now, Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatalf("k=%d: reopen on a clean FS: %v", k, err)
		}
		if err := r.CheckInvariants(); err != nil {
			t.Fatalf("k=%d: invariants after reopen: %v", k, err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if inj.Load() == 0 {
			t.Logf("workload completed without a fault at k=%d; %d calls failed before", k, errs)
			if errs == 0 {
				t.Error("no injected fault ever reached a store call")
			}
			return
		}
	}
}

// TestFaultReleasesCounterLocks fails the k-th filesystem operation of a
// sequential workload for k = 0, 1, 2, … and checks after every call that
// no counter stripe lock is still held: a write whose commit fails, or
// panics with Pebble's fatal error, must release the shared side it took,
// or the sweeper's exclusive side (and behind it every later write of the
// stripe) waits forever. The sweeper is stopped so that it holds none.
func TestFaultReleasesCounterLocks(t *testing.T) {
	fatal := false // some fault failed the store: the path the test guards ran
	for k := 0; ; k++ {
		if k > 5000 {
			t.Fatal("workload does not complete")
		}
		inj := &errorfs.Counter{Injector: errorfs.OnIndex(int32(k))}
		s, err := Open("db", Options{FS: errorfs.Wrap(vfs.NewMem(), inj), Clock: storetest.NewManualClock(1).Now, Logger: pebblelog.Quiet{}})
		if err != nil {
			continue
		}
		s.stopZeroSweeper(true)
		ctx := context.Background()
		for i := range 6 {
			id := fmt.Sprintf("t%d", i%3)
			if i < 3 {
				_, _ = s.Create(ctx, task(id, "c", a2a.TaskStateWorking))
			} else {
				_, _ = s.Replace(ctx, task(id, "d", a2a.TaskStateSubmitted), 0)
			}
			for j := range s.counterLocks {
				if !s.counterLocks[j].TryLock() {
					t.Fatalf("k=%d: call %d returned holding counter stripe %d (failed: %v)", k, i, j, s.failed.Load() != nil)
				}
				s.counterLocks[j].Unlock()
			}
		}
		fatal = fatal || s.failed.Load() != nil
		_ = s.Close()
		if inj.Load() == 0 {
			if !fatal {
				t.Error("no injected fault failed the store")
			}
			return
		}
	}
}
