package storetest

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// RunTrimLogClockBack checks that TrimLog reaches tasks written behind the
// point it goes on from (K7, S4), on Harness.OpenLogged's store with a
// clock it drives (it skips without either). TrimLog walks oldest first
// from the last task it trimmed towards newer ones. A clock that steps
// back (S4 allows it; the wall clock does under an NTP step) puts tasks
// created afterwards older than that point ("stepped-back", and "aa" and
// "zz" at the same time, on either side of its ID); once every task has
// been idle since before the cutoff, TrimLog run to its end must have
// trimmed all their logs. Imports are "X1-K7/trim-imported-older"'s case
// (engine.TrimFrom).
func RunTrimLogClockBack(t *testing.T, h Harness) {
	switch {
	case h.OpenLogged == nil:
		t.Skip("Harness.OpenLogged is nil: the trim test needs the task log")
	case !h.ClockInjection:
		t.Skip("backend takes no custom clock: the trim test steps it back")
	}
	clock := NewManualClock(1000)
	s := stressStoreOf(t, h.OpenLogged(t, clock.Now))
	ctx := context.Background()
	create := func(id a2a.TaskID) {
		t.Helper()
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
	create("old-1")
	clock.Advance(1)
	create("old-2")
	clock.Set(10_000)
	create("young")
	if n, err := s.TrimLog(ctx, 5000, 10); err != nil || n != 2 {
		t.Fatalf("TrimLog = %d, %v; want the two old logs", n, err)
	}
	clock.Set(500) // the clock steps back
	create("stepped-back")
	create("aa") // the same time, on either side of its ID
	create("zz")
	clock.Set(20_000) // long after: every task idle since before 15,000
	for {
		n, err := s.TrimLog(ctx, 15_000, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n < 10 {
			break
		}
	}
	for _, id := range []a2a.TaskID{"young", "stepped-back", "aa", "zz"} {
		log, err := s.ReadLog(ctx, id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(log) != 0 {
			t.Errorf("task %q, idle since before the cutoff, keeps a log of %d entries after TrimLog ran to the end", id, len(log))
		}
	}
}
