package memstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// A task deleted and created again under its ID between a modify's read
// and its write takes the freed slot back at revision 1: the modify must
// start over on the new task, not write the old one's edit over it.
func TestModifyStartsOverWhenSlotReused(t *testing.T) {
	s := New(Options{})
	ctx := context.Background()
	working := &a2a.Task{ID: "x", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if _, err := s.Create(ctx, working); err != nil {
		t.Fatal(err)
	}
	slot := s.entryOf("x").slot
	modifyEdited = func() {
		modifyEdited = nil
		if err := s.Delete(ctx, "x"); err != nil {
			t.Error(err)
		}
		done := &a2a.Task{ID: "x", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
		if _, err := s.Create(ctx, done); err != nil {
			t.Error(err)
		}
	}
	defer func() { modifyEdited = nil }()
	_, err := s.Cancel(ctx, "x")
	if got := s.entryOf("x").slot; got != slot {
		t.Fatalf("setup: the new task is in slot %d, not the freed %d", got, slot)
	}
	if !errors.Is(err, engine.ErrNotCancelable) {
		t.Errorf("Cancel of a task completed meanwhile: %v, want ErrNotCancelable", err)
	}
	if rec, err := s.Get(ctx, "x"); err != nil || rec.Task.Status.State != a2a.TaskStateCompleted || rec.Revision != 1 {
		t.Errorf("x after the cancel: %+v %v, want completed at revision 1", rec, err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

// A due task deleted between a retention batch's scan and its removals,
// its slot taken by a new task at the same time: the batch must not
// remove the new task, which it never examined.
func TestRetainSkipsTaskInReusedSlot(t *testing.T) {
	s := New(Options{Clock: func() int64 { return 1000 }})
	ctx := context.Background()
	done := func(id a2a.TaskID) *a2a.Task {
		return &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	}
	if _, err := s.Create(ctx, done("old")); err != nil {
		t.Fatal(err)
	}
	slot := s.entryOf("old").slot
	retainScanned = func() {
		if err := s.Delete(ctx, "old"); err != nil {
			t.Error(err)
		}
		if _, err := s.Create(ctx, done("new")); err != nil {
			t.Error(err)
		}
	}
	defer func() { retainScanned = nil }()
	res, err := s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: 2000, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s.mu.ids.get(&s.mu.slots, "new"); !ok || got != slot {
		t.Fatalf("new is in slot %d (%v), not the freed %d", got, ok, slot)
	}
	if res.Removed != 0 {
		t.Errorf("removed %d; want 0 (old was deleted meanwhile, new never examined)", res.Removed)
	}
	if _, err := s.Get(ctx, "new"); err != nil {
		t.Errorf("new: %v", err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

// More readers than probes page at once (each seek holds a probe), beside
// a writer: every page comes back, and each traversal sees every task
// the writer leaves alone exactly once.
func TestSeeksBeyondProbes(t *testing.T) {
	s := New(Options{})
	ctx := context.Background()
	const n = 300
	for i := range n {
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%03d", i)), ContextID: fmt.Sprintf("c%d", i%2), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		if _, err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() { // rewrites t000..t009 until the readers are done
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%03d", i%10)), ContextID: "c0", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
			if _, err := s.Replace(ctx, task, 0); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var readers sync.WaitGroup
	for r := range 3 * numProbes {
		readers.Go(func() {
			req := &engine.ListRequest{PageSize: 7}
			if r%2 == 1 {
				req.ContextID = "c1" // the context index: its own seeks
			}
			seen := map[a2a.TaskID]int{}
			for {
				resp, err := s.List(ctx, req)
				if err != nil {
					t.Error(err)
					return
				}
				for _, task := range resp.Tasks {
					seen[task.ID]++
				}
				if resp.NextPageToken == "" {
					break
				}
				req.PageToken = resp.NextPageToken
			}
			for i := 10; i < n; i++ {
				if r%2 == 1 && i%2 == 0 {
					continue // in c0
				}
				if id := a2a.TaskID(fmt.Sprintf("t%03d", i)); seen[id] != 1 {
					t.Errorf("reader %d saw %s %d times, want once", r, id, seen[id])
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	writer.Wait()
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}
