package memstore

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestTrimLogClockBack (review rev14-C; K7, S4): TrimLog goes on from
// the last task it trimmed towards newer ones. A clock that steps back
// (S4 allows it; the wall clock does under an NTP step) puts a task
// created afterwards older than that point, and no later TrimLog
// examines it: its log is never trimmed, however long it stays idle,
// as testLogTrimImportedOlder shows for imports (engine.TrimFrom).
func TestTrimLogClockBack(t *testing.T) {
	var now atomic.Int64
	now.Store(1000)
	s := New(Options{Log: true, Clock: func() int64 { return now.Load() }})
	ctx := context.Background()
	create := func(id a2a.TaskID) {
		t.Helper()
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
	create("old-1")
	now.Add(1)
	create("old-2")
	now.Store(10_000)
	create("young")
	if n, err := s.TrimLog(ctx, 5000, 10); err != nil || n != 2 {
		t.Fatalf("TrimLog = %d, %v; want the two old logs", n, err)
	}
	now.Store(500) // the clock steps back
	create("stepped-back")
	create("aa") // the same time, on either side of its ID
	create("zz")
	now.Store(20_000) // long after: every task idle since before 15,000
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
