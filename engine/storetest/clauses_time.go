package storetest

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// Storage update time and order: S1, S2, S4–S6.

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
