package pebblestore

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/internal/pebblelog"
)

// BenchmarkLifecycle is a task's whole life in A2A, the writes that move
// counters: create (in a context of its own, one of 4 owners), working,
// completed, delete. It measures what deleting counters at zero
// (counters.go, zero_sweeper.go) costs, the sweeper's backlog at the end
// (metric backlog, markers) drained in the timed region:
//
//	BenchmarkLifecycle/backend=pebble/sync=S/writers=W   one op = 4 writes
func BenchmarkLifecycle(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("backend=pebble/sync=%v/writers=%d", sync, writers), func(b *testing.B) {
				dir := benchTempDir(b, fmt.Sprintf("life-%v-%d-%d", sync, writers, time.Now().UnixNano()))
				defer os.RemoveAll(dir)
				s, err := Open(dir, Options{NoSync: !sync, Logger: pebblelog.Quiet{}})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				var seq atomic.Int64
				life := func() error {
					i := seq.Add(1)
					t := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%d", i)), ContextID: fmt.Sprintf("c%d", i), Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
					if _, err := s.CreateOwned(ctx, t, fmt.Sprintf("owner-%d", i%4)); err != nil {
						return err
					}
					for _, st := range []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted} {
						t.Status.State = st
						if _, err := s.Replace(ctx, t, 0); err != nil {
							return err
						}
					}
					return s.Delete(ctx, t.ID)
				}
				b.ReportAllocs()
				b.SetParallelism(writers)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := life(); err != nil {
							b.Error(err)
							return
						}
					}
				})
				// The sweeper's backlog is part of the cost: drain it
				// in the timed region.
				s.zeros.mu.Lock()
				backlog := len(s.zeros.pending)
				s.zeros.mu.Unlock()
				if err := s.sweepPending(nil); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(backlog), "backlog")
			})
		}
	}
}
