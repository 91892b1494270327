package storetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// The R clauses run on an engine.Retainer; other stores skip them. They
// work without an injected clock: every expectation is computed from the
// cursors the store returned (the model is RetainRequest.Due), and the
// clauses that need distinct times check they got them.

// retained is one task a retention clause created, as the store returned it.
type retained struct {
	id    a2a.TaskID
	ctx   string
	owner string
	state a2a.TaskState
	cur   engine.Cursor
}

// retainEnv is a clause's store as a Retainer and the tasks it holds.
type retainEnv struct {
	*env
	r     engine.Retainer
	tasks []retained // in creation order (oldest first, with distinct times)
	gone  map[a2a.TaskID]bool
}

func newRetainEnv(t testing.TB, e *env) *retainEnv {
	t.Helper()
	r, ok := engine.AsRetainer(e.s)
	if !ok {
		t.Skipf("%T is not an engine.Retainer: retention clause skipped", e.s)
	}
	return &retainEnv{env: e, r: r, gone: map[a2a.TaskID]bool{}}
}

// add creates a task in state (with owner on an OwnerStore, when not "")
// and notes it; the clock moves on by 1 µs after it.
func (re *retainEnv) add(t testing.TB, id a2a.TaskID, ctx, owner string, state a2a.TaskState) retained {
	t.Helper()
	tk := spec{id: id, ctx: ctx, state: state, ts: statusAt(0), history: 1, tag: "r"}.build()
	var rec engine.Record
	if owner != "" && re.o != nil {
		rec = re.mustCreateOwned(t, tk, owner)
	} else {
		owner = ""
		rec = re.mustCreate(t, tk)
	}
	re.tick(1)
	x := retained{id: id, ctx: ctx, owner: owner, state: state, cur: rec.Cursor}
	re.tasks = append(re.tasks, x)
	return x
}

// addMixed adds n tasks in context "ctx", IDs from the format with their
// number: completed, but every one whose number is 1 modulo every in state
// other; then checks their times are distinct.
func (re *retainEnv) addMixed(t testing.TB, format string, n, every int, other a2a.TaskState) {
	t.Helper()
	for i := range n {
		st := a2a.TaskStateCompleted
		if i%every == 1 {
			st = other
		}
		re.add(t, a2a.TaskID(fmt.Sprintf(format, i)), "ctx", "", st)
	}
	re.distinct(t)
}

// distinct fails the clause unless the tasks' times strictly increase in
// creation order (a store without an injected clock almost always gives
// that; the clause cannot judge the age boundary otherwise).
func (re *retainEnv) distinct(t testing.TB) {
	t.Helper()
	for i := 1; i < len(re.tasks); i++ {
		if re.tasks[i].cur.UpdatedAt <= re.tasks[i-1].cur.UpdatedAt {
			t.Skipf("tasks %q and %q got times %d and %d: not increasing, the clause cannot run", re.tasks[i-1].id, re.tasks[i].id,
				re.tasks[i-1].cur.UpdatedAt, re.tasks[i].cur.UpdatedAt)
		}
	}
}

// remove runs RemoveExpired and checks its result against the model: the
// tasks it removed are the due ones among those it examined, oldest first,
// and it examined at most Limit. It returns the result.
func (re *retainEnv) remove(t testing.TB, req engine.RetainRequest) engine.RetainResult {
	t.Helper()
	res, err := re.r.RemoveExpired(re.ctx, req)
	if err != nil {
		t.Fatalf("RemoveExpired(%+v): %v", req, err)
	}
	if res.Examined > req.Limit || res.Removed > res.Examined {
		t.Fatalf("RemoveExpired(Limit %d): examined %d, removed %d", req.Limit, res.Examined, res.Removed)
	}
	// The model: the live tasks oldest first after req.After; the first
	// Examined of them are looked at and the due ones go.
	live := re.liveOldestFirst()
	if req.After != nil {
		live = slices.DeleteFunc(live, func(x retained) bool { return x.cur.Compare(*req.After) >= 0 })
	}
	if res.Examined > len(live) {
		t.Fatalf("RemoveExpired examined %d tasks, only %d live after the resume point", res.Examined, len(live))
	}
	want := 0
	for _, x := range live[:res.Examined] {
		if req.Due(x.cur.UpdatedAt, x.state) {
			re.gone[x.id] = true
			want++
		}
	}
	if res.Removed != want {
		t.Errorf("RemoveExpired(%+v) removed %d, the model %d of the %d oldest examined", req, res.Removed, want, res.Examined)
	}
	if res.Examined < req.Limit && res.Examined < len(live) {
		// Stopped before the limit: only past every due task, at the
		// oldest kept terminal one.
		last := live[res.Examined-1]
		if res.OldestTerminal == nil || *res.OldestTerminal != last.cur || !last.state.Terminal() || last.cur.UpdatedAt < req.TerminalBefore {
			t.Errorf("RemoveExpired stopped at %d of %d examined without reaching the oldest kept terminal task %s (OldestTerminal %v)",
				res.Examined, req.Limit, fmtCursor(last.cur), res.OldestTerminal)
		}
	}
	re.check(t)
	return res
}

// liveOldestFirst returns the tasks not removed, oldest first.
func (re *retainEnv) liveOldestFirst() []retained {
	var out []retained
	for _, x := range re.tasks {
		if !re.gone[x.id] {
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b retained) int { return -a.cur.Compare(b.cur) })
	return out
}

// check compares the store with the model: every removed task is gone
// (Get, lists), every other one is there at its cursor, and every total —
// all, by state, by context, by context and state, and by owner — is exact
// (R2, L5).
func (re *retainEnv) check(t testing.TB) {
	t.Helper()
	live := re.liveOldestFirst()
	for _, x := range re.tasks {
		rec, err := re.s.Get(re.ctx, x.id)
		switch {
		case re.gone[x.id] && !errors.Is(err, engine.ErrNotFound):
			t.Errorf("Get(%q) after its removal: %v, want ErrNotFound", x.id, err)
		case !re.gone[x.id] && err != nil:
			t.Errorf("Get(%q), not due: %v", x.id, err)
		case !re.gone[x.id] && rec.Cursor != x.cur:
			t.Errorf("Get(%q): cursor %s, want %s unchanged", x.id, fmtCursor(rec.Cursor), fmtCursor(x.cur))
		}
	}
	tasks, _ := re.traverse(t, engine.ListRequest{PageSize: 3}, len(re.tasks))
	got := ids(tasks)
	want := make([]a2a.TaskID, len(live))
	for i, x := range live {
		want[len(live)-1-i] = x.id
	}
	if !slices.Equal(got, want) {
		t.Errorf("list after retention: %q, want %q", got, want)
	}
	type key struct {
		ctx   string
		state a2a.TaskState
	}
	counts := map[key]int{}
	owners := map[string]int{}
	for _, x := range live {
		counts[key{}]++
		counts[key{state: x.state}]++
		counts[key{ctx: x.ctx}]++
		counts[key{x.ctx, x.state}]++
		if x.owner != "" {
			owners[x.owner]++
		}
	}
	for _, x := range re.tasks { // every filter any task had, zero ones too
		for _, k := range []key{{}, {state: x.state}, {ctx: x.ctx}, {x.ctx, x.state}} {
			resp := re.mustList(t, engine.ListRequest{ContextID: k.ctx, Status: k.state, IncludeTotalSize: true, PageSize: 1})
			if resp.TotalSize != counts[k] {
				t.Errorf("total of context %q state %q after retention: %d, want %d", k.ctx, k.state, resp.TotalSize, counts[k])
			}
		}
		if x.owner != "" {
			resp := re.mustList(t, engine.ListRequest{Owner: x.owner, IncludeTotalSize: true, PageSize: 1})
			if resp.TotalSize != owners[x.owner] {
				t.Errorf("total of owner %q after retention: %d, want %d", x.owner, resp.TotalSize, owners[x.owner])
			}
		}
	}
}

// testRetainTerminalOnly: one task in every state, all old; a batch
// removes exactly the terminal ones, and totals by state, context and
// owner stay exact (R1, R2).
func testRetainTerminalOnly(t testing.TB, e *env) {
	re := newRetainEnv(t, e)
	for i, st := range allStates {
		re.add(t, a2a.TaskID(fmt.Sprintf("t%d", i)), fmt.Sprintf("ctx-%d", i%3), fmt.Sprintf("owner-%d", i%2), st)
	}
	re.tick(10)
	last := re.tasks[len(re.tasks)-1].cur.UpdatedAt
	res := re.remove(t, engine.RetainRequest{TerminalBefore: last + 1, Limit: 100})
	if res.Removed != len(terminalStates) {
		t.Errorf("removed %d tasks, want the %d terminal ones", res.Removed, len(terminalStates))
	}
	if res.Next != nil {
		t.Errorf("Next %s after examining every task", fmtCursor(*res.Next))
	}
	// Again: nothing is due any more.
	if res := re.remove(t, engine.RetainRequest{TerminalBefore: last + 1, Limit: 100}); res.Removed != 0 {
		t.Errorf("a second batch removed %d", res.Removed)
	}
}

// testRetainAgeBoundary: TerminalBefore is strict — a task at exactly that
// time stays, the older ones go; StuckBefore is off by default (R1).
func testRetainAgeBoundary(t testing.TB, e *env) {
	re := newRetainEnv(t, e)
	re.addMixed(t, "a%d", 6, 3, a2a.TaskStateWorking)
	cut := re.tasks[3].cur.UpdatedAt // a3, completed, stays
	res := re.remove(t, engine.RetainRequest{TerminalBefore: cut, Limit: 100})
	if res.Removed != 2 || !re.gone["a0"] || !re.gone["a2"] || re.gone["a3"] || re.gone["a1"] {
		t.Errorf("TerminalBefore %d removed %d: %v, want a0 and a2 only", cut, res.Removed, re.gone)
	}
	if res.OldestTerminal == nil || res.OldestTerminal.ID != "a3" {
		t.Errorf("OldestTerminal %v, want a3's cursor", res.OldestTerminal)
	}
	// The stuck age removes the old working task a1 only when set.
	res = re.remove(t, engine.RetainRequest{TerminalBefore: cut, StuckBefore: re.tasks[1].cur.UpdatedAt + 1, Limit: 100})
	if res.Removed != 1 || !re.gone["a1"] || re.gone["a4"] {
		t.Errorf("StuckBefore after a1 removed %d: %v, want a1", res.Removed, re.gone)
	}
}

// testRetainOldestFirst: batches of Limit remove the oldest due tasks
// first, a sweep resumes with Next, and a task mutated meanwhile (now
// the newest) is not removed (R1).
func testRetainOldestFirst(t testing.TB, e *env) {
	re := newRetainEnv(t, e)
	for i := range 10 {
		re.add(t, a2a.TaskID(fmt.Sprintf("o%02d", i)), fmt.Sprintf("c%d", i%4), fmt.Sprintf("w%d", i%3), a2a.TaskStateFailed)
	}
	re.distinct(t)
	cut := re.tasks[len(re.tasks)-1].cur.UpdatedAt + 1
	res := re.remove(t, engine.RetainRequest{TerminalBefore: cut, Limit: 3})
	if res.Removed != 3 || !re.gone["o00"] || !re.gone["o01"] || !re.gone["o02"] || res.Next == nil {
		t.Fatalf("first batch of 3: removed %d %v, Next %v; want o00-o02 and a Next", res.Removed, re.gone, res.Next)
	}
	// o05 is rewritten: it moves to the head and is no longer due.
	tk := spec{id: "o05", ctx: "c1", state: a2a.TaskStateCompleted, ts: statusAt(1), tag: "moved"}.build()
	re.tick(1000)
	rec, err := re.s.Replace(re.ctx, tk, 0)
	if err != nil {
		t.Fatalf("Replace(o05): %v", err)
	}
	for i := range re.tasks {
		if re.tasks[i].id == "o05" {
			re.tasks[i].cur, re.tasks[i].state, re.tasks[i].ctx = rec.Cursor, a2a.TaskStateCompleted, "c1"
		}
	}
	batches := 1
	for res.Next != nil {
		after := *res.Next
		res = re.remove(t, engine.RetainRequest{TerminalBefore: cut, Limit: 3, After: &after})
		if batches++; batches > 10 {
			t.Fatal("the sweep does not end")
		}
	}
	if len(re.liveOldestFirst()) != 1 || re.gone["o05"] {
		t.Errorf("after the sweep: %v gone, want all but o05", re.gone)
	}
}

// testRetainBadInput: invalid requests fail with ErrInvalidArgument and
// remove nothing.
func testRetainBadInput(t testing.TB, e *env) {
	re := newRetainEnv(t, e)
	re.add(t, "b0", "ctx", "", a2a.TaskStateCompleted)
	re.tick(10)
	cut := re.tasks[0].cur.UpdatedAt + 1
	for _, req := range []engine.RetainRequest{
		{TerminalBefore: cut, Limit: 0},
		{TerminalBefore: cut, Limit: -1},
		{TerminalBefore: cut, Limit: engine.MaxRetainLimit + 1},
		{TerminalBefore: -1, Limit: 10},
		{TerminalBefore: cut, StuckBefore: -5, Limit: 10},
		{TerminalBefore: cut, StuckBefore: cut + 1, Limit: 10},
		{TerminalBefore: math.MaxInt64, StuckBefore: 0, Limit: 10, After: &engine.Cursor{UpdatedAt: 0, ID: ""}},
		{TerminalBefore: cut, Limit: 10, After: &engine.Cursor{UpdatedAt: -1, ID: "x"}},
		{TerminalBefore: cut, Limit: 10, After: &engine.Cursor{UpdatedAt: 1, ID: a2a.TaskID(make([]byte, specMaxIDBytes+1))}},
	} {
		_, err := re.r.RemoveExpired(re.ctx, req)
		expectErr(t, fmt.Sprintf("RemoveExpired(%+v)", req), err, engine.ErrInvalidArgument)
	}
	re.check(t)
}

// testRetainDuringTraversal: a batch that removes tasks in the middle of a
// traversal leaves it valid: the tasks neither removed nor mutated appear
// exactly once, cursors strictly descend (L7, R2).
func testRetainDuringTraversal(t testing.TB, e *env) {
	re := newRetainEnv(t, e)
	re.addMixed(t, "v%02d", 12, 2, a2a.TaskStateInputRequired)
	first := re.mustList(t, engine.ListRequest{PageSize: 4})
	seen := ids(first.Tasks)
	re.remove(t, engine.RetainRequest{TerminalBefore: re.tasks[len(re.tasks)-1].cur.UpdatedAt + 1, Limit: 100})
	tok := first.NextPageToken
	for tok != "" {
		resp := re.mustList(t, engine.ListRequest{PageSize: 4, PageToken: tok})
		seen = append(seen, ids(resp.Tasks)...)
		tok = resp.NextPageToken
	}
	for _, x := range re.tasks {
		n := 0
		for _, id := range seen {
			if id == x.id {
				n++
			}
		}
		if n > 1 || (!re.gone[x.id] && n != 1) {
			t.Errorf("task %q (removed %v) seen %d times in the traversal (L7)", x.id, re.gone[x.id], n)
		}
	}
}

// testRetainConcurrentWriters: batches run while another writer rewrites
// half of the due tasks; a task whose rewrite succeeded (it is no longer
// due) is never removed, a task removed first makes the rewrite fail with
// ErrNotFound, and every untouched due task goes (R2; counters are checked
// by CheckInvariants at cleanup).
func testRetainConcurrentWriters(t testing.TB, e *env) {
	re := newRetainEnv(t, e)
	const n = 60
	for i := range n {
		re.add(t, a2a.TaskID(fmt.Sprintf("c%02d", i)), fmt.Sprintf("ctx-%d", i%4), fmt.Sprintf("own-%d", i%3), a2a.TaskStateCompleted)
	}
	cut := re.tasks[n-1].cur.UpdatedAt + 1
	re.tick(1000) // rewrites land after the cutoff
	kept := make(chan a2a.TaskID, n)
	done := make(chan error, 1)
	go func() {
		defer close(kept)
		for i := 1; i < n; i += 2 {
			tk := spec{id: a2a.TaskID(fmt.Sprintf("c%02d", i)), ctx: "moved", state: a2a.TaskStateFailed, ts: statusAt(2), tag: "w"}.build()
			_, err := re.s.Replace(re.ctx, tk, 0)
			switch {
			case err == nil:
				kept <- tk.ID
			case !errors.Is(err, engine.ErrNotFound):
				done <- fmt.Errorf("Replace(%s): %v", tk.ID, err)
				return
			}
		}
		done <- nil
	}()
	req := engine.RetainRequest{TerminalBefore: cut, Limit: 7}
	for range 100 {
		res, err := re.r.RemoveExpired(re.ctx, req)
		if err != nil {
			t.Fatalf("RemoveExpired: %v", err)
		}
		if res.Next == nil {
			break
		}
		req.After = res.Next
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for id := range kept {
		if _, err := re.s.Get(re.ctx, id); err != nil {
			t.Errorf("task %q rewritten (no longer due) before its batch: Get %v", id, err)
		}
	}
	for i := 0; i < n; i += 2 {
		if _, err := re.s.Get(re.ctx, a2a.TaskID(fmt.Sprintf("c%02d", i))); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("due task c%02d, untouched: Get %v, want removed", i, err)
		}
	}
}
