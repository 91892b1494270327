package storetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// Writes: rejected writes (S3), revisions and existence (S7), IDs and
// invalid input (S8), cancel and delete (S9).

func testRejectedWrites(t testing.TB, e *env) { // S3
	tk := spec{id: "task-1", ctx: "ctx-a", ts: statusAt(0), history: 3, artifacts: 2, tag: "v1"}.build()
	e.mustCreate(t, tk)
	e.tick(10)
	got, err := e.s.Replace(e.ctx, clone(tk), 0)
	if err != nil {
		t.Fatal(err)
	}
	before := e.mustGet(t, tk.ID)
	if diffRecord(before, got) != "" {
		t.Fatalf("Get differs from Replace's record: %s", diffRecord(before, got))
	}
	check := func(what string, err, want error) {
		t.Helper()
		expectErr(t, what, err, want)
		e.expectUnchanged(t, what, before)
	}
	bad := func(edit func(*a2a.Task)) *a2a.Task { c := clone(tk); edit(c); return c }

	e.tick(10)
	_, err = e.s.Replace(e.ctx, bad(func(c *a2a.Task) { c.Status.State = "TASK_STATE_BOGUS" }), 0)
	check("Replace with an unknown state", err, engine.ErrInvalidArgument)
	e.tick(10)
	_, err = e.s.Replace(e.ctx, bad(func(c *a2a.Task) { c.Status.State = a2a.TaskStateUnspecified }), 0)
	check("Replace with an unspecified state", err, engine.ErrInvalidArgument)
	e.tick(10)
	_, err = e.s.Replace(e.ctx, bad(func(c *a2a.Task) { c.ContextID = strings.Repeat("c", specMaxIDBytes+1) }), 0)
	check("Replace with a 1025-byte context ID", err, engine.ErrInvalidArgument)
	if !e.h.BinaryIDs {
		e.tick(10)
		_, err = e.s.Replace(e.ctx, bad(func(c *a2a.Task) { c.ContextID = "ctx\x00a" }), 0)
		check("Replace with a NUL context ID", err, engine.ErrInvalidArgument)
	}
	e.tick(10)
	_, err = e.s.Replace(e.ctx, nil, 0)
	expectErr(t, "Replace(nil)", err, engine.ErrInvalidArgument)
	e.tick(10)
	_, err = e.s.AppendHistory(e.ctx, tk.ID, nil)
	check("AppendHistory(nil)", err, engine.ErrInvalidArgument)
	e.tick(10)
	_, err = e.s.AppendHistory(e.ctx, tk.ID, &a2a.Message{Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("no id")}})
	check("AppendHistory of a message without ID", err, engine.ErrInvalidArgument)
	for _, rev := range []int64{before.Revision + 1, before.Revision - 1, before.Revision + 100} {
		e.tick(10)
		_, err = e.s.Replace(e.ctx, bad(func(c *a2a.Task) { c.Metadata["owner"] = "mallory" }), rev)
		check("Replace with a stale expected revision", err, engine.ErrRevisionConflict)
	}
	// A negative expected revision is bad input, decided before the store
	// is read: ErrInvalidArgument, never a conflict, also for a missing
	// task (S7, engine.Store.Replace).
	for _, rev := range []int64{-1, math.MinInt64} {
		e.tick(10)
		_, err = e.s.Replace(e.ctx, bad(func(c *a2a.Task) { c.Metadata["owner"] = "mallory" }), rev)
		check(fmt.Sprintf("Replace with expected revision %d", rev), err, engine.ErrInvalidArgument)
		if errors.Is(err, engine.ErrRevisionConflict) {
			t.Errorf("Replace with expected revision %d: %v is also a conflict", rev, err)
		}
		_, err = e.s.Replace(e.ctx, bad(func(c *a2a.Task) { c.ID = "missing" }), rev)
		expectErr(t, fmt.Sprintf("Replace of a missing task with expected revision %d", rev), err, engine.ErrInvalidArgument)
	}
	e.tick(10)
	_, err = e.s.Create(e.ctx, bad(func(c *a2a.Task) { c.Metadata["owner"] = "mallory" }))
	check("Create of an existing ID", err, engine.ErrAlreadyExists)

	// A deduplicated append succeeds, returns the current record, and
	// changes nothing, even when the message content differs.
	e.tick(10)
	dup := newMessage(tk.History[1].ID)
	dup.Parts = a2a.ContentParts{a2a.NewTextPart("different text, same ID")}
	got, err = e.s.AppendHistory(e.ctx, tk.ID, dup)
	if err != nil {
		t.Errorf("deduplicated AppendHistory: %v", err)
	} else if d := diffRecord(got, before); d != "" {
		t.Errorf("deduplicated AppendHistory returned another record: %s", d)
	}
	e.expectUnchanged(t, "deduplicated AppendHistory", before)
	e.tick(10)
	dup = newMessage(tk.History[1].ID) // the message in the middle, not the last
	got, err = e.s.AppendHistory(e.ctx, tk.ID, dup)
	if err != nil || diffRecord(got, before) != "" {
		t.Errorf("deduplicated AppendHistory of a middle message: %v %s", err, diffRecord(got, before))
	}
	e.expectUnchanged(t, "deduplicated AppendHistory", before)
}

func testRejectedCancel(t testing.TB, e *env) { // S3
	for _, st := range terminalStates {
		id := a2a.TaskID("term-" + string(st))
		before := e.mustCreate(t, spec{id: id, ctx: "c", state: st, ts: statusAt(1), history: 2, artifacts: 1, tag: "t"}.build())
		e.tick(10)
		_, err := e.s.Cancel(e.ctx, id)
		expectErr(t, "Cancel of a "+string(st)+" task", err, engine.ErrNotCancelable)
		e.expectUnchanged(t, "rejected Cancel of a "+string(st)+" task", before)
	}
	for _, st := range activeStates {
		id := a2a.TaskID("active-" + string(st))
		before := e.mustCreate(t, spec{id: id, ctx: "c", state: st, ts: statusAt(1), history: 1, tag: "t"}.build())
		e.tick(10)
		got, err := e.s.Cancel(e.ctx, id)
		e.advanced(t, "Cancel of a "+string(st)+" task", before, got, err)
	}
}

func testRevisions(t testing.TB, e *env) { // S7
	rec := e.mustCreate(t, task("r", "ctx"))
	if rec.Revision != 1 {
		t.Fatalf("Create: revision %d, want 1", rec.Revision)
	}
	e.tick(1)
	got, err := e.s.Replace(e.ctx, clone(rec.Task), 0)
	rec = e.advanced(t, "unconditional Replace", rec, got, err)
	e.tick(1)
	got, err = e.s.Replace(e.ctx, clone(rec.Task), rec.Revision)
	rec = e.advanced(t, "conditional Replace", rec, got, err)
	e.tick(1)
	_, err = e.s.Replace(e.ctx, clone(rec.Task), rec.Revision-1)
	expectErr(t, "Replace with the previous revision", err, engine.ErrRevisionConflict)
	e.expectUnchanged(t, "revision conflict", rec)
	e.tick(1)
	got, err = e.s.AppendHistory(e.ctx, "r", newMessage("x"))
	rec = e.advanced(t, "AppendHistory", rec, got, err)
	e.tick(1)
	got, err = e.s.AppendHistory(e.ctx, "r", newMessage("x"))
	if err != nil || got.Revision != rec.Revision {
		t.Errorf("deduplicated AppendHistory: revision %d, %v; want %d", got.Revision, err, rec.Revision)
	}
	e.tick(1)
	got, err = e.s.Cancel(e.ctx, "r")
	rec = e.advanced(t, "Cancel", rec, got, err)
	if rec.Revision != 5 {
		t.Errorf("after Create and four mutations: revision %d, want 5", rec.Revision)
	}
	// Delete and re-create starts again at revision 1.
	if err := e.s.Delete(e.ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if again := e.mustCreate(t, task("r", "ctx")); again.Revision != 1 {
		t.Errorf("re-Create after Delete: revision %d, want 1", again.Revision)
	}
}

func testNotFoundExists(t testing.TB, e *env) { // S7
	_, err := e.s.Get(e.ctx, "missing")
	expectErr(t, "Get of a missing task", err, engine.ErrNotFound)
	_, err = e.s.Replace(e.ctx, task("missing", "ctx"), 0)
	expectErr(t, "Replace of a missing task", err, engine.ErrNotFound)
	_, err = e.s.Replace(e.ctx, task("missing", "ctx"), 3)
	expectErr(t, "conditional Replace of a missing task", err, engine.ErrNotFound)
	_, err = e.s.Cancel(e.ctx, "missing")
	expectErr(t, "Cancel of a missing task", err, engine.ErrNotFound)
	_, err = e.s.AppendHistory(e.ctx, "missing", newMessage("m"))
	expectErr(t, "AppendHistory of a missing task", err, engine.ErrNotFound)
	expectErr(t, "Delete of a missing task", e.s.Delete(e.ctx, "missing"), engine.ErrNotFound)
	if resp := e.mustList(t, engine.ListRequest{IncludeTotalSize: true}); len(resp.Tasks) != 0 || resp.TotalSize != 0 {
		t.Errorf("failed writes on a missing task created something: %s total %d", pageIDs(resp), resp.TotalSize)
	}

	rec := e.mustCreate(t, task("dup", "ctx"))
	e.tick(1)
	_, err = e.s.Create(e.ctx, spec{id: "dup", ctx: "other", state: a2a.TaskStateCompleted, tag: "v2"}.build())
	expectErr(t, "Create of an existing ID", err, engine.ErrAlreadyExists)
	e.expectUnchanged(t, "Create of an existing ID", rec)
	// Deleted tasks are missing too.
	if err := e.s.Delete(e.ctx, "dup"); err != nil {
		t.Fatal(err)
	}
	_, err = e.s.Get(e.ctx, "dup")
	expectErr(t, "Get after Delete", err, engine.ErrNotFound)
	_, err = e.s.Cancel(e.ctx, "dup")
	expectErr(t, "Cancel after Delete", err, engine.ErrNotFound)
	expectErr(t, "second Delete", e.s.Delete(e.ctx, "dup"), engine.ErrNotFound)
}

func testReplaceTerminalContext(t testing.TB, e *env) { // S7
	for _, st := range terminalStates {
		id := a2a.TaskID("t-" + string(st))
		rec := e.mustCreate(t, spec{id: id, ctx: "old", state: st, ts: statusAt(0), history: 1, tag: "v1"}.build())
		e.tick(1)
		next := spec{id: id, ctx: "new", state: a2a.TaskStateWorking, ts: statusAt(9), history: 2, artifacts: 1, tag: "v2"}.build()
		got, err := e.s.Replace(e.ctx, next, rec.Revision)
		got = e.advanced(t, "Replace of a "+string(st)+" task", rec, got, err)
		if canon(got.Task) != canon(next) {
			t.Errorf("Replace of a %s task stored\n%s\nwant\n%s", st, canon(got.Task), canon(next))
		}
	}
	for _, c := range []string{"old", "new"} {
		resp := e.mustList(t, engine.ListRequest{ContextID: c, IncludeTotalSize: true})
		want := 0
		if c == "new" {
			want = len(terminalStates)
		}
		if len(resp.Tasks) != want || resp.TotalSize != want {
			t.Errorf("context %q after Replace moved every task to \"new\": %d tasks, total %d; want %d", c, len(resp.Tasks), resp.TotalSize, want)
		}
		for _, tk := range resp.Tasks {
			if tk.ContextID != c {
				t.Errorf("context filter %q returned a task of context %q", c, tk.ContextID)
			}
		}
	}
}

func testIDLimits(t testing.TB, e *env) { // S8
	_, err := e.s.Create(e.ctx, task("", "ctx"))
	expectErr(t, "Create with an empty ID", err, engine.ErrInvalidArgument)
	long := a2a.TaskID(strings.Repeat("i", specMaxIDBytes))
	longCtx := strings.Repeat("c", specMaxIDBytes)
	rec := e.mustCreate(t, task(long, longCtx))
	if got := e.mustGet(t, long); diffRecord(got, rec) != "" {
		t.Errorf("1024-byte IDs: %s", diffRecord(got, rec))
	}
	_, err = e.s.Create(e.ctx, task(long+"i", "ctx"))
	expectErr(t, "Create with a 1025-byte ID", err, engine.ErrInvalidArgument)
	_, err = e.s.Create(e.ctx, task("short", longCtx+"c"))
	expectErr(t, "Create with a 1025-byte context ID", err, engine.ErrInvalidArgument)
	_, err = e.s.Replace(e.ctx, task(long+"i", "ctx"), 0)
	expectErr(t, "Replace with a 1025-byte ID", err, engine.ErrInvalidArgument)
	e.tick(1)
	e.mustCreate(t, task("short", "ctx"))
	// A 1024-byte boundary ID round-trips through a token (T3).
	tasks, _ := e.traverse(t, engine.ListRequest{PageSize: 1}, 2)
	if got, want := ids(tasks), []a2a.TaskID{"short", long}; !slices.Equal(got, want) {
		t.Errorf("traversal %q, want %q", got, want)
	}
	resp := e.mustList(t, engine.ListRequest{ContextID: longCtx, IncludeTotalSize: true})
	if len(resp.Tasks) != 1 || resp.TotalSize != 1 {
		t.Errorf("filter by a 1024-byte context: %s total %d", pageIDs(resp), resp.TotalSize)
	}
	_, err = e.s.List(e.ctx, &engine.ListRequest{ContextID: longCtx + "c"})
	expectErr(t, "List with a 1025-byte context filter", err, engine.ErrInvalidArgument)
	if resp := e.mustList(t, engine.ListRequest{IncludeTotalSize: true}); resp.TotalSize != 2 {
		t.Errorf("rejected Creates stored something: total %d, want 2", resp.TotalSize)
	}
}

// binaryIDs are IDs only BinaryIDs backends store.
var binaryIDs = []a2a.TaskID{"\x00", "nul\x00inside", "\xff\xfe", "bad\xc3\x28utf8", "\x00\xff", "trail\x00"}

func testBinaryIDs(t testing.TB, e *env) { // S8, T3
	if !e.h.BinaryIDs {
		for _, id := range binaryIDs {
			_, err := e.s.Create(e.ctx, task(id, "ctx"))
			expectErr(t, "Create with ID "+quote(id), err, engine.ErrInvalidArgument)
			_, err = e.s.Create(e.ctx, task("ok-id", "ctx"+string(id)))
			expectErr(t, "Create with context ID "+quote("ctx"+id), err, engine.ErrInvalidArgument)
		}
		rec := e.mustCreate(t, task("ok-id", "ctx"))
		e.tick(1)
		bad := clone(rec.Task)
		bad.ContextID = "\x00"
		_, err := e.s.Replace(e.ctx, bad, 0)
		expectErr(t, "Replace with a NUL context ID", err, engine.ErrInvalidArgument)
		e.expectUnchanged(t, "rejected Replace", rec)
		if resp := e.mustList(t, engine.ListRequest{IncludeTotalSize: true}); resp.TotalSize != 1 {
			t.Errorf("rejected Creates stored something: total %d, want 1", resp.TotalSize)
		}
		// A well-formed token the backend cannot represent is the generic
		// token error (T4).
		for _, id := range binaryIDs {
			_, err := e.s.List(e.ctx, &engine.ListRequest{PageToken: specToken(engine.Cursor{UpdatedAt: 5, ID: id})})
			if !errors.Is(err, engine.ErrInvalidPageToken) {
				t.Errorf("token with boundary ID %s: %v, want ErrInvalidPageToken", quote(id), err)
			}
		}
		return
	}
	var recs []engine.Record
	for i, id := range binaryIDs {
		ctxID := "ctx\x00" + string(id)
		if i%2 == 1 {
			ctxID = "\xff" + string(id)
		}
		recs = append(recs, e.mustCreate(t, task(id, ctxID)))
		e.tick(1)
	}
	e.mustCreate(t, task("plain", "plain"))
	for _, r := range recs {
		got := e.mustGet(t, r.Task.ID)
		if d := diffRecord(got, r); d != "" {
			t.Errorf("Get(%s): %s", quote(r.Task.ID), d)
		}
		resp := e.mustList(t, engine.ListRequest{ContextID: r.Task.ContextID, IncludeTotalSize: true})
		if len(resp.Tasks) != 1 || resp.Tasks[0].ID != r.Task.ID || resp.Tasks[0].ContextID != r.Task.ContextID || resp.TotalSize != 1 {
			t.Errorf("filter by context %s: %s total %d", quote(a2a.TaskID(r.Task.ContextID)), pageIDs(resp), resp.TotalSize)
		}
	}
	// Every binary ID survives as a token boundary (T3).
	tasks, cursors := e.traverse(t, engine.ListRequest{PageSize: 1, IncludeArtifacts: true}, len(recs)+1)
	if len(tasks) != len(recs)+1 {
		t.Fatalf("traversal returned %d tasks, want %d", len(tasks), len(recs)+1)
	}
	for i, c := range cursors {
		if tasks[i].ID != c.ID {
			t.Errorf("task %s listed with cursor %s", quote(tasks[i].ID), fmtCursor(c))
		}
		if i == 0 {
			if c.ID != "plain" {
				t.Errorf("position 0: %s, want the last created task \"plain\"", fmtCursor(c))
			}
		} else {
			if r := recs[len(recs)-i]; c != r.Cursor || canon(tasks[i]) != canon(r.Task) {
				t.Errorf("position %d: %s, want %s", i, fmtCursor(c), fmtCursor(r.Cursor))
			}
		}
	}
}

func quote(id a2a.TaskID) string { return strconv.Quote(string(id)) }

func testInvalidInput(t testing.TB, e *env) { // S8
	_, err := e.s.Create(e.ctx, nil)
	expectErr(t, "Create(nil)", err, engine.ErrInvalidArgument)
	for _, st := range []a2a.TaskState{a2a.TaskStateUnspecified, "TASK_STATE_BOGUS", "working"} {
		tk := task("x", "c")
		tk.Status.State = st
		_, err = e.s.Create(e.ctx, tk)
		expectErr(t, "Create with state "+string(st), err, engine.ErrInvalidArgument)
	}
	_, err = e.s.AppendHistory(e.ctx, "x", nil)
	if !errors.Is(err, engine.ErrInvalidArgument) && !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("AppendHistory(nil) of a missing task: %v, want ErrInvalidArgument or ErrNotFound", err)
	}
	if resp := e.mustList(t, engine.ListRequest{IncludeTotalSize: true}); resp.TotalSize != 0 || len(resp.Tasks) != 0 {
		t.Errorf("rejected writes stored something: total %d", resp.TotalSize)
	}
	_, err = e.s.Get(e.ctx, "x")
	expectErr(t, "Get after rejected Creates", err, engine.ErrNotFound)
}

func testCancel(t testing.TB, e *env) { // S9
	sp := spec{id: "c1", ctx: "ctx", state: a2a.TaskStateWorking, ts: statusAt(0), history: 3, artifacts: 2, tag: "v1"}
	rec := e.mustCreate(t, sp.build())
	e.tick(100)
	got, err := e.s.Cancel(e.ctx, "c1")
	got = e.advanced(t, "Cancel", rec, got, err)
	st := got.Task.Status
	if st.State != a2a.TaskStateCanceled {
		t.Errorf("Cancel: state %s, want canceled", st.State)
	}
	if st.Timestamp == nil || !st.Timestamp.Equal(time.UnixMicro(got.Cursor.UpdatedAt)) {
		t.Errorf("Cancel: status timestamp %v, want UpdatedAt %v", st.Timestamp, time.UnixMicro(got.Cursor.UpdatedAt))
	}
	if st.Message != nil {
		t.Errorf("Cancel kept the status message %+v", st.Message)
	}
	want := sp.build()
	want.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: st.Timestamp}
	if canon(got.Task) != canon(want) {
		t.Errorf("Cancel changed more than the status:\n got %s\nwant %s", canon(got.Task), canon(want))
	}
	// A task without a status timestamp gets one too.
	sp2 := sp
	sp2.id, sp2.ts, sp2.state = "c2", nil, a2a.TaskStateSubmitted
	rec2 := e.mustCreate(t, sp2.build())
	e.tick(1)
	got2, err := e.s.Cancel(e.ctx, "c2")
	got2 = e.advanced(t, "Cancel", rec2, got2, err)
	if ts := got2.Task.Status.Timestamp; ts == nil || ts.UnixMicro() != got2.Cursor.UpdatedAt {
		t.Errorf("Cancel of a task without status timestamp: timestamp %v, UpdatedAt %d", ts, got2.Cursor.UpdatedAt)
	}
	resp := e.mustList(t, engine.ListRequest{Status: a2a.TaskStateCanceled, IncludeTotalSize: true})
	if got, want := ids(resp.Tasks), []a2a.TaskID{"c2", "c1"}; !slices.Equal(got, want) || resp.TotalSize != 2 {
		t.Errorf("canceled filter: %s total %d", pageIDs(resp), resp.TotalSize)
	}
	_, err = e.s.Cancel(e.ctx, "c1")
	expectErr(t, "second Cancel", err, engine.ErrNotCancelable)
}

func testDelete(t testing.TB, e *env) { // S9
	for i, id := range []a2a.TaskID{"d1", "d2", "d3", "d4"} {
		ctx := "even"
		if i%2 == 1 {
			ctx = "odd"
		}
		e.mustCreate(t, task(id, ctx))
		e.tick(1)
	}
	for _, id := range []a2a.TaskID{"d2", "d3"} {
		if err := e.s.Delete(e.ctx, id); err != nil {
			t.Fatalf("Delete(%s): %v", id, err)
		}
	}
	tasks, _ := e.traverse(t, engine.ListRequest{PageSize: 1}, 4)
	if got := ids(tasks); len(got) != 2 || slices.Contains(got, "d2") || slices.Contains(got, "d3") {
		t.Errorf("list after Delete: %q", got)
	}
	for _, c := range []string{"even", "odd"} {
		resp := e.mustList(t, engine.ListRequest{ContextID: c, IncludeTotalSize: true})
		if len(resp.Tasks) != 1 || resp.TotalSize != 1 {
			t.Errorf("context %q after Delete: %s total %d, want 1", c, pageIDs(resp), resp.TotalSize)
		}
	}
	resp := e.mustList(t, engine.ListRequest{IncludeTotalSize: true, Status: a2a.TaskStateWorking})
	if resp.TotalSize != 2 {
		t.Errorf("total after Delete: %d, want 2", resp.TotalSize)
	}
}
