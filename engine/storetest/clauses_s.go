package storetest

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// Storage update time and order (S1–S9).

var sClauses = []clause{
	{name: "S1-S2/time-advances", fn: testTimeAdvances},
	{name: "S3/rejected-writes", fn: testRejectedWrites},
	{name: "S3/rejected-cancel", fn: testRejectedCancel},
	{name: "S4/clock-backward", clock: true, fn: testClockBackward},
	{name: "S5/negative-clock", clock: true, fn: testNegativeClock},
	{name: "S5/max-time", clock: true, fn: testMaxTime},
	{name: "S6/equal-times", clock: true, fn: testEqualTimes},
	{name: "S6/order", fn: testOrder},
	{name: "S7/revisions", fn: testRevisions},
	{name: "S7/not-found-exists", fn: testNotFoundExists},
	{name: "S7/replace-terminal-and-context", fn: testReplaceTerminalContext},
	{name: "S8/id-limits", fn: testIDLimits},
	{name: "S8-T3/binary-ids", fn: testBinaryIDs},
	{name: "S8/invalid-input", fn: testInvalidInput},
	{name: "S9/cancel", fn: testCancel},
	{name: "S9/delete", fn: testDelete},
}

// advanced checks a successful mutation's record against the previous one:
// revision +1 (S7), same ID, and time advanced per S2/S4 — exactly
// max(clock, old+1) with an injected clock, strictly later without.
func (e *env) advanced(t testing.TB, what string, prev, got engine.Record, err error) engine.Record {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got.Revision != prev.Revision+1 {
		t.Errorf("%s: revision %d after %d, want +1 (S7)", what, got.Revision, prev.Revision)
	}
	if got.Cursor.ID != prev.Cursor.ID || got.Task == nil || got.Task.ID != prev.Cursor.ID {
		t.Errorf("%s: record names another task: cursor %s", what, fmtCursor(got.Cursor))
	}
	if e.clock != nil {
		if want := max(e.clock.Now(), prev.Cursor.UpdatedAt+1, 0); got.Cursor.UpdatedAt != want {
			t.Errorf("%s: UpdatedAt %d, want max(clock %d, old %d + 1) = %d (S4)", what, got.Cursor.UpdatedAt, e.clock.Now(), prev.Cursor.UpdatedAt, want)
		}
	} else if got.Cursor.UpdatedAt <= prev.Cursor.UpdatedAt {
		t.Errorf("%s: UpdatedAt %d not after %d (S2, S4)", what, got.Cursor.UpdatedAt, prev.Cursor.UpdatedAt)
	}
	if cur := e.mustGet(t, prev.Cursor.ID); diffRecord(cur, got) != "" {
		t.Errorf("%s: Get differs from the returned record: %s", what, diffRecord(cur, got))
	}
	return got
}

func testTimeAdvances(t testing.TB, e *env) { // S1, S2
	sp := spec{id: "task-1", ctx: "ctx-a", ts: statusAt(0), history: 2, artifacts: 1, tag: "v1"}
	rec := e.mustCreate(t, sp.build())
	if rec.Revision != 1 {
		t.Errorf("Create: revision %d, want 1 (S7)", rec.Revision)
	}
	if rec.Cursor.ID != sp.id {
		t.Errorf("Create: cursor ID %q, want %q", string(rec.Cursor.ID), string(sp.id))
	}
	if e.clock != nil && rec.Cursor.UpdatedAt != e.clock.Now() {
		t.Errorf("Create: UpdatedAt %d, want clock() = %d (S4)", rec.Cursor.UpdatedAt, e.clock.Now())
	}
	if rec.Cursor.UpdatedAt < 0 {
		t.Errorf("Create: UpdatedAt %d < 0 (S5)", rec.Cursor.UpdatedAt)
	}
	if canon(rec.Task) != canon(sp.build()) {
		t.Errorf("Create returned\n%s\nwant\n%s", canon(rec.Task), canon(sp.build()))
	}

	// Every kind of successful Replace advances, even with identical content.
	steps := []struct {
		what string
		edit func(*a2a.Task)
	}{
		{"Replace (identical content)", func(*a2a.Task) {}},
		{"Replace (metadata)", func(tk *a2a.Task) { tk.Metadata["owner"] = "bob" }},
		{"Replace (status)", func(tk *a2a.Task) { tk.Status.State = a2a.TaskStateInputRequired; tk.Status.Timestamp = statusAt(60) }},
		{"Replace (history)", func(tk *a2a.Task) { tk.History = append(tk.History, newMessage("extra")) }},
		{"Replace (artifacts)", func(tk *a2a.Task) { tk.Artifacts = nil }},
		{"Replace (far-future status timestamp)", func(tk *a2a.Task) {
			ts := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
			tk.Status.Timestamp = &ts
		}},
	}
	for i, st := range steps {
		e.tick(int64(10 + i))
		next := clone(rec.Task)
		st.edit(next)
		got, err := e.s.Replace(e.ctx, next, 0)
		rec = e.advanced(t, st.what, rec, got, err)
		if canon(rec.Task) != canon(next) {
			t.Errorf("%s stored\n%s\nwant\n%s", st.what, canon(rec.Task), canon(next))
		}
		// S1: the storage time is not the status timestamp.
		if ts := next.Status.Timestamp; ts != nil && ts.UnixMicro() == rec.Cursor.UpdatedAt {
			t.Errorf("%s: UpdatedAt equals the status timestamp (S1)", st.what)
		}
	}
	e.tick(5)
	got, err := e.s.Replace(e.ctx, clone(rec.Task), rec.Revision)
	rec = e.advanced(t, "conditional Replace", rec, got, err)
	e.tick(5)
	got, err = e.s.AppendHistory(e.ctx, sp.id, newMessage("appended-1"))
	rec = e.advanced(t, "AppendHistory", rec, got, err)
	if n := len(rec.Task.History); n == 0 || rec.Task.History[n-1].ID != "appended-1" {
		t.Errorf("AppendHistory: last message is not the appended one")
	}
	e.tick(5)
	got, err = e.s.Cancel(e.ctx, sp.id)
	e.advanced(t, "Cancel", rec, got, err)
}

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
	// A negative expected revision never matches: SPEC S7 makes it a
	// conflict; rejecting it as invalid input is accepted too.
	e.tick(10)
	_, err = e.s.Replace(e.ctx, bad(func(c *a2a.Task) { c.Metadata["owner"] = "mallory" }), -1)
	if !errors.Is(err, engine.ErrRevisionConflict) && !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("Replace with expected revision -1: %v, want ErrRevisionConflict or ErrInvalidArgument", err)
	}
	e.expectUnchanged(t, "Replace with expected revision -1", before)
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

func testClockBackward(t testing.TB, e *env) { // S4
	e.clock.Set(1000)
	rec := e.mustCreate(t, task("a", "ctx"))
	if rec.Cursor.UpdatedAt != 1000 {
		t.Fatalf("Create at clock 1000: UpdatedAt %d", rec.Cursor.UpdatedAt)
	}
	e.clock.Set(500) // backward
	got, err := e.s.Replace(e.ctx, clone(rec.Task), 0)
	rec = e.advanced(t, "Replace with the clock behind", rec, got, err)
	if rec.Cursor.UpdatedAt != 1001 {
		t.Errorf("Replace with clock 500 after 1000: UpdatedAt %d, want 1001", rec.Cursor.UpdatedAt)
	}
	got, err = e.s.AppendHistory(e.ctx, "a", newMessage("m-back"))
	rec = e.advanced(t, "AppendHistory with the clock behind", rec, got, err)
	got, err = e.s.Replace(e.ctx, clone(rec.Task), rec.Revision)
	rec = e.advanced(t, "conditional Replace with the clock behind", rec, got, err)
	got, err = e.s.Cancel(e.ctx, "a")
	rec = e.advanced(t, "Cancel with the clock behind", rec, got, err)
	if rec.Cursor.UpdatedAt != 1004 {
		t.Errorf("after four mutations at clock 500: UpdatedAt %d, want 1004", rec.Cursor.UpdatedAt)
	}
	// Create uses clock() as it reads, even behind other tasks.
	b := e.mustCreate(t, task("b", "ctx"))
	if b.Cursor.UpdatedAt != 500 {
		t.Errorf("Create at clock 500: UpdatedAt %d, want 500", b.Cursor.UpdatedAt)
	}
	e.clock.Set(5000) // forward again: the clock wins
	got, err = e.s.Replace(e.ctx, clone(b.Task), 0)
	b = e.advanced(t, "Replace with the clock ahead", b, got, err)
	if b.Cursor.UpdatedAt != 5000 {
		t.Errorf("Replace at clock 5000: UpdatedAt %d", b.Cursor.UpdatedAt)
	}
	resp := e.mustList(t, engine.ListRequest{})
	if got, want := ids(resp.Tasks), []a2a.TaskID{"b", "a"}; !slices.Equal(got, want) {
		t.Errorf("list order %q, want %q", got, want)
	}
}

func testNegativeClock(t testing.TB, e *env) { // S5
	e.clock.Set(-100)
	rec := e.mustCreate(t, task("neg", "ctx"))
	if rec.Cursor.UpdatedAt != 0 {
		t.Errorf("Create at clock -100: UpdatedAt %d, want 0", rec.Cursor.UpdatedAt)
	}
	e.clock.Set(math.MinInt64)
	got, err := e.s.Replace(e.ctx, clone(rec.Task), 0)
	rec = e.advanced(t, "Replace at clock MinInt64", rec, got, err)
	if rec.Cursor.UpdatedAt != 1 {
		t.Errorf("Replace at clock MinInt64 after 0: UpdatedAt %d, want 1", rec.Cursor.UpdatedAt)
	}
	other := e.mustCreate(t, task("neg2", "ctx"))
	if other.Cursor.UpdatedAt != 0 {
		t.Errorf("Create at clock MinInt64: UpdatedAt %d, want 0", other.Cursor.UpdatedAt)
	}
	tasks, _ := e.traverse(t, engine.ListRequest{PageSize: 1}, 2)
	if got, want := ids(tasks), []a2a.TaskID{"neg", "neg2"}; !slices.Equal(got, want) {
		t.Errorf("traversal %q, want %q", got, want)
	}
}

func testMaxTime(t testing.TB, e *env) { // S5
	// Reachable by the clock.
	e.clock.Set(math.MaxInt64)
	top := e.mustCreate(t, spec{id: "top", ctx: "ctx", ts: statusAt(0), history: 2, artifacts: 1, tag: "v1"}.build())
	if top.Cursor.UpdatedAt != math.MaxInt64 {
		t.Fatalf("Create at clock MaxInt64: UpdatedAt %d", top.Cursor.UpdatedAt)
	}
	// Reachable by old+1.
	e.clock.Set(math.MaxInt64 - 1)
	edge := e.mustCreate(t, spec{id: "edge", ctx: "ctx", ts: statusAt(0), history: 2, artifacts: 1, tag: "v1"}.build())
	e.clock.Set(0)
	got, err := e.s.Replace(e.ctx, clone(edge.Task), 0)
	edge = e.advanced(t, "Replace onto MaxInt64", edge, got, err)
	if edge.Cursor.UpdatedAt != math.MaxInt64 {
		t.Fatalf("Replace at MaxInt64-1: UpdatedAt %d, want MaxInt64", edge.Cursor.UpdatedAt)
	}

	for _, before := range []engine.Record{top, edge} {
		id := before.Task.ID
		for _, clk := range []int64{0, math.MaxInt64} {
			e.clock.Set(clk)
			next := clone(before.Task)
			next.Metadata["owner"] = "bob"
			_, err := e.s.Replace(e.ctx, next, 0)
			expectErr(t, "Replace at MaxInt64", err, engine.ErrInternal)
			_, err = e.s.Replace(e.ctx, next, before.Revision)
			expectErr(t, "conditional Replace at MaxInt64", err, engine.ErrInternal)
			_, err = e.s.AppendHistory(e.ctx, id, newMessage("new-at-max"))
			expectErr(t, "AppendHistory at MaxInt64", err, engine.ErrInternal)
			_, err = e.s.Cancel(e.ctx, id)
			expectErr(t, "Cancel at MaxInt64", err, engine.ErrInternal)
			e.expectUnchanged(t, "failed mutations at MaxInt64", before)
			got, err := e.s.AppendHistory(e.ctx, id, newMessage(before.Task.History[0].ID))
			if err != nil {
				t.Errorf("deduplicated AppendHistory at MaxInt64: %v", err)
			} else if d := diffRecord(got, before); d != "" {
				t.Errorf("deduplicated AppendHistory at MaxInt64 returned another record: %s", d)
			}
			e.expectUnchanged(t, "deduplicated AppendHistory at MaxInt64", before)
		}
	}
	// Tokens at MaxInt64 page normally.
	e.clock.Set(10)
	e.mustCreate(t, task("low", "ctx"))
	tasks, cursors := e.traverse(t, engine.ListRequest{PageSize: 1}, 3)
	if got, want := ids(tasks), []a2a.TaskID{"top", "edge", "low"}; !slices.Equal(got, want) {
		t.Errorf("traversal %q, want %q", got, want)
	}
	if len(cursors) == 3 && (cursors[0].UpdatedAt != math.MaxInt64 || cursors[1].UpdatedAt != math.MaxInt64) {
		t.Errorf("cursors %v, want MaxInt64 for the first two", cursors)
	}
}

// orderIDs returns test IDs whose byte order differs from naive orders:
// prefixes, multi-byte UTF-8 and, with binary IDs, NUL and 0xFF bytes.
func orderIDs(binary bool) []a2a.TaskID {
	out := []a2a.TaskID{"a", "ab", "a0", "B", "b", "z", "é", "ü", "~", "A-1", "a-1", "aa"}
	if binary {
		out = append(out, "\x00", "\x00\x00", "a\x00", "a\x00b", "\xff", "\xff\x00", "\xfe\xff", "\x80")
	}
	return out
}

// byteOrder returns ids in list order for equal times: bytes descending.
func byteOrder(in []a2a.TaskID) []a2a.TaskID {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b a2a.TaskID) int { return strings.Compare(string(b), string(a)) })
	return out
}

func testEqualTimes(t testing.TB, e *env) { // S6
	all := orderIDs(e.h.BinaryIDs)
	shuffled := slices.Clone(all)
	slices.SortFunc(shuffled, func(a, b a2a.TaskID) int { return strings.Compare(string(a[len(a)-1:]), string(b[len(b)-1:])) })
	e.clock.Set(7_000)
	for _, id := range shuffled {
		e.mustCreate(t, task(id, "ctx"))
	}
	want := byteOrder(all)
	resp := e.mustList(t, engine.ListRequest{PageSize: 100})
	if got := ids(resp.Tasks); !slices.Equal(got, want) {
		t.Errorf("equal-time order %q, want bytes descending %q", got, want)
	}
	for _, ps := range []int{1, 2, 3} {
		tasks, _ := e.traverse(t, engine.ListRequest{PageSize: ps}, len(all))
		if got := ids(tasks); !slices.Equal(got, want) {
			t.Errorf("page size %d traversal %q, want %q", ps, got, want)
		}
	}
	// A mutation landing on another task's time sorts by ID there.
	e.clock.Set(6_000)
	low := e.mustCreate(t, task("m-low", "ctx"))
	e.clock.Set(7_000)
	if _, err := e.s.Replace(e.ctx, clone(low.Task), 0); err != nil {
		t.Fatal(err)
	}
	want = byteOrder(append(slices.Clone(all), "m-low"))
	resp = e.mustList(t, engine.ListRequest{PageSize: 100})
	if got := ids(resp.Tasks); !slices.Equal(got, want) {
		t.Errorf("after a mutation to an equal time: order %q, want %q", got, want)
	}
}

func testOrder(t testing.TB, e *env) { // S6 with the store's own clock
	var recs []engine.Record
	for i, id := range orderIDs(e.h.BinaryIDs) {
		if e.clock != nil && i%3 != 0 {
			e.tick(1)
		}
		recs = append(recs, e.mustCreate(t, task(id, "ctx")))
	}
	for i := 0; i < len(recs); i += 4 {
		e.tick(1)
		got, err := e.s.Replace(e.ctx, clone(recs[i].Task), 0)
		recs[i] = e.advanced(t, "Replace", recs[i], got, err)
	}
	slices.SortFunc(recs, func(a, b engine.Record) int { return a.Cursor.Compare(b.Cursor) })
	tasks, cursors := e.traverse(t, engine.ListRequest{PageSize: 3}, len(recs))
	if len(tasks) != len(recs) {
		t.Fatalf("traversal returned %d tasks, want %d", len(tasks), len(recs))
	}
	for i, r := range recs {
		if cursors[i] != r.Cursor {
			t.Errorf("position %d: %s, want %s (UpdatedAt desc, ID bytes desc)", i, fmtCursor(cursors[i]), fmtCursor(r.Cursor))
		}
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
