package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// Task owners, for an engine.OwnerStore: O1–O5 (written on
// engine.OwnerStore). O6, what an owner-scoped page and total cost, is a
// cost clause: each backend checks it through ListResponse.Stats in its
// own tests.

func testOwnerRecorded(t testing.TB, e *env) { // O1, O2
	e.mustCreateOwned(t, task("a1", "ctx-a"), "alice")
	if r := e.mustCreate(t, task("p1", "ctx-a")); r.Owner != "" {
		t.Errorf("Create recorded owner %q, want none (O1)", r.Owner)
	}
	// Every operation returns the owner, and Get sees it afterwards.
	expect := func(what string, r engine.Record, err error, want string) engine.Record {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if r.Owner != want {
			t.Errorf("%s of %q: owner %q, want %q (O2)", what, string(r.Task.ID), r.Owner, want)
		}
		if g := e.mustGet(t, r.Task.ID); g.Owner != want {
			t.Errorf("Get after %s of %q: owner %q, want %q (O2)", what, string(r.Task.ID), g.Owner, want)
		}
		return r
	}
	owners := map[a2a.TaskID]string{"a1": "alice", "p1": ""}
	for _, id := range []a2a.TaskID{"a1", "p1"} {
		want := owners[id]
		r, err := e.s.Get(e.ctx, id)
		r = expect("Get", r, err, want)
		e.tick(1)
		r, err = e.s.Replace(e.ctx, clone(r.Task), 0)
		r = expect("Replace", r, err, want)
		e.tick(1)
		r, err = e.s.Replace(e.ctx, clone(r.Task), r.Revision)
		expect("conditional Replace", r, err, want)
		e.tick(1)
		r, err = e.s.AppendHistory(e.ctx, id, newMessage("owned-1"))
		expect("AppendHistory", r, err, want)
		r, err = e.s.AppendHistory(e.ctx, id, newMessage("owned-1"))
		expect("deduplicated AppendHistory", r, err, want)
		e.tick(1)
		r, err = e.s.Cancel(e.ctx, id)
		expect("Cancel", r, err, want)
	}
	// Every shape of page carries the owners (O5).
	for _, req := range []engine.ListRequest{{}, {Projection: engine.ProjectionLight}, {ContextID: "ctx-a"}, {Owner: "alice"},
		{ContextID: "ctx-a", Projection: engine.ProjectionLight}, {Owner: "alice", Projection: engine.ProjectionLight}} {
		resp := e.mustList(t, req)
		for i, tk := range resp.Tasks {
			if resp.TaskOwners[i] != owners[tk.ID] {
				t.Errorf("List(%s): task %q listed with owner %q, want %q (O5)", fmtReq(req), string(tk.ID), resp.TaskOwners[i], owners[tk.ID])
			}
		}
	}
	// Rejected CreateOwned calls change nothing, owners included.
	for _, id := range []a2a.TaskID{"a1", "p1"} {
		before := e.mustGet(t, id)
		e.tick(1)
		_, err := e.o.CreateOwned(e.ctx, task(id, "ctx-b"), "bob")
		expectErr(t, "CreateOwned of an existing ID", err, engine.ErrAlreadyExists)
		e.expectUnchanged(t, "CreateOwned of an existing ID", before)
	}
	bad := task("bad", "ctx-a")
	bad.Status.State = "TASK_STATE_BOGUS"
	_, err := e.o.CreateOwned(e.ctx, bad, "alice")
	expectErr(t, "CreateOwned with an unknown state", err, engine.ErrInvalidArgument)
	_, err = e.o.CreateOwned(e.ctx, nil, "alice")
	expectErr(t, "CreateOwned(nil)", err, engine.ErrInvalidArgument)
	_, err = e.s.Get(e.ctx, "bad")
	expectErr(t, "Get after a rejected CreateOwned", err, engine.ErrNotFound)
	// A task deleted and created again has its new owner.
	if err := e.s.Delete(e.ctx, "a1"); err != nil {
		t.Fatal(err)
	}
	e.mustCreateOwned(t, task("a1", "ctx-a"), "bob")
	if g := e.mustGet(t, "a1"); g.Owner != "bob" {
		t.Errorf("re-created task: owner %q, want bob", g.Owner)
	}
	if resp := e.mustList(t, engine.ListRequest{Owner: "alice", IncludeTotalSize: true}); len(resp.Tasks) != 0 || resp.TotalSize != 0 {
		t.Errorf("alice after her only task was deleted and re-created for bob: %s total %d", pageIDs(resp), resp.TotalSize)
	}
}

func testOwnerOutsideMetadata(t testing.TB, e *env) { // O1
	bare := task("m1", "ctx")
	bare.Metadata = nil
	claims := task("m2", "ctx")
	claims.Metadata = map[string]any{"a2astore.owner": "mallory", "owner": "eve", "tenant": "mallory"}
	plain := task("m3", "ctx")
	plain.Metadata = map[string]any{"a2astore.owner": "alice"}
	want := map[a2a.TaskID]*a2a.Task{"m1": clone(bare), "m2": clone(claims), "m3": clone(plain)}
	check := func(what string, r engine.Record) {
		t.Helper()
		if canon(r.Task) != canon(want[r.Task.ID]) {
			t.Errorf("%s of %q: the task is not as given (O1: the owner is never written into metadata)\n got %s\nwant %s",
				what, string(r.Task.ID), canon(r.Task), canon(want[r.Task.ID]))
		}
	}
	check("CreateOwned", e.mustCreateOwned(t, bare, "alice"))
	e.tick(1)
	check("CreateOwned", e.mustCreateOwned(t, claims, "alice"))
	e.tick(1)
	r := e.mustCreate(t, plain)
	check("Create", r)
	if r.Owner != "" {
		t.Errorf("Create of a task whose metadata names an owner recorded owner %q, want none (O1: never read from metadata)", r.Owner)
	}
	for id := range want {
		check("Get", e.mustGet(t, id))
	}
	for _, req := range []engine.ListRequest{{IncludeArtifacts: true}, {Owner: "alice", IncludeArtifacts: true}, {Owner: "alice", Projection: engine.ProjectionLight}} {
		for _, tk := range e.mustList(t, req).Tasks {
			w := want[tk.ID]
			if req.Projection == engine.ProjectionLight {
				w = &a2a.Task{ID: w.ID, ContextID: w.ContextID, Metadata: w.Metadata, Status: a2a.TaskStatus{State: w.Status.State, Timestamp: w.Status.Timestamp}}
			}
			if canon(tk) != canon(w) {
				t.Errorf("List(%s): task %q is not as given (O1)\n got %s\nwant %s", fmtReq(req), string(tk.ID), canon(tk), canon(w))
			}
		}
	}
	if got := ids(e.mustList(t, engine.ListRequest{Owner: "alice"}).Tasks); !slices.Equal(got, []a2a.TaskID{"m2", "m1"}) {
		t.Errorf("alice's tasks: %q, want [m2 m1] (O1: owners come from CreateOwned only)", got)
	}
	for _, o := range []string{"mallory", "eve"} {
		if resp := e.mustList(t, engine.ListRequest{Owner: o, IncludeTotalSize: true}); len(resp.Tasks) != 0 || resp.TotalSize != 0 {
			t.Errorf("owner %q, named only in metadata, lists %s total %d (O1)", o, pageIDs(resp), resp.TotalSize)
		}
	}
}

func testOwnerLimits(t testing.TB, e *env) { // O1, S8
	long := strings.Repeat("o", specMaxOwnerBytes)
	e.mustCreateOwned(t, task("l1", "ctx"), long)
	_, err := e.o.CreateOwned(e.ctx, task("l2", "ctx"), long+"o")
	expectErr(t, "CreateOwned with a 1025-byte owner", err, engine.ErrInvalidArgument)
	_, err = e.s.Get(e.ctx, "l2")
	expectErr(t, "Get after a rejected CreateOwned", err, engine.ErrNotFound)
	if resp := e.mustList(t, engine.ListRequest{Owner: long, IncludeTotalSize: true}); len(resp.Tasks) != 1 || resp.TotalSize != 1 {
		t.Errorf("filter by a 1024-byte owner: %s total %d", pageIDs(resp), resp.TotalSize)
	}
	_, err = e.s.List(e.ctx, &engine.ListRequest{Owner: long + "o"})
	expectErr(t, "List with a 1025-byte owner filter", err, engine.ErrInvalidArgument)
	if errors.Is(err, engine.ErrInvalidPageToken) {
		t.Errorf("List with a 1025-byte owner filter: reported as a bad token")
	}
	if !e.h.BinaryIDs {
		// A backend accepts the same bytes in owners as in IDs (O1, S8).
		for _, o := range binaryIDs {
			_, err := e.o.CreateOwned(e.ctx, task("b", "ctx"), string(o))
			expectErr(t, "CreateOwned with owner "+quote(o), err, engine.ErrInvalidArgument)
			_, err = e.s.List(e.ctx, &engine.ListRequest{Owner: string(o)})
			expectErr(t, "List with owner filter "+quote(o), err, engine.ErrInvalidArgument)
		}
		if resp := e.mustList(t, engine.ListRequest{IncludeTotalSize: true}); resp.TotalSize != 1 {
			t.Errorf("rejected CreateOwned calls stored something: total %d, want 1", resp.TotalSize)
		}
		return
	}
	// Owners of any bytes, some prefixes of others: each lists its own task
	// only, with or without a context filter.
	owners := []string{"a", "a\x00", "a\x00b", "a\x01", "\x00", "\xff\xfe", "bad\xc3\x28utf8"}
	for i, o := range owners {
		e.mustCreateOwned(t, task(a2a.TaskID(fmt.Sprintf("bin-%d", i)), "ctx\x00"), o)
		e.tick(1)
	}
	for i, o := range owners {
		id := a2a.TaskID(fmt.Sprintf("bin-%d", i))
		if g := e.mustGet(t, id); g.Owner != o {
			t.Errorf("Get(%s): owner %q, want %q", id, g.Owner, o)
		}
		for _, req := range []engine.ListRequest{{Owner: o}, {Owner: o, ContextID: "ctx\x00"}, {Owner: o, Status: a2a.TaskStateWorking}} {
			req.IncludeTotalSize = true
			resp := e.mustList(t, req)
			if got := ids(resp.Tasks); !slices.Equal(got, []a2a.TaskID{id}) || resp.TotalSize != 1 {
				t.Errorf("List(%s): %q total %d, want [%s] total 1 (O3)", fmtReq(req), got, resp.TotalSize, id)
			}
		}
	}
}

func testEmptyOwner(t testing.TB, e *env) { // O1, O3
	if r := e.mustCreate(t, task("u1", "ctx-a")); r.Owner != "" {
		t.Errorf("Create: owner %q, want none", r.Owner)
	}
	e.tick(1)
	e.mustCreateOwned(t, task("u2", "ctx-a"), "") // the same as Create
	e.tick(1)
	e.mustCreateOwned(t, task("o1", "ctx-a"), "alice")
	// Owner "" is no filter: every task, owned or not, listed and counted
	// alike.
	for _, req := range []engine.ListRequest{{}, {ContextID: "ctx-a"}, {Status: a2a.TaskStateWorking}, {Projection: engine.ProjectionLight}} {
		req.IncludeTotalSize = true
		resp := e.mustList(t, req)
		if got := ids(resp.Tasks); !slices.Equal(got, []a2a.TaskID{"o1", "u2", "u1"}) || resp.TotalSize != 3 {
			t.Errorf("List(%s): %q total %d, want [o1 u2 u1] total 3 (O3)", fmtReq(req), got, resp.TotalSize)
		}
		if !slices.Equal(resp.TaskOwners, []string{"alice", "", ""}) {
			t.Errorf("List(%s): owners %q, want [alice \"\" \"\"] (O5)", fmtReq(req), resp.TaskOwners)
		}
	}
	// Tasks without an owner are in no owner's list.
	if resp := e.mustList(t, engine.ListRequest{Owner: "alice", IncludeTotalSize: true}); !slices.Equal(ids(resp.Tasks), []a2a.TaskID{"o1"}) || resp.TotalSize != 1 {
		t.Errorf("alice: %s total %d, want [o1] total 1", pageIDs(resp), resp.TotalSize)
	}
}

func testReplaceKeepsOwner(t testing.TB, e *env) { // O2
	a := e.mustCreateOwned(t, spec{id: "r1", ctx: "ctx-a", state: a2a.TaskStateWorking, ts: statusAt(0), tag: "v1"}.build(), "alice")
	e.mustCreateOwned(t, spec{id: "r2", ctx: "ctx-a", state: a2a.TaskStateWorking, ts: statusAt(0), tag: "v1"}.build(), "bob")
	u := e.mustCreate(t, spec{id: "r3", ctx: "ctx-a", state: a2a.TaskStateWorking, ts: statusAt(0), tag: "v1"}.build())
	e.tick(1)
	// New content that claims another owner, in another context and state.
	next := spec{id: "r1", ctx: "ctx-b", state: a2a.TaskStateCompleted, ts: statusAt(5), history: 1, tag: "v2"}.build()
	next.Metadata["a2astore.owner"], next.Metadata["owner"] = "bob", "bob"
	r, err := e.s.Replace(e.ctx, next, a.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if r.Owner != "alice" || canon(r.Task) != canon(next) {
		t.Errorf("Replace: owner %q (want alice, O2), task stored as given: %v", r.Owner, canon(r.Task) == canon(next))
	}
	e.tick(1)
	claim := clone(u.Task)
	claim.Metadata["a2astore.owner"] = "alice"
	if r, err := e.s.Replace(e.ctx, claim, 0); err != nil || r.Owner != "" {
		t.Errorf("Replace of a task without owner: owner %q, %v; want none (O2)", r.Owner, err)
	}
	// Lists follow the recorded owner, not the content.
	for _, c := range []struct {
		req  engine.ListRequest
		want []a2a.TaskID
	}{
		{engine.ListRequest{Owner: "alice"}, []a2a.TaskID{"r1"}},
		{engine.ListRequest{Owner: "alice", ContextID: "ctx-b"}, []a2a.TaskID{"r1"}},
		{engine.ListRequest{Owner: "alice", ContextID: "ctx-a"}, nil},
		{engine.ListRequest{Owner: "alice", Status: a2a.TaskStateCompleted}, []a2a.TaskID{"r1"}},
		{engine.ListRequest{Owner: "alice", Status: a2a.TaskStateWorking}, nil},
		{engine.ListRequest{Owner: "alice", ContextID: "ctx-b", Status: a2a.TaskStateCompleted}, []a2a.TaskID{"r1"}},
		{engine.ListRequest{Owner: "bob"}, []a2a.TaskID{"r2"}},
		{engine.ListRequest{Owner: "bob", ContextID: "ctx-b"}, nil},
	} {
		c.req.IncludeTotalSize = true
		resp := e.mustList(t, c.req)
		if got := ids(resp.Tasks); !slices.Equal(got, c.want) || resp.TotalSize != len(c.want) {
			t.Errorf("List(%s) after Replace: %q total %d, want %q (O2)", fmtReq(c.req), got, resp.TotalSize, c.want)
		}
	}
}

func testOwnerIsolation(t testing.TB, e *env) { // O3
	e.populateOwned(t, 50)
	s := e.snapshot(t)
	at := map[a2a.TaskID]engine.Cursor{}
	for i, tk := range s.tasks {
		at[tk.ID] = s.cursors[i]
	}
	// "al" and "alice2" share prefixes with alice; "nobody" has no task.
	for _, owner := range []string{"alice", "bob", "carol", "al", "alice2", "nobody"} {
		want, _ := s.expect(nil, s.byOwner(owner), len(s.tasks))
		for _, req := range []engine.ListRequest{{PageSize: 1}, {PageSize: 3, Projection: engine.ProjectionLight}, {PageSize: 100}} {
			req.Owner = owner
			tasks, cursors := e.traverse(t, req, len(s.tasks))
			if got := ids(tasks); !slices.Equal(got, want) {
				t.Errorf("owner %q, page size %d: traversal %q, want %q (O3)", owner, req.PageSize, got, want)
				continue
			}
			for i, c := range cursors {
				if c != at[c.ID] {
					t.Errorf("owner %q: task %q listed at %s, at %s unfiltered", owner, string(c.ID), fmtCursor(c), fmtCursor(at[c.ID]))
				}
				if tasks[i].ID != c.ID {
					t.Errorf("owner %q: task %q with the cursor of %q", owner, string(tasks[i].ID), string(c.ID))
				}
			}
		}
		if n := map[string]int{"alice": 20, "bob": 10, "carol": 10}[owner]; len(want) != n {
			t.Fatalf("owner %q holds %d tasks, want %d: the test data changed", owner, len(want), n)
		}
	}
	// Filtering by another owner's busy context shows nothing of it: no
	// task, no total, no token.
	for _, owner := range []string{"alice", "bob", "nobody"} {
		resp := e.mustList(t, engine.ListRequest{Owner: owner, ContextID: "ctx-carol", IncludeTotalSize: true})
		if len(resp.Tasks) != 0 || resp.TotalSize != 0 || resp.NextPageToken != "" {
			t.Errorf("owner %q in carol's context: %s total %d token %q; want nothing (O3)", owner, pageIDs(resp), resp.TotalSize, resp.NextPageToken)
		}
	}
	if resp := e.mustList(t, engine.ListRequest{Owner: "carol", ContextID: "ctx-carol", IncludeTotalSize: true}); resp.TotalSize != 5 || len(resp.Tasks) != 5 {
		t.Errorf("carol in her own context: %s total %d, want 5 tasks", pageIDs(resp), resp.TotalSize)
	}
}

func testOwnerFilters(t testing.TB, e *env) { // O3, O4, L1, L2
	e.populateOwned(t, 60)
	s := e.snapshot(t)
	and := func(fs ...func(*a2a.Task) bool) func(*a2a.Task) bool {
		return func(tk *a2a.Task) bool {
			for _, f := range fs {
				if !f(tk) {
					return false
				}
			}
			return true
		}
	}
	inCtx := func(c string) func(*a2a.Task) bool { return func(tk *a2a.Task) bool { return tk.ContextID == c } }
	inState := func(st a2a.TaskState) func(*a2a.Task) bool {
		return func(tk *a2a.Task) bool { return tk.Status.State == st }
	}
	since := func(sec int) func(*a2a.Task) bool {
		return func(tk *a2a.Task) bool {
			return tk.Status.Timestamp != nil && !tk.Status.Timestamp.Before(*statusAt(sec))
		}
	}
	alice, bob := s.byOwner("alice"), s.byOwner("bob")
	for _, f := range []struct {
		name string
		req  engine.ListRequest
		keep func(*a2a.Task) bool
	}{
		{"owner", engine.ListRequest{Owner: "alice"}, alice},
		{"owner+context", engine.ListRequest{Owner: "alice", ContextID: "ctx-1"}, and(alice, inCtx("ctx-1"))},
		{"owner+state", engine.ListRequest{Owner: "bob", Status: a2a.TaskStateWorking}, and(bob, inState(a2a.TaskStateWorking))},
		{"owner+status time", engine.ListRequest{Owner: "alice", StatusTimestampAfter: statusAt(3)}, and(alice, since(3))},
		{"owner+context+state", engine.ListRequest{Owner: "alice", ContextID: "ctx-0", Status: allStates[0]}, and(alice, inCtx("ctx-0"), inState(allStates[0]))},
		{"owner+context+status time", engine.ListRequest{Owner: "bob", ContextID: "ctx-2", StatusTimestampAfter: statusAt(2)}, and(bob, inCtx("ctx-2"), since(2))},
		{"owner+context+state+status time", engine.ListRequest{Owner: "alice", ContextID: "ctx-2", Status: allStates[2], StatusTimestampAfter: statusAt(1)},
			and(alice, inCtx("ctx-2"), inState(allStates[2]), since(1))},
		{"owner+another owner's context", engine.ListRequest{Owner: "alice", ContextID: "ctx-carol"}, func(*a2a.Task) bool { return false }},
	} {
		want := e.expectFilter(t, s, f.name, f.req, f.keep)
		if len(want) == 0 && f.name != "owner+another owner's context" {
			t.Fatalf("filter %s matches nothing: the test data changed", f.name)
		}
	}
}

func testOwnerTotals(t testing.TB, e *env) { // O4, L5
	if resp := e.mustList(t, engine.ListRequest{Owner: "alice", IncludeTotalSize: true}); resp.TotalSize != 0 {
		t.Errorf("empty store: alice's total %d", resp.TotalSize)
	}
	e.populateOwned(t, 40)
	check := func(when string) {
		t.Helper()
		s := e.snapshot(t)
		for _, owner := range []string{"alice", "bob", "carol", "nobody"} {
			mine := s.byOwner(owner)
			for _, f := range []struct {
				req  engine.ListRequest
				keep func(*a2a.Task) bool
			}{
				{engine.ListRequest{}, nil},
				{engine.ListRequest{ContextID: "ctx-1"}, func(tk *a2a.Task) bool { return tk.ContextID == "ctx-1" }},
				{engine.ListRequest{Status: a2a.TaskStateCanceled}, func(tk *a2a.Task) bool { return tk.Status.State == a2a.TaskStateCanceled }},
				{engine.ListRequest{ContextID: "ctx-2", Status: a2a.TaskStateWorking}, func(tk *a2a.Task) bool {
					return tk.ContextID == "ctx-2" && tk.Status.State == a2a.TaskStateWorking
				}},
				{engine.ListRequest{StatusTimestampAfter: statusAt(4)}, func(tk *a2a.Task) bool {
					return tk.Status.Timestamp != nil && !tk.Status.Timestamp.Before(*statusAt(4))
				}},
			} {
				f.req.Owner = owner
				e.expectTotal(t, f.req, countIf(s.tasks, func(tk *a2a.Task) bool { return mine(tk) && (f.keep == nil || f.keep(tk)) }))
			}
		}
		if t.Failed() {
			t.Fatalf("totals wrong %s", when)
		}
	}
	check("after populating")
	// Mutations move tasks between an owner's states and contexts, never
	// between owners; creates and deletes count for their owner only.
	for i := range 40 {
		id := a2a.TaskID(fmt.Sprintf("task-%03d", i))
		e.tick(1)
		var err error
		switch i % 4 {
		case 0:
			_, err = e.s.Cancel(e.ctx, id)
			if errors.Is(err, engine.ErrNotCancelable) {
				err = nil
			}
		case 1:
			next := spec{id: id, ctx: "ctx-1", state: a2a.TaskStateWorking, ts: statusAt(6), tag: "v2"}.build()
			_, err = e.s.Replace(e.ctx, next, 0)
		case 2:
			if i%3 == 0 {
				err = e.s.Delete(e.ctx, id)
			}
		case 3:
			_, err = e.s.AppendHistory(e.ctx, id, newMessage("more"))
		}
		if err != nil {
			t.Fatalf("mutating %s: %v", id, err)
		}
	}
	e.mustCreateOwned(t, spec{id: "new-1", ctx: "ctx-2", state: a2a.TaskStateWorking, ts: statusAt(5), tag: "n"}.build(), "carol")
	e.mustCreate(t, spec{id: "new-2", ctx: "ctx-2", state: a2a.TaskStateWorking, ts: statusAt(5), tag: "n"}.build())
	check("after mutations")
}

func testOwnerTokens(t testing.TB, e *env) { // O3, T4, T5, T7
	e.populateOwned(t, 40)
	s := e.snapshot(t)
	alice, bob := s.byOwner("alice"), s.byOwner("bob")
	none := func(*a2a.Task) bool { return false }
	// Tokens of alice's traversal, used by others or without the owner:
	// the boundary applies to the new visible set and grants nothing.
	a1 := e.mustList(t, engine.ListRequest{Owner: "alice", PageSize: 4})
	a2 := e.mustList(t, engine.ListRequest{Owner: "alice", PageSize: 4, PageToken: a1.NextPageToken})
	for _, tok := range []string{a1.NextPageToken, a2.NextPageToken} {
		e.expectPage(t, "alice's token used by bob", s, engine.ListRequest{Owner: "bob", PageSize: 3, PageToken: tok}, bob)
		e.expectPage(t, "alice's token used by bob in ctx-1", s, engine.ListRequest{Owner: "bob", ContextID: "ctx-1", PageSize: 3, PageToken: tok},
			func(tk *a2a.Task) bool { return bob(tk) && tk.ContextID == "ctx-1" })
		e.expectPage(t, "alice's token used by an owner without tasks", s, engine.ListRequest{Owner: "nobody", PageToken: tok}, none)
		e.expectPage(t, "alice's token without the owner", s, engine.ListRequest{PageSize: 5, PageToken: tok}, nil)
	}
	u := e.mustList(t, engine.ListRequest{PageSize: 7})
	e.expectPage(t, "an unfiltered token used by alice", s, engine.ListRequest{Owner: "alice", PageSize: 3, PageToken: u.NextPageToken}, alice)
	// Boundaries of alice's deleted task and of bob's task page for alice
	// like any other (T5).
	var mid, bobs engine.Cursor
	for i, tk := range s.tasks[10:] {
		switch {
		case mid.ID == "" && alice(tk):
			mid = s.cursors[10+i]
		case bobs.ID == "" && bob(tk):
			bobs = s.cursors[10+i]
		}
	}
	if err := e.s.Delete(e.ctx, mid.ID); err != nil {
		t.Fatal(err)
	}
	kept := func(tk *a2a.Task) bool { return alice(tk) && tk.ID != mid.ID }
	e.expectPage(t, "alice after her deleted task", s, engine.ListRequest{Owner: "alice", PageSize: 3, PageToken: specToken(mid)}, kept)
	e.expectPage(t, "alice after bob's task", s, engine.ListRequest{Owner: "alice", PageSize: 3, PageToken: specToken(bobs)}, kept)
	// Invalid tokens fail alike whatever the owner (T4).
	for _, owner := range []string{"alice", "nobody"} {
		for _, tok := range invalidTokens() {
			_, err := e.s.List(e.ctx, &engine.ListRequest{Owner: owner, PageToken: tok})
			if !errors.Is(err, engine.ErrInvalidPageToken) {
				t.Errorf("owner %q, token %.40q: %v; want ErrInvalidPageToken", owner, tok, err)
			}
		}
	}
}

func testTaskOwners(t testing.TB, e *env) { // O5, L6
	e.populateOwned(t, 30)
	for i := 0; i < 30; i += 4 {
		e.tick(1)
		if _, err := e.s.AppendHistory(e.ctx, a2a.TaskID(fmt.Sprintf("task-%03d", i)), newMessage("moved")); err != nil {
			t.Fatal(err)
		}
	}
	for _, req := range []engine.ListRequest{
		{PageSize: 7}, {PageSize: 5, Projection: engine.ProjectionLight}, {ContextID: "ctx-2", PageSize: 2},
		{Status: a2a.TaskStateWorking, PageSize: 3}, {Owner: "alice", PageSize: 4}, {Owner: "bob", ContextID: "ctx-0", PageSize: 1},
		{Owner: "carol", Projection: engine.ProjectionLight, PageSize: 2}, {HistoryLength: intp(0), PageSize: 9},
	} {
		for page := 0; ; page++ {
			resp := e.mustList(t, req)
			for i, tk := range resp.Tasks {
				if r := e.mustGet(t, tk.ID); resp.TaskOwners[i] != r.Owner {
					t.Errorf("List(%s): TaskOwners[%d] = %q, Get says %q (O5)", fmtReq(req), i, resp.TaskOwners[i], r.Owner)
				}
			}
			if resp.NextPageToken == "" || page > 30 {
				break
			}
			req.PageToken = resp.NextPageToken
		}
	}
}
