package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// Pages filtered by status, alone, with the owner (every list under
// authz.OwnerPolicy) and with a context (C7): their order and tokens, a
// live traversal under churn that moves tasks in and out of the state,
// and, on a store that reports ListResponse.Stats (Harness.ListStats),
// what each page reads.

// The filtered data set: filteredN tasks, the filteredRare oldest in the
// rare state, the rest alternating between two common ones.
const (
	filteredN    = 90
	filteredRare = 9
)

var (
	stateRare   = a2a.TaskStateInputRequired
	stateEven   = a2a.TaskStateWorking
	stateOdd    = a2a.TaskStateCompleted
	stateAbsent = a2a.TaskStateRejected // no task of the data set has it
)

// filteredOwners are the owners of the filtered data set's tasks, task i
// of filteredOwners[i%3] ("" = none), on an OwnerStore.
var filteredOwners = []string{"alice", "bob", ""}

// populateFiltered creates the filtered data set: task i ("f-000"…) in
// context "fc-<i%3>", of owner filteredOwners[i%3] on an OwnerStore, in
// the rare state for the oldest filteredRare, otherwise in stateEven or
// stateOdd by i's parity; some share a time (with an injected clock).
// It returns the number of tasks of each context and of each (owner,
// context).
func (e *env) populateFiltered(t testing.TB) {
	t.Helper()
	for i := range filteredN {
		st := stateEven
		switch {
		case i < filteredRare:
			st = stateRare
		case i%2 == 1:
			st = stateOdd
		}
		sp := spec{id: a2a.TaskID(fmt.Sprintf("f-%03d", i)), ctx: fmt.Sprintf("fc-%d", i%3), state: st, ts: statusAt(i % 5), history: i % 3, tag: "v1"}
		if e.o != nil {
			e.mustCreateOwned(t, sp.build(), filteredOwners[i%3])
		} else {
			e.mustCreate(t, sp.build())
		}
		if i%4 != 3 {
			e.tick(1)
		}
	}
}

// keepFiltered returns the snapshot filter of a request filtering by
// status, context and owner (each "" for none).
func (s snapshot) keepFiltered(req engine.ListRequest) func(*a2a.Task) bool {
	return func(tk *a2a.Task) bool {
		return (req.Status == "" || tk.Status.State == req.Status) &&
			(req.ContextID == "" || tk.ContextID == req.ContextID) &&
			(req.Owner == "" || s.owner[tk.ID] == req.Owner)
	}
}

// statusFilters are the status-filtered requests the clauses list: status
// alone, with a context, and on an OwnerStore with an owner and with an
// owner and a context, for the rare state, a common one and one no task
// has.
func (e *env) statusFilters() []engine.ListRequest {
	var reqs []engine.ListRequest
	for _, st := range []a2a.TaskState{stateRare, stateEven, stateAbsent} {
		reqs = append(reqs, engine.ListRequest{Status: st}, engine.ListRequest{Status: st, ContextID: "fc-1"})
		if e.o != nil {
			reqs = append(reqs,
				engine.ListRequest{Status: st, Owner: "alice"},
				engine.ListRequest{Status: st, Owner: "bob", ContextID: "fc-1"},
				engine.ListRequest{Status: st, Owner: "alice", ContextID: "fc-1"}, // alice has no task there
				engine.ListRequest{Status: st, Owner: "nobody"})
		}
	}
	return reqs
}

func testFilteredPages(t testing.TB, e *env) { // C7, L1, L2
	e.populateFiltered(t)
	check := func(when string) {
		s := e.snapshot(t)
		for _, req := range e.statusFilters() {
			e.expectFilter(t, s, when+" "+fmtReq(req), req, s.keepFiltered(req))
		}
	}
	check("fresh")
	// Move tasks between states, each way, and delete one of each state:
	// the pages follow (a status-ordered path moves with the task).
	e.tick(1)
	e.setState(t, "f-050", stateRare)   // common into rare
	e.setState(t, "f-002", stateOdd)    // rare into common
	e.setState(t, "f-051", stateEven)   // common into common
	e.setState(t, "f-004", stateRare)   // rare, rewritten in place
	e.setState(t, "f-061", stateAbsent) // into a state no task had
	for _, id := range []a2a.TaskID{"f-006", "f-070", "f-071"} {
		if err := e.s.Delete(e.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.s.Cancel(e.ctx, "f-072"); err != nil {
		t.Fatal(err)
	}
	check("after moves")
}

// setState replaces task id with its content in state st (O2: its owner
// stays).
func (e *env) setState(t testing.TB, id a2a.TaskID, st a2a.TaskState) {
	t.Helper()
	tk := e.mustGet(t, id).Task
	tk.Status.State = st
	if _, err := e.s.Replace(e.ctx, tk, 0); err != nil {
		t.Fatalf("Replace(%q) into %s: %v", string(id), st, err)
	}
}

func testFilteredTraversal(t testing.TB, e *env) { // L7 under a status filter, C7
	e.populateFiltered(t)
	reqs := []engine.ListRequest{{Status: stateEven, PageSize: 3}, {Status: stateOdd, ContextID: "fc-2", PageSize: 2}}
	if e.o != nil {
		reqs = append(reqs, engine.ListRequest{Status: stateOdd, Owner: "alice", PageSize: 2})
	}
	next := 0 // names the tasks the traversals create
	for _, req := range reqs {
		name := fmtReq(req)
		s := e.snapshot(t)
		keep := s.keepFiltered(req)
		start := map[a2a.TaskID]bool{}
		var order []a2a.TaskID // start's tasks in list order
		for _, tk := range s.tasks {
			if keep(tk) {
				start[tk.ID] = true
				order = append(order, tk.ID)
			}
		}
		if len(order) < 8 {
			t.Fatalf("%s: %d matching tasks, too few to test", name, len(order))
		}
		c := newTravCheck(start)
		gone := map[a2a.TaskID]bool{} // deleted, or moved out of the state
		for page := 0; ; page++ {
			resp := e.mustList(t, req)
			if err := c.page(resp); err != nil {
				t.Fatalf("%s page %d: %v", name, page, err)
			}
			for i, tk := range resp.Tasks {
				if tk.Status.State != req.Status || req.ContextID != "" && tk.ContextID != req.ContextID ||
					req.Owner != "" && resp.TaskOwners[i] != req.Owner {
					t.Errorf("%s page %d: task %q (%s, %q) does not match the filter (L2)", name, page, string(tk.ID), tk.Status.State, tk.ContextID)
				}
				if gone[tk.ID] {
					t.Errorf("%s page %d: task %q listed after it was deleted or left the state", name, page, string(tk.ID))
				}
			}
			if resp.NextPageToken == "" {
				break
			}
			if page > len(order) {
				t.Fatalf("%s: the traversal does not end", name)
			}
			req.PageToken = resp.NextPageToken
			// Between pages: rewrite a seen task in its state (it moves
			// ahead of the boundary: never seen again), move an unseen one
			// out of the state, delete another, move a task of another
			// state into this one, and create one in the state.
			e.tick(1)
			seen := resp.Tasks[0].ID
			e.setState(t, seen, req.Status)
			c.touched[seen] = true
			unseen := slices.DeleteFunc(slices.Clone(order), func(id a2a.TaskID) bool { return c.seen[id] > 0 || c.touched[id] })
			if n := len(unseen); n > 2 {
				out := unseen[n-1] // the oldest: still ahead of the traversal
				e.setState(t, out, stateAbsent)
				c.touched[out], gone[out] = true, true
				if page%2 == 0 {
					del := unseen[n-2]
					if err := e.s.Delete(e.ctx, del); err != nil {
						t.Fatal(err)
					}
					c.touched[del], gone[del] = true, true
				}
			}
			for _, tk := range s.tasks {
				if !keep(tk) && !c.touched[tk.ID] && tk.Status.State != req.Status {
					e.setState(t, tk.ID, req.Status)
					c.touched[tk.ID] = true
					break
				}
			}
			sp := spec{id: a2a.TaskID(fmt.Sprintf("fnew-%03d", next)), ctx: req.ContextID, state: req.Status, tag: "v1"}
			if sp.ctx == "" {
				sp.ctx = "fc-0"
			}
			next++
			if e.o != nil {
				e.mustCreateOwned(t, sp.build(), req.Owner)
			} else {
				e.mustCreate(t, sp.build())
			}
		}
		if err := c.finish(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if len(gone) < 2 {
			t.Fatalf("%s: the traversal moved too little to test: %d tasks gone", name, len(gone))
		}
	}
}

func testFilteredTokens(t testing.TB, e *env) { // T7 across status filters, C7
	e.populateFiltered(t)
	s := e.snapshot(t)
	from := []engine.ListRequest{{}, {Status: stateEven}, {Status: stateOdd, ContextID: "fc-0"}}
	to := []engine.ListRequest{{}, {Status: stateEven}, {Status: stateOdd}, {Status: stateRare}, {Status: stateAbsent}, {Status: stateEven, ContextID: "fc-1"}, {ContextID: "fc-2"}}
	if e.o != nil {
		from = append(from, engine.ListRequest{Status: stateEven, Owner: "alice"}, engine.ListRequest{Owner: "bob"})
		to = append(to, engine.ListRequest{Status: stateEven, Owner: "alice"}, engine.ListRequest{Status: stateOdd, Owner: "bob"},
			engine.ListRequest{Status: stateEven, Owner: "bob", ContextID: "fc-1"}, engine.ListRequest{Owner: "alice"})
	}
	for _, f := range from {
		// The tokens of a traversal's first and second pages under f,
		// each reused under every other filter.
		f.PageSize = 5
		first := e.mustList(t, f)
		f.PageToken = first.NextPageToken
		second := e.mustList(t, f)
		for _, tok := range []string{first.NextPageToken, second.NextPageToken} {
			if tok == "" {
				t.Fatalf("%s: no token to reuse", fmtReq(f))
			}
			for _, req := range to {
				req.PageSize, req.PageToken = 4, tok
				e.expectPage(t, fmt.Sprintf("token of %s under %s", fmtReq(f), fmtReq(req)), s, req, s.keepFiltered(req))
			}
		}
	}
}

func testFilteredCost(t testing.TB, e *env) { // C7, C2
	e.populateFiltered(t)
	s := e.snapshot(t)
	// The tasks of a context, and of an owner in it: what a page with a
	// context may read at most.
	in := func(req engine.ListRequest) int {
		return countIf(s.tasks, s.keepFiltered(engine.ListRequest{ContextID: req.ContextID, Owner: req.Owner}))
	}
	reqs := []engine.ListRequest{{PageSize: 5}, {PageSize: 2, Projection: engine.ProjectionLight}}
	for _, r := range e.statusFilters() {
		for _, size := range []int{1, 4} {
			r.PageSize = size
			reqs = append(reqs, r)
		}
	}
	r := engine.ListRequest{Status: stateRare, PageSize: 2, Projection: engine.ProjectionLight}
	reqs = append(reqs, r)
	for _, req := range reqs {
		name := fmtReq(req)
		total := 0 // matching tasks listed
		for page := 0; ; page++ {
			resp := e.mustList(t, req)
			examined := resp.Stats.Examined
			switch {
			case req.ContextID != "":
				if limit := in(req); examined > limit {
					t.Errorf("%s page %d: examined %d entries, more than the %d tasks of its context (C7)", name, page, examined, limit)
				}
			case examined > req.PageSize+1 || resp.NextPageToken != "" && examined != req.PageSize+1:
				t.Errorf("%s page %d: examined %d entries for %d tasks (more: %v), want PageSize+1 = %d at most, exactly when more follow (C7, C2)",
					name, page, examined, len(resp.Tasks), resp.NextPageToken != "", req.PageSize+1)
			}
			if req.Status == "" && page == 0 && examined == 0 {
				t.Fatalf("%s: Stats.Examined is 0: the store does not report ListStats (Harness.ListStats)", name)
			}
			total += len(resp.Tasks)
			if resp.NextPageToken == "" {
				break
			}
			if page > filteredN {
				t.Fatalf("%s: the traversal does not end", name)
			}
			req.PageToken = resp.NextPageToken
			if req.Status == "" { // unfiltered: the first two pages tell
				break
			}
		}
		if want := countIf(s.tasks, s.keepFiltered(req)); req.Status != "" && total != want {
			t.Errorf("%s: %d tasks listed, want %d (L1)", name, total, want)
		}
	}
}
