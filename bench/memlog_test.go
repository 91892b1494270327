package bench

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// BenchmarkMemLog (#55) measures what memstore's task log (K7) costs the
// paths it is on, at 1e5 realistic tasks:
//
//	BenchmarkMemLog/op=replace/log=off|on
//	BenchmarkMemLog/op=read/entries=1|8
//
// replace is a Replace of a random task (of 4,096 drawn), with the log off and on in the
// same run; every 10,000 Replaces the logs are trimmed, untimed, as a
// server's retention trims the logs of idle tasks, so that they hold a
// task's last few entries. read is a ReadLog of the newest entry, or of
// the 8 a task's log holds, from a task picked at random.
func BenchmarkMemLog(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	gen := taskgen.New(taskgen.Shape{})
	load := func(b *testing.B, log bool) *memstore.Store {
		clock := &taskgen.StepClock{Start: 1_700_000_000_000_000, Every: 4}
		s := memstore.New(memstore.Options{Clock: clock.Now, Log: log})
		for i := range n {
			if _, err := s.Create(ctx, gen.Task(i)); err != nil {
				b.Fatal(err)
			}
		}
		return s
	}
	for _, log := range []string{"off", "on"} {
		b.Run("op=replace/log="+log, func(b *testing.B) {
			s := load(b, log == "on")
			tasks := make([]*a2a.Task, 4096)
			for j := range tasks {
				tasks[j] = gen.Task(benchPick(j, n))
			}
			warmHeap()
			b.ReportAllocs()
			defer reportFaults(b)()
			i := 0
			for b.Loop() {
				if _, err := s.Replace(ctx, tasks[i%len(tasks)], 0); err != nil {
					b.Fatal(err)
				}
				i++
				if log == "on" && i%10_000 == 0 {
					b.StopTimer()
					if _, err := s.TrimLog(ctx, math.MaxInt64, n); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
	s := load(b, true)
	const entries = 8
	for i := range n / 10 { // the tasks read: their logs hold 8 entries
		for range entries - 1 {
			if _, err := s.Replace(ctx, gen.Task(i), 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	ids := make([]a2a.TaskID, 4096)
	for j := range ids {
		ids[j] = gen.Task(benchPick(j, n/10)).ID
	}
	for _, want := range []int{1, entries} {
		b.Run(fmt.Sprintf("op=read/entries=%d", want), func(b *testing.B) {
			warmHeap()
			b.ReportAllocs()
			defer reportFaults(b)()
			i := 0
			for b.Loop() {
				id := ids[i%len(ids)]
				log, err := s.ReadLog(ctx, id, entries-int64(want), want)
				if err != nil || len(log) != want {
					b.Fatalf("ReadLog(%q): %d entries, %v; want %d", id, len(log), err, want)
				}
				i++
			}
		})
	}
}

// benchPick is the i-th of a fixed pseudo-random sequence of indexes below n.
func benchPick(i, n int) int { return int(uint64(i) * 0x9E3779B97F4A7C15 >> 20 % uint64(n)) }
