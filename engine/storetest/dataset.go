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
	for i := range n {
		e.mustCreate(t, populateSpec(i).build())
		if i%4 != 3 { // some equal times with an injected clock
			e.tick(1)
		}
	}
}

// populateSpec is populate's task i.
func populateSpec(i int) spec {
	sp := spec{
		id:        a2a.TaskID(fmt.Sprintf("task-%03d", i)),
		ctx:       fmt.Sprintf("ctx-%d", i%3),
		state:     allStates[i%len(allStates)],
		ts:        statusAt(i % 7),
		history:   i % 4,
		artifacts: i % 3,
		tag:       "v1",
	}
	if i%5 == 4 {
		sp.ts = nil
	}
	return sp
}

// populateOwned creates populate's tasks, each for an owner (O1): task i
// belongs to populateOwners[i%5], so alice has two tasks in five, bob and
// carol one each, and one in five has no owner. Every sixth task has no
// status timestamp (whatever its owner), and every tenth (one of carol's)
// is in ctx-carol, a context no other owner uses.
func (e *env) populateOwned(t testing.TB, n int) {
	t.Helper()
	for i := range n {
		sp := populateSpec(i)
		if sp.ts = statusAt(i % 7); i%6 == 5 {
			sp.ts = nil
		}
		if i%10 == 3 {
			sp.ctx = "ctx-carol"
		}
		e.mustCreateOwned(t, sp.build(), populateOwners[i%len(populateOwners)])
		if i%4 != 3 {
			e.tick(1)
		}
	}
}

// populateOwners are the owners populateOwned draws from ("" = none).
var populateOwners = []string{"alice", "bob", "alice", "carol", ""}

// snapshot is every task of a quiet store in list order, read in one page
// and checked against Get, with the owners of an OwnerStore's tasks.
type snapshot struct {
	tasks   []*a2a.Task
	cursors []engine.Cursor
	owner   map[a2a.TaskID]string // nil unless the store records owners
}

func (e *env) snapshot(t testing.TB) snapshot {
	t.Helper()
	resp := e.mustList(t, engine.ListRequest{PageSize: specMaxPageSize, IncludeArtifacts: true})
	if resp.NextPageToken != "" {
		t.Fatal("snapshot: more than one page of tasks")
	}
	s := snapshot{tasks: resp.Tasks, cursors: resp.TaskCursors}
	if e.o != nil {
		s.owner = map[a2a.TaskID]string{}
	}
	for i, tk := range resp.Tasks {
		r := e.mustGet(t, tk.ID)
		if r.Cursor != resp.TaskCursors[i] || canon(r.Task) != canon(tk) {
			t.Fatalf("List and Get disagree on %q: cursor %s vs %s", string(tk.ID), fmtCursor(resp.TaskCursors[i]), fmtCursor(r.Cursor))
		}
		if s.owner != nil {
			if r.Owner != resp.TaskOwners[i] {
				t.Fatalf("List and Get disagree on the owner of %q: %q vs %q (O5)", string(tk.ID), resp.TaskOwners[i], r.Owner)
			}
			s.owner[tk.ID] = r.Owner
		}
	}
	return s
}

// byOwner returns a filter keeping the tasks of owner (any owner for "").
func (s snapshot) byOwner(owner string) func(*a2a.Task) bool {
	return func(tk *a2a.Task) bool { return owner == "" || s.owner[tk.ID] == owner }
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
