package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/fakeclock"
)

// storedTask is a working task of context ctx and owner as stored at
// revision rev and time at, with one log entry (the last revision's).
func storedTask(t *testing.T, id, ctx, owner string, rev, at int64) engine.StoredTask {
	t.Helper()
	task := &a2a.Task{ID: a2a.TaskID(id), ContextID: ctx, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	l, err := engine.NewLogEntry(task, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Revision, l.Time = rev, at
	return engine.StoredTask{Record: engine.Record{Task: task, Revision: rev, Cursor: engine.Cursor{UpdatedAt: at, ID: task.ID}, Owner: owner},
		Log: []engine.LogEntry{l}}
}

// exportAll reads every task of s with Export, pages of size limit.
func exportAll(t *testing.T, s *memstore.Store, limit int) []engine.StoredTask {
	t.Helper()
	var all []engine.StoredTask
	var after *engine.Cursor
	for {
		got, err := s.Export(context.Background(), after, limit)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
		if len(got) < limit {
			return all
		}
		after = &got[len(got)-1].Cursor
	}
}

// TestImportRefusals (X1): an Import whose batch holds a task the store
// has, a task twice, a task that is not valid stored state or whose log
// the store could not have kept fails with ErrAlreadyExists or
// ErrInvalidArgument and writes none of the batch.
func TestImportRefusals(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(memstore.Options{Log: true})
	defer s.Close()
	if err := s.Import(ctx, []engine.StoredTask{storedTask(t, "a", "c", "o", 3, 1000), storedTask(t, "b", "c", "", 1, 1000)}); err != nil {
		t.Fatal(err)
	}
	logAfter := storedTask(t, "e", "c", "o", 2, 2000)
	logAfter.Log[0].Revision = 3
	logGap := storedTask(t, "e", "c", "o", 3, 2000)
	logGap.Log = append([]engine.LogEntry{logGap.Log[0]}, logGap.Log[0])
	logGap.Log[0].Revision = 1
	logShort := storedTask(t, "e", "c", "o", 3, 2000)
	logShort.Log[0].Revision = 2
	logEarly := storedTask(t, "e", "c", "o", 1, 2000)
	logEarly.Log[0].Time = 1999
	logState := storedTask(t, "e", "c", "o", 1, 2000)
	logState.Log[0].State = a2a.TaskStateCompleted
	badCursor := storedTask(t, "e", "c", "o", 1, 2000)
	badCursor.Cursor.ID = "f"
	badOwner := storedTask(t, "e", "c", string(make([]byte, engine.MaxOwnerBytes+1)), 1, 2000)
	for _, c := range []struct {
		name  string
		batch []engine.StoredTask
		want  error
	}{
		{"exists", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), storedTask(t, "a", "c", "", 1, 2000)}, engine.ErrAlreadyExists},
		{"twice", []engine.StoredTask{storedTask(t, "d", "c", "", 1, 2000), storedTask(t, "d", "c", "", 2, 2001)}, engine.ErrAlreadyExists},
		{"nil task", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), {}}, engine.ErrInvalidArgument},
		{"revision 0", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), storedTask(t, "z", "c", "", 0, 2000)}, engine.ErrInvalidArgument},
		{"negative time", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), storedTask(t, "z", "c", "", 1, -1)}, engine.ErrInvalidArgument},
		{"cursor of another task", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), badCursor}, engine.ErrInvalidArgument},
		{"owner too long", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), badOwner}, engine.ErrInvalidArgument},
		{"log after the task", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), logAfter}, engine.ErrInvalidArgument},
		{"log with a gap", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), logGap}, engine.ErrInvalidArgument},
		{"log ending before the task", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), logShort}, engine.ErrInvalidArgument},
		{"log ending before the task's time", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), logEarly}, engine.ErrInvalidArgument},
		{"log ending in another state", []engine.StoredTask{storedTask(t, "c", "c", "", 1, 2000), logState}, engine.ErrInvalidArgument},
	} {
		if err := s.Import(ctx, c.batch); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	got := exportAll(t, s, 10)
	if len(got) != 2 || got[0].Task.ID != "b" || got[1].Task.ID != "a" { // same time: ID descending (S6)
		t.Fatalf("after the refused imports the store exports %v", got)
	}
	want := []engine.StoredTask{storedTask(t, "b", "c", "", 1, 1000), storedTask(t, "a", "c", "o", 3, 1000)}
	sameExport(t, got, want)
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	resp, err := s.List(ctx, &engine.ListRequest{Owner: "o", IncludeTotalSize: true})
	if err != nil || resp.TotalSize != 1 {
		t.Fatalf("owner o's total %+v, %v; want 1", resp, err)
	}
	tail, err := s.Tail(ctx, 5)
	if err != nil || !reflect.DeepEqual(tail, []engine.Cursor{{UpdatedAt: 1000, ID: "b"}, {UpdatedAt: 1000, ID: "a"}}) {
		t.Fatalf("tail %v, %v", tail, err)
	}
}

// TestImportExportRoundTrip (X1): a store built by Create and the
// mutations, exported and imported into an empty store, exports the same
// tasks (IDs, times, revisions, owners, content, logs) in the same order;
// the import is as good as the writes: its invariants hold, its totals and
// logs are the source's, and it takes later writes as the source would.
// The imported store keeps none of the caller's memory.
func TestImportExportRoundTrip(t *testing.T) {
	for _, log := range []bool{false, true} {
		t.Run(fmt.Sprintf("log=%t", log), func(t *testing.T) {
			ctx := context.Background()
			clock := fakeclock.New(time.Unix(1_700_000_000, 0))
			src := memstore.New(memstore.Options{Clock: clock.Micros, Log: log})
			defer src.Close()
			for i := range 30 {
				ts := time.Unix(1_700_000_000+int64(i), 0).UTC()
				task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("task-%02d\x00", i)), ContextID: fmt.Sprintf("ctx-%d", i%4),
					Status:   a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: &ts},
					Metadata: map[string]any{"i": float64(i)}}
				owner := []string{"", "alice", "bob"}[i%3]
				if _, err := src.CreateOwned(ctx, task, owner); err != nil {
					t.Fatal(err)
				}
				if i%5 == 0 {
					clock.Advance(time.Millisecond) // some tasks share a time, some do not
				}
				switch i % 4 {
				case 1:
					task.Status.State = a2a.TaskStateWorking
					if _, err := src.Replace(ctx, task, 0); err != nil {
						t.Fatal(err)
					}
				case 2:
					if _, err := src.AppendHistory(ctx, task.ID, &a2a.Message{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}); err != nil {
						t.Fatal(err)
					}
				case 3:
					if _, err := src.Cancel(ctx, task.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := exportAll(t, src, 7)
			if len(want) != 30 {
				t.Fatalf("exported %d tasks, want 30", len(want))
			}
			dst := memstore.New(memstore.Options{Clock: clock.Micros, Log: log})
			defer dst.Close()
			in := exportAll(t, src, 7)
			for i := 0; i < len(in); i += 8 {
				if err := dst.Import(ctx, in[i:min(i+8, len(in))]); err != nil {
					t.Fatal(err)
				}
			}
			// The caller's memory is not the store's.
			for i := range in {
				in[i].Task.ID += "x"
				in[i].Task.ContextID += "x"
				in[i].Task.Metadata["i"] = -1.0
				for j := range in[i].Log {
					for k := range in[i].Log[j].Body {
						in[i].Log[j].Body[k] = '!'
					}
				}
			}
			got := exportAll(t, dst, 10)
			sameExport(t, got, want)
			if err := dst.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			for _, q := range []engine.ListRequest{{}, {Owner: "alice"}, {ContextID: "ctx-1"}, {Status: a2a.TaskStateCanceled},
				{Owner: "bob", ContextID: "ctx-2"}, {Owner: "bob", Status: a2a.TaskStateWorking}} {
				q.IncludeTotalSize, q.PageSize = true, 100
				a, err := src.List(ctx, &q)
				if err != nil {
					t.Fatal(err)
				}
				b, err := dst.List(ctx, &q)
				if err != nil {
					t.Fatal(err)
				}
				if a.TotalSize != b.TotalSize || !reflect.DeepEqual(a.TaskCursors, b.TaskCursors) || !reflect.DeepEqual(a.TaskOwners, b.TaskOwners) {
					t.Errorf("list %+v: source %d %v %v, imported %d %v %v", q, a.TotalSize, a.TaskCursors, a.TaskOwners, b.TotalSize, b.TaskCursors, b.TaskOwners)
				}
			}
			srcTail, err := src.Tail(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			dstTail, err := dst.Tail(ctx, 3)
			if err != nil || !reflect.DeepEqual(srcTail, dstTail) || len(dstTail) != 3 || dstTail[2] != want[len(want)-1].Cursor {
				t.Fatalf("tail %v, %v; source's %v", dstTail, err, srcTail)
			}
			// Later writes go on from the imported revision and time.
			id := want[0].Task.ID
			for _, s := range []*memstore.Store{src, dst} {
				rec, err := s.AppendHistory(ctx, id, &a2a.Message{ID: "later", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.NewTextPart("x")}})
				if err != nil || rec.Revision != want[0].Revision+1 || rec.Cursor.UpdatedAt <= want[0].Cursor.UpdatedAt {
					t.Fatalf("append after import: %+v, %v", rec, err)
				}
				if err := s.CheckInvariants(); err != nil {
					t.Fatal(err)
				}
			}
			if log {
				a, err := src.ReadLog(ctx, id, 0, 100)
				if err != nil {
					t.Fatal(err)
				}
				b, err := dst.ReadLog(ctx, id, 0, 100)
				if err != nil || !reflect.DeepEqual(a, b) {
					t.Fatalf("imported log %+v, %v; source's %+v", b, err, a)
				}
			}
		})
	}
}

// sameExport fails t unless got and want hold the same stored tasks.
func sameExport(t *testing.T, got, want []engine.StoredTask) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("exported %d tasks, want %d", len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("task %d: exported %+v (task %+v), want %+v (task %+v)", i, got[i], got[i].Task, want[i], want[i].Task)
		}
	}
}
