package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/bulkload"
)

// bulkTask is task i of the bulk clause's load and its owner (on an
// OwnerStore): populate's mix of states, status timestamps, history and
// artifacts, over seven contexts.
func (e *env) bulkTask(i int) (*a2a.Task, string) {
	sp := populateSpec(i)
	sp.id, sp.ctx = a2a.TaskID(fmt.Sprintf("bulk-%05d", i)), fmt.Sprintf("ctx-%d", i%7)
	owner := ""
	if e.o != nil {
		owner = populateOwners[i%len(populateOwners)]
	}
	return sp.build(), owner
}

// testBulkLoad: X1 on the bulk path (engine/bulkload: through the
// store's engine.Importer when it has one, Create otherwise). A load of
// 450 tasks — a load that stopped there — then one of 1000 that resumes
// it (finding a batch whole, one in part, writing the rest): the store
// holds each task once, as generated, at revision 1 with its owner; a
// traversal returns them all in order (on an Importer, task i before task
// i-1: the times increase with i); the totals by state, context, owner
// and owner and state are exact; on a store keeping a log each task has
// its Create entry; a task created after the load is the newest; a third
// load finds everything and writes nothing. The invariant check runs at
// cleanup (and here, after the loads).
func testBulkLoad(t testing.TB, e *env) {
	const stopped, n = 450, 1000
	var clock engine.Clock
	if e.clock != nil {
		clock = e.clock.Now
	}
	load := func(n int) bulkload.Result {
		t.Helper()
		res, err := bulkload.Load(e.ctx, e.s, bulkload.Config{N: n, Batch: 300, Task: e.bulkTask, Clock: clock})
		if err != nil {
			t.Fatalf("bulk load of %d: %v", n, err)
		}
		return res
	}
	if res := load(stopped); res.Written != stopped || res.Found != 0 {
		t.Fatalf("first load: %+v, want %d written", res, stopped)
	}
	e.tick(2 * n) // a restart, later
	if res := load(n); res.Written != n-stopped || res.Found != stopped {
		t.Fatalf("resumed load: %+v, want %d written and %d found", res, n-stopped, stopped)
	}
	if c, ok := e.s.(Checker); ok {
		if err := c.CheckInvariants(); err != nil {
			t.Fatalf("CheckInvariants after the load: %v", err)
		}
	}
	_, imports := e.s.(engine.Importer)
	tasks, cursors := e.traverse(t, engine.ListRequest{PageSize: specMaxPageSize}, n)
	if len(tasks) != n {
		t.Fatalf("traversal of the loaded store: %d tasks, want %d", len(tasks), n)
	}
	seen := map[a2a.TaskID]bool{}
	for p, tk := range tasks {
		seen[tk.ID] = true
		if want, _ := e.bulkTask(n - 1 - p); imports && tk.ID != want.ID {
			t.Fatalf("traversal position %d: task %q at %s, want %q (times increasing with the load's order)", p, tk.ID, fmtCursor(cursors[p]), want.ID)
		}
	}
	want := map[string]int{}
	for i := range n {
		tk, owner := e.bulkTask(i)
		if !seen[tk.ID] {
			t.Fatalf("task %q missing from the traversal", tk.ID)
		}
		rec := e.mustGet(t, tk.ID)
		if rec.Revision != 1 || rec.Owner != owner || canon(rec.Task) != canon(tk) {
			t.Fatalf("task %q: revision %d, owner %q, %s; want 1, %q, %s", tk.ID, rec.Revision, rec.Owner, canon(rec.Task), owner, canon(tk))
		}
		e.checkBulkLog(t, rec)
		st := string(tk.Status.State)
		want["state="+st]++
		want["context="+tk.ContextID]++
		if e.o != nil && owner != "" {
			want["owner="+owner]++
			want["owner="+owner+"/state="+st]++
		}
	}
	total := func(req engine.ListRequest) int {
		req.PageSize, req.IncludeTotalSize = 1, true
		return e.mustList(t, req).TotalSize
	}
	if got := total(engine.ListRequest{}); got != n {
		t.Errorf("total %d, want %d", got, n)
	}
	for i := range n {
		tk, owner := e.bulkTask(i)
		st := tk.Status.State
		for key, req := range map[string]engine.ListRequest{
			"state=" + string(st):                     {Status: st},
			"context=" + tk.ContextID:                 {ContextID: tk.ContextID},
			"owner=" + owner:                          {Owner: owner},
			"owner=" + owner + "/state=" + string(st): {Owner: owner, Status: st},
		} {
			if n, ok := want[key]; ok {
				if got := total(req); got != n {
					t.Errorf("total %s: %d, want %d (O4, L5)", key, got, n)
				}
				delete(want, key) // each total once
			}
		}
	}
	after := e.mustCreate(t, task("bulk-after", "ctx-0"))
	if first := e.mustList(t, engine.ListRequest{PageSize: 1}); len(first.Tasks) != 1 || first.Tasks[0].ID != "bulk-after" {
		t.Errorf("a task created after the load (at %s) is not the newest: page 1 starts with %s", fmtCursor(after.Cursor), pageIDs(first))
	}
	if res := load(n); res.Written != 0 || res.Found != n {
		t.Errorf("load of a loaded store: %+v, want all found", res)
	}
}

// checkBulkLog checks, on a store keeping a log, that the loaded task of
// rec has exactly its Create entry (K7): revision 1, the whole task, at
// the task's time.
func (e *env) checkBulkLog(t testing.TB, rec engine.Record) {
	t.Helper()
	if e.l == nil {
		return
	}
	log, err := e.l.ReadLog(e.ctx, rec.Task.ID, 0, 10)
	if errors.Is(err, engine.ErrLogDisabled) {
		return
	}
	if err != nil || len(log) != 1 || log[0].Revision != 1 || log[0].Kind != engine.LogTask || log[0].Time != rec.Cursor.UpdatedAt || log[0].State != rec.Task.Status.State {
		t.Fatalf("log of loaded task %q at %s: %+v, %v; want its Create entry", rec.Task.ID, fmtCursor(rec.Cursor), log, err)
	}
	ev, err := log[0].Event(rec.Task.ID)
	if got, ok := ev.(*a2a.Task); err != nil || !ok || canon(got) != canon(rec.Task) {
		t.Fatalf("log entry of loaded task %q: %v, %v; want the task", rec.Task.ID, ev, err)
	}
}
