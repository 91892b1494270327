package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// The data set clause tests list, and the pages it should give.

// populate creates n tasks in contexts ctx-0..ctx-2 with varied states,
// status timestamps (every fifth has none), history and artifacts.
func (e *env) populate(t testing.TB, n int) {
	t.Helper()
	states := allStates
	for i := range n {
		sp := spec{
			id:        a2a.TaskID(fmt.Sprintf("task-%03d", i)),
			ctx:       fmt.Sprintf("ctx-%d", i%3),
			state:     states[i%len(states)],
			ts:        statusAt(i % 7),
			history:   i % 4,
			artifacts: i % 3,
			tag:       "v1",
		}
		if i%5 == 4 {
			sp.ts = nil
		}
		e.mustCreate(t, sp.build())
		if i%4 != 3 { // some equal times with an injected clock
			e.tick(1)
		}
	}
}

// snapshot is every task of a quiet store in list order, read in one page
// and checked against Get.
type snapshot struct {
	tasks   []*a2a.Task
	cursors []engine.Cursor
}

func (e *env) snapshot(t testing.TB) snapshot {
	t.Helper()
	resp := e.mustList(t, engine.ListRequest{PageSize: specMaxPageSize, IncludeArtifacts: true})
	if resp.NextPageToken != "" {
		t.Fatal("snapshot: more than one page of tasks")
	}
	for i, tk := range resp.Tasks {
		if r := e.mustGet(t, tk.ID); r.Cursor != resp.TaskCursors[i] || canon(r.Task) != canon(tk) {
			t.Fatalf("List and Get disagree on %q: cursor %s vs %s", string(tk.ID), fmtCursor(resp.TaskCursors[i]), fmtCursor(r.Cursor))
		}
	}
	return snapshot{resp.Tasks, resp.TaskCursors}
}

// expect returns the IDs of the page after boundary (nil = start) of the
// tasks keep accepts, at most size of them, and whether more follow.
func (s snapshot) expect(boundary *engine.Cursor, keep func(*a2a.Task) bool, size int) ([]a2a.TaskID, bool) {
	var out []a2a.TaskID
	for i, tk := range s.tasks {
		if keep != nil && !keep(tk) {
			continue
		}
		if boundary != nil && s.cursors[i].Compare(*boundary) <= 0 {
			continue
		}
		if len(out) == size {
			return out, true
		}
		out = append(out, tk.ID)
	}
	return out, false
}

// expectPage checks one page against the snapshot.
func (e *env) expectPage(t testing.TB, what string, s snapshot, req engine.ListRequest, keep func(*a2a.Task) bool) *engine.ListResponse {
	t.Helper()
	var boundary *engine.Cursor
	if req.PageToken != "" {
		c, ok := specBoundary(req.PageToken)
		if !ok {
			t.Fatalf("%s: bad test token %q", what, req.PageToken)
		}
		boundary = &c
	}
	size := req.PageSize
	if size == 0 {
		size = specDefaultPageSize
	}
	want, more := s.expect(boundary, keep, size)
	resp := e.mustList(t, req)
	if got := ids(resp.Tasks); !slices.Equal(got, want) {
		t.Errorf("%s: page %q, want %q (L1)", what, got, want)
	}
	if (resp.NextPageToken != "") != more {
		t.Errorf("%s: next token %q, want one: %v (T6)", what, resp.NextPageToken, more)
	}
	return resp
}
