package pebblestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// ackLog records every write a store acknowledged, by task and revision.
type ackLog struct {
	mu   sync.Mutex
	recs map[a2a.TaskID]map[int64]engine.Record
	n    int
}

func (a *ackLog) add(r engine.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recs[r.Task.ID] == nil {
		a.recs[r.Task.ID] = map[int64]engine.Record{}
	}
	a.recs[r.Task.ID][r.Revision] = r
	a.n++
}

// latest returns each task's highest acknowledged revision.
func (a *ackLog) latest() map[a2a.TaskID]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[a2a.TaskID]int64{}
	for id, revs := range a.recs {
		for rev := range revs {
			out[id] = max(out[id], rev)
		}
	}
	return out
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// TestCheckpointUnderWrites (X1): a checkpoint taken while writers create
// and replace tasks opens as a store that passes CheckInvariants and
// serves a state the source had: every task at a revision the source
// acknowledged, with that revision's content, owner and cursor (so the
// same list order), every write acknowledged before the checkpoint began
// at least, and each task's log ending at its revision. A second
// Checkpoint into the same directory is refused. (Neither a Checkpoint
// without WithFlushedWAL nor one leaving the log outside wal/ fails it:
// NoSync writes are in the log file when acknowledged, and Pebble replays
// a log in the store directory too.)
func TestCheckpointUnderWrites(t *testing.T) {
	dir := t.TempDir()
	src, err := Open(filepath.Join(dir, "src"), Options{Log: true, NoSync: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	acks := &ackLog{recs: map[a2a.TaskID]map[int64]engine.Record{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ctx := context.Background()
	for w := range 4 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("w%d-%d", w, n)), ContextID: fmt.Sprintf("c%d", n%3),
					Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
				rec, err := src.CreateOwned(ctx, task, fmt.Sprintf("owner%d", w))
				if err != nil {
					t.Error(err)
					return
				}
				acks.add(rec)
				task.Status.State = a2a.TaskStateWorking
				task.Metadata = map[string]any{"step": float64(n)}
				if rec, err = src.Replace(ctx, task, rec.Revision); err != nil {
					t.Error(err)
					return
				}
				acks.add(rec)
			}
		})
	}
	waitAcks := func(n int) {
		for acks.count() < n && !t.Failed() {
			if _, err := src.Get(ctx, "absent"); !errors.Is(err, engine.ErrNotFound) {
				t.Fatal(err) // a read between polls of the condition
			}
		}
	}
	waitAcks(400)
	before := acks.latest()
	backup := filepath.Join(dir, "backup")
	if err := src.Checkpoint(backup); err != nil {
		t.Fatal(err)
	}
	waitAcks(acks.count() + 200)
	close(stop)
	wg.Wait()
	if err := src.Checkpoint(backup); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("checkpoint into an existing directory: %v; want ErrInvalidArgument", err)
	}

	cp, err := Open(backup, Options{Log: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.CheckInvariants(); err != nil {
		t.Fatalf("the checkpoint fails its check: %v", err)
	}
	seen := map[a2a.TaskID]bool{}
	var prev *engine.Cursor
	req := &engine.ListRequest{PageSize: engine.MaxPageSize}
	for {
		page, err := cp.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i, task := range page.Tasks {
			got, err := cp.Get(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			want, ok := acks.recs[task.ID][got.Revision]
			switch {
			case !ok:
				t.Fatalf("task %s at revision %d, which the source never acknowledged", task.ID, got.Revision)
			case got.Cursor != want.Cursor || page.TaskCursors[i] != want.Cursor || got.Owner != want.Owner || !sameJSON(t, got.Task, want.Task):
				t.Fatalf("task %s revision %d differs from the source's:\n got %+v %q %s\nwant %+v %q %s",
					task.ID, got.Revision, got.Cursor, got.Owner, asJSON(t, got.Task), want.Cursor, want.Owner, asJSON(t, want.Task))
			}
			if prev != nil && prev.Compare(want.Cursor) >= 0 {
				t.Fatalf("list order: %+v before %+v", *prev, want.Cursor)
			}
			c := want.Cursor
			prev = &c
			seen[task.ID] = true
			if logs, err := cp.ReadLog(ctx, task.ID, 0, 10); err != nil || len(logs) == 0 || logs[len(logs)-1].Revision != got.Revision {
				t.Fatalf("task %s log in the checkpoint: %d entries, %v", task.ID, len(logs), err)
			}
			if got.Revision < before[task.ID] {
				t.Fatalf("task %s at revision %d; revision %d was acknowledged before the checkpoint", task.ID, got.Revision, before[task.ID])
			}
		}
		if page.NextPageToken == "" {
			break
		}
		req.PageToken = page.NextPageToken
	}
	for id := range before {
		if !seen[id] {
			t.Errorf("task %s, acknowledged before the checkpoint, is not in it", id)
		}
	}
	t.Logf("%d tasks in the checkpoint, %d acknowledged before it began, %d writes in all", len(seen), len(before), acks.count())
}

func asJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sameJSON(t testing.TB, a, b any) bool { return asJSON(t, a) == asJSON(t, b) }

// TestReady (H1): Ready succeeds on an open store and fails once it is
// closed, and on a context that has ended.
func TestReady(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(t.Context()); err != nil {
		t.Errorf("Ready on an open store: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Ready(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ready on an ended context: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(t.Context()); !errors.Is(err, engine.ErrInternal) {
		t.Errorf("Ready on a closed store: %v; want ErrInternal", err)
	}
}
