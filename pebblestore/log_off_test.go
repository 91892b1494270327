package pebblestore

import (
	"context"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/internal/pebblelog"
)

// K7 across a run without the log (Options.Log): a store opened without
// it drops the log it holds, so that, opened with it again, no task's log
// has a gap where the run without it wrote, and a task created under the
// ID of one deleted meanwhile does not read the deleted task's entries;
// CheckInvariants passes after each run. Before, the log stayed: t2 read
// revisions 1 and 3, the new t1 the old t1's 2 and 3, and the store
// without the log failed CheckInvariants after a Replace or a Delete
// (review by helper-39).
func TestLogOffDropsLog(t *testing.T) {
	fs := vfs.NewMem()
	ctx := context.Background()
	var s *Store
	reopen := func(log bool) {
		t.Helper()
		if s != nil {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if s, err = Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}, Log: log}); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatalf("opened with Log %v: %v", log, err)
		}
	}
	write := func(id a2a.TaskID, ctxID string, create bool) {
		t.Helper()
		tk := &a2a.Task{ID: id, ContextID: ctxID, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		var err error
		if create {
			_, err = s.Create(ctx, tk)
		} else {
			_, err = s.Replace(ctx, tk, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	revisions := func(id a2a.TaskID) []int64 {
		t.Helper()
		entries, err := s.ReadLog(ctx, id, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var revs []int64
		for _, e := range entries {
			revs = append(revs, e.Revision)
		}
		return revs
	}
	reopen(true)
	write("t1", "old", true)
	write("t1", "old", false)
	write("t1", "old", false)
	write("t2", "c", true)
	write("t3", "c", true)
	if err := s.Delete(ctx, "t3"); err != nil {
		t.Fatal(err)
	}
	reopen(false)
	write("t2", "c", false) // revision 2, no entry
	if err := s.Delete(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("after a Replace and a Delete without the log: %v", err)
	}
	reopen(true)
	write("t2", "c", false) // revision 3
	write("t1", "new", true)
	if got := revisions("t2"); !slices.Equal(got, []int64{3}) {
		t.Errorf("t2's log reads revisions %v, want [3] (no gap where the run without the log wrote)", got)
	}
	if got := revisions("t1"); !slices.Equal(got, []int64{1}) {
		t.Errorf("t1, created again, reads revisions %v, want only its own [1]", got)
	}
	if mark, err := s.Deleted(ctx, "t3"); err != nil || mark != 0 {
		t.Errorf("t3's deletion, remembered before the run without the log: mark %d (%v), want none", mark, err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
