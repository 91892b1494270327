package storetest

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// The conditional writes of an engine.ConditionalStore (CancelIf,
// AppendHistoryIf, DeleteIf), the clauses written on that interface: on
// the expected revision exactly the unconditional write; on another
// revision ErrRevisionConflict, compared first, and nothing changes; a
// missing task ErrNotFound; bad input ErrInvalidArgument before the store
// is read; and the comparison atomic with the write.

// sameContent fails unless got is want's content under want's ID: two
// tasks written alike from the same content at the same times.
func sameContent(t testing.TB, what string, got, want engine.Record) {
	t.Helper()
	g := *got.Task
	g.ID = want.Task.ID
	if canon(&g) != canon(want.Task) || got.Revision != want.Revision || got.Cursor.UpdatedAt != want.Cursor.UpdatedAt {
		t.Errorf("%s differs from the unconditional write:\n got rev %d at %d %s\nwant rev %d at %d %s", what,
			got.Revision, got.Cursor.UpdatedAt, canon(&g), want.Revision, want.Cursor.UpdatedAt, canon(want.Task))
	}
}

// twins creates two tasks of equal content and times (with an injected
// clock), each moved to revision 2 by a Replace: one for the unconditional
// write, one for the conditional.
func (e *env) twins(t testing.TB, name string, st a2a.TaskState) (u, c engine.Record) {
	t.Helper()
	var recs [2]engine.Record
	sp := spec{id: a2a.TaskID(name), ctx: "ctx-" + name, state: st, ts: statusAt(1), history: 2, artifacts: 1, tag: name}
	for i, id := range []a2a.TaskID{a2a.TaskID(name + "-u"), a2a.TaskID(name + "-c")} {
		sp.tag = name
		tk := sp.build()
		tk.ID = id
		e.mustCreate(t, tk)
		sp.tag = name + "-v2"
		tk = sp.build()
		tk.ID = id
		got, err := e.s.Replace(e.ctx, tk, 1)
		if err != nil {
			t.Fatalf("Replace of %q: %v", id, err)
		}
		recs[i] = got
	}
	e.tick(10)
	return recs[0], recs[1]
}

func testIfMatch(t testing.TB, e *env) {
	// Each pair is written at one clock reading: with an injected clock
	// the conditional write must give the very record the unconditional
	// one gives; without, it must advance like it.
	u, c := e.twins(t, "cancel", a2a.TaskStateWorking)
	want, err := e.s.Cancel(e.ctx, u.Task.ID)
	want = e.advanced(t, "Cancel", u, want, err)
	got, err := e.c.CancelIf(e.ctx, c.Task.ID, c.Revision)
	got = e.advanced(t, "CancelIf on the current revision", c, got, err)
	if got.Task.Status.State != a2a.TaskStateCanceled || got.Task.Status.Timestamp == nil ||
		got.Task.Status.Timestamp.UnixMicro() != got.Cursor.UpdatedAt {
		t.Errorf("CancelIf: status %+v at %d, want canceled at UpdatedAt (S9)", got.Task.Status, got.Cursor.UpdatedAt)
	}
	if e.clock != nil {
		sameContent(t, "CancelIf", got, want)
	}

	u, c = e.twins(t, "append", a2a.TaskStateWorking)
	msg := newMessage("appended-if")
	want, err = e.s.AppendHistory(e.ctx, u.Task.ID, msg)
	want = e.advanced(t, "AppendHistory", u, want, err)
	got, err = e.c.AppendHistoryIf(e.ctx, c.Task.ID, msg, c.Revision)
	got = e.advanced(t, "AppendHistoryIf on the current revision", c, got, err)
	if n := len(got.Task.History); n != 3 || got.Task.History[n-1].ID != msg.ID {
		t.Errorf("AppendHistoryIf: history of %d messages, want the 2 before and %q last", n, msg.ID)
	}
	if e.clock != nil {
		sameContent(t, "AppendHistoryIf", got, want)
	}

	u, c = e.twins(t, "delete", a2a.TaskStateWorking)
	if err := e.s.Delete(e.ctx, u.Task.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := e.c.DeleteIf(e.ctx, c.Task.ID, c.Revision); err != nil {
		t.Fatalf("DeleteIf on the current revision: %v", err)
	}
	_, err = e.s.Get(e.ctx, c.Task.ID)
	expectErr(t, "Get after DeleteIf", err, engine.ErrNotFound)
	resp := e.mustList(t, engine.ListRequest{ContextID: "ctx-delete", IncludeTotalSize: true})
	if len(resp.Tasks) != 0 || resp.TotalSize != 0 {
		t.Errorf("list after Delete and DeleteIf: %s total %d, want none", pageIDs(resp), resp.TotalSize)
	}

	// Expected revision 0 is the unconditional write, at any revision.
	_, c = e.twins(t, "zero", a2a.TaskStateWorking)
	got, err = e.c.AppendHistoryIf(e.ctx, c.Task.ID, newMessage("zero-1"), 0)
	got = e.advanced(t, "AppendHistoryIf with revision 0", c, got, err)
	got2, err := e.c.CancelIf(e.ctx, c.Task.ID, 0)
	e.advanced(t, "CancelIf with revision 0", got, got2, err)
	if err := e.c.DeleteIf(e.ctx, c.Task.ID, 0); err != nil {
		t.Errorf("DeleteIf with revision 0: %v", err)
	}
	_, err = e.s.Get(e.ctx, c.Task.ID)
	expectErr(t, "Get after DeleteIf with revision 0", err, engine.ErrNotFound)
}

func testIfMismatch(t testing.TB, e *env) {
	_, c := e.twins(t, "m", a2a.TaskStateWorking) // at revision 2
	id := c.Task.ID
	total := e.mustList(t, engine.ListRequest{IncludeTotalSize: true}).TotalSize
	for _, rev := range []int64{1, 3, math.MaxInt64} {
		what := fmt.Sprintf(" on revision %d of a task at %d", rev, c.Revision)
		_, err := e.c.CancelIf(e.ctx, id, rev)
		expectErr(t, "CancelIf"+what, err, engine.ErrRevisionConflict)
		e.expectUnchanged(t, "CancelIf"+what, c)
		_, err = e.c.AppendHistoryIf(e.ctx, id, newMessage("mismatch"), rev)
		expectErr(t, "AppendHistoryIf"+what, err, engine.ErrRevisionConflict)
		e.expectUnchanged(t, "AppendHistoryIf"+what, c)
		err = e.c.DeleteIf(e.ctx, id, rev)
		expectErr(t, "DeleteIf"+what, err, engine.ErrRevisionConflict)
		e.expectUnchanged(t, "DeleteIf"+what, c)
	}
	resp := e.mustList(t, engine.ListRequest{IncludeTotalSize: true})
	if resp.TotalSize != total {
		t.Errorf("total after refused DeleteIf: %d, want %d", resp.TotalSize, total)
	}
}

func testIfMissing(t testing.TB, e *env) {
	gone := e.mustCreate(t, task("gone", "ctx"))
	if err := e.s.Delete(e.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []a2a.TaskID{"never", gone.Task.ID} {
		for _, rev := range []int64{0, 1, 2} {
			what := fmt.Sprintf(" of missing %q on revision %d", id, rev)
			_, err := e.c.CancelIf(e.ctx, id, rev)
			expectErr(t, "CancelIf"+what, err, engine.ErrNotFound)
			_, err = e.c.AppendHistoryIf(e.ctx, id, newMessage("m"), rev)
			expectErr(t, "AppendHistoryIf"+what, err, engine.ErrNotFound)
			expectErr(t, "DeleteIf"+what, e.c.DeleteIf(e.ctx, id, rev), engine.ErrNotFound)
		}
	}
	_, err := e.s.Get(e.ctx, "never")
	expectErr(t, "Get after conditional writes of a missing task", err, engine.ErrNotFound)
}

func testIfInvalid(t testing.TB, e *env) {
	rec := e.mustCreate(t, task("inv", "ctx"))
	for _, id := range []a2a.TaskID{"inv", "missing"} {
		what := fmt.Sprintf(" of %q on revision -1", id)
		_, err := e.c.CancelIf(e.ctx, id, -1)
		expectErr(t, "CancelIf"+what, err, engine.ErrInvalidArgument)
		_, err = e.c.AppendHistoryIf(e.ctx, id, newMessage("neg"), -1)
		expectErr(t, "AppendHistoryIf"+what, err, engine.ErrInvalidArgument)
		expectErr(t, "DeleteIf"+what, e.c.DeleteIf(e.ctx, id, -1), engine.ErrInvalidArgument)
		_, err = e.c.AppendHistoryIf(e.ctx, id, nil, rec.Revision)
		expectErr(t, "AppendHistoryIf of a nil message", err, engine.ErrInvalidArgument)
		_, err = e.c.AppendHistoryIf(e.ctx, id, &a2a.Message{Role: a2a.MessageRoleUser}, rec.Revision)
		expectErr(t, "AppendHistoryIf of a message without ID", err, engine.ErrInvalidArgument)
	}
	e.expectUnchanged(t, "invalid conditional writes", rec)
}

func testIfAppendDedup(t testing.TB, e *env) { // S3 with a condition
	_, c := e.twins(t, "dup", a2a.TaskStateWorking)
	dup := newMessage(c.Task.History[0].ID)
	got, err := e.c.AppendHistoryIf(e.ctx, c.Task.ID, dup, c.Revision)
	if err != nil {
		t.Fatalf("deduplicated AppendHistoryIf on the current revision: %v", err)
	}
	if d := diffRecord(got, c); d != "" {
		t.Errorf("deduplicated AppendHistoryIf returned another record than the current one: %s", d)
	}
	e.expectUnchanged(t, "deduplicated AppendHistoryIf", c)
	// On another revision the conflict comes first: no record, though the
	// message is in the history.
	got, err = e.c.AppendHistoryIf(e.ctx, c.Task.ID, dup, c.Revision-1)
	expectErr(t, "AppendHistoryIf of a known message on another revision", err, engine.ErrRevisionConflict)
	if got.Task != nil {
		t.Errorf("conflicting AppendHistoryIf returned a task: %s", canon(got.Task))
	}
	e.expectUnchanged(t, "conflicting deduplicated AppendHistoryIf", c)
}

func testIfCancelTerminal(t testing.TB, e *env) { // S3 with a condition
	for _, st := range terminalStates {
		_, c := e.twins(t, "term-"+string(st), st)
		_, err := e.c.CancelIf(e.ctx, c.Task.ID, c.Revision)
		expectErr(t, "CancelIf of a "+string(st)+" task on its revision", err, engine.ErrNotCancelable)
		_, err = e.c.CancelIf(e.ctx, c.Task.ID, c.Revision+1)
		expectErr(t, "CancelIf of a "+string(st)+" task on another revision", err, engine.ErrRevisionConflict)
		e.expectUnchanged(t, "refused CancelIf of a "+string(st)+" task", c)
	}
}

func testIfMaxTime(t testing.TB, e *env) { // S5 with a condition
	e.clock.Set(math.MaxInt64)
	top := e.mustCreate(t, spec{id: "top", ctx: "ctx", ts: statusAt(0), history: 2, tag: "v1"}.build())
	e.clock.Set(0)
	_, err := e.c.CancelIf(e.ctx, "top", top.Revision)
	expectErr(t, "CancelIf at MaxInt64", err, engine.ErrInternal)
	_, err = e.c.AppendHistoryIf(e.ctx, "top", newMessage("new-at-max"), top.Revision)
	expectErr(t, "AppendHistoryIf at MaxInt64", err, engine.ErrInternal)
	_, err = e.c.CancelIf(e.ctx, "top", top.Revision+1)
	expectErr(t, "CancelIf at MaxInt64 on another revision", err, engine.ErrRevisionConflict)
	_, err = e.c.AppendHistoryIf(e.ctx, "top", newMessage("new-at-max"), top.Revision+1)
	expectErr(t, "AppendHistoryIf at MaxInt64 on another revision", err, engine.ErrRevisionConflict)
	got, err := e.c.AppendHistoryIf(e.ctx, "top", newMessage(top.Task.History[0].ID), top.Revision)
	if err != nil || diffRecord(got, top) != "" {
		t.Errorf("deduplicated AppendHistoryIf at MaxInt64: %v %s", err, diffRecord(got, top))
	}
	e.expectUnchanged(t, "conditional writes at MaxInt64", top)
	if err := e.c.DeleteIf(e.ctx, "top", top.Revision); err != nil {
		t.Errorf("DeleteIf at MaxInt64: %v", err)
	}
}

// testIfRace: writers racing on one revision. The comparison and the
// write are one step, so exactly one write per revision wins and every
// other gets ErrRevisionConflict (or, racing a DeleteIf that won,
// ErrNotFound).
func testIfRace(t testing.TB, e *env) {
	const writers = 8
	rec := e.mustCreate(t, task("race", "ctx"))
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for w := range writers {
			wg.Go(func() {
				if round == 2 {
					errs[w] = e.c.DeleteIf(e.ctx, "race", rec.Revision)
					return
				}
				_, errs[w] = e.c.AppendHistoryIf(e.ctx, "race", newMessage(fmt.Sprintf("race-%d-%d", round, w)), rec.Revision)
			})
		}
		wg.Wait()
		won := 0
		for w, err := range errs {
			switch {
			case err == nil:
				won++
			case errClass(err) == engine.ErrRevisionConflict:
			case round == 2 && errClass(err) == engine.ErrNotFound:
			default:
				t.Errorf("round %d writer %d: %v, want success or ErrRevisionConflict", round, w, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d writers on revision %d succeeded, want exactly 1", round, won, rec.Revision)
		}
		if round == 2 {
			_, err := e.s.Get(e.ctx, "race")
			expectErr(t, "Get after the DeleteIf race", err, engine.ErrNotFound)
			return
		}
		now := e.mustGet(t, "race")
		if now.Revision != rec.Revision+1 || len(now.Task.History) != len(rec.Task.History)+1 {
			t.Fatalf("round %d: revision %d with %d messages after one append on revision %d with %d",
				round, now.Revision, len(now.Task.History), rec.Revision, len(rec.Task.History))
		}
		rec = now
	}
}
