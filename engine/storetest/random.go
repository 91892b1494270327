package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// The model-based randomized test: the reference model beside the real
// store, random writes interleaved with the pages of several live
// traversals, every result compared with the model's.

func testRandom(t testing.TB, e *env) {
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("storetest seed %d (rerun with -storetest.seed=%d)", seed, seed)
	if err := runRandom(e, seed, *flagOps); err != nil {
		t.Fatalf("seed %d (rerun with -storetest.seed=%d): %v", seed, seed, err)
	}
}

type randomRun struct {
	e      *env
	m      *model
	mnow   int64 // the model's clock reading
	rng    *rand.Rand
	ids    []a2a.TaskID
	ctxs   []string
	owners []string // owners of CreateOwned and owner filters (OwnerStores only)
	n      int      // operation counter, used in content so versions differ
	travs  []*randomTrav
	recent []string // the last operations, for failure messages
	// done counts what ran, so the test can tell it exercised everything.
	done map[string]int
}

type randomTrav struct {
	req   engine.ListRequest
	check *travCheck
	pages int
}

// runRandom runs ops random operations against e's store and a model and
// returns the first disagreement or broken guarantee.
func runRandom(e *env, seed uint64, ops int) error {
	r := &randomRun{
		e:    e,
		rng:  rand.New(rand.NewPCG(seed, seed^0x5eed5eed5eed5eed)),
		ctxs: []string{"ctx-a", "ctx-b", "ctx-c"},
		done: map[string]int{},
	}
	r.m = newModel(func() int64 { return r.mnow }, e.h.BinaryIDs)
	if e.clock != nil {
		e.clock.Set(100)
	}
	for i := range 20 {
		r.ids = append(r.ids, a2a.TaskID(fmt.Sprintf("t%02d", i)))
	}
	r.ids = append(r.ids, "t0", "t1x", "é")
	if e.o != nil {
		r.owners = []string{"alice", "bob", "al"}
	}
	if e.h.BinaryIDs {
		r.ids = append(r.ids, "\x00", "t0\x00", "\xff", "\xff\x00", "t\xc3(")
		r.ctxs = append(r.ctxs, "ctx\x00", "\xfe")
		if e.o != nil {
			r.owners = append(r.owners, "al\x00", "\xff")
		}
	}
	for i := range ops {
		if err := r.step(); err != nil {
			return fmt.Errorf("operation %d: %w\nrecent operations:\n  %s", i, err, strings.Join(r.recent, "\n  "))
		}
	}
	if err := r.final(); err != nil {
		return fmt.Errorf("final comparison: %w", err)
	}
	if ops >= 500 {
		want := []string{"create", "replace", "cancel", "append", "append-dup", "delete", "page", "traversal-end"}
		if e.o != nil {
			want = append(want, "createowned", "page-owned")
		}
		for _, op := range want {
			if r.done[op] == 0 {
				return fmt.Errorf("the run never did a successful %s", op)
			}
		}
	}
	return nil
}

func (r *randomRun) note(format string, args ...any) {
	if len(r.recent) == 16 {
		r.recent = r.recent[1:]
	}
	r.recent = append(r.recent, fmt.Sprintf(format, args...))
}

func (r *randomRun) pickID() a2a.TaskID { return r.ids[r.rng.IntN(len(r.ids))] }

func (r *randomRun) randTask(id a2a.TaskID) *a2a.Task {
	sp := spec{
		id:        id,
		ctx:       r.ctxs[r.rng.IntN(len(r.ctxs))],
		state:     allStates[r.rng.IntN(len(allStates))],
		ts:        statusAt(r.rng.IntN(10)),
		history:   r.rng.IntN(4),
		artifacts: r.rng.IntN(3),
		tag:       fmt.Sprint(r.n),
	}
	if r.rng.IntN(5) == 0 {
		sp.ts = nil
	}
	t := sp.build()
	if r.rng.IntN(8) == 0 {
		t.Metadata = nil
	}
	if r.rng.IntN(40) == 0 { // an invalid write now and then
		t.Status.State = "TASK_STATE_BOGUS"
	}
	return t
}

// step runs one random operation: a write, a Get, a one-off page or a
// page of a live traversal.
func (r *randomRun) step() error {
	r.n++
	r.moveClock()
	switch x := r.rng.IntN(100); {
	case x < 18:
		return r.create()
	case x < 32:
		return r.replace()
	case x < 40:
		return r.cancel()
	case x < 55:
		return r.appendHistory()
	case x < 62:
		return r.delete()
	case x < 66:
		return r.get()
	case x < 70:
		return r.oneOffPage()
	default:
		return r.page()
	}
}

// moveClock moves an injected clock: mostly forward, often not at all
// (equal times across tasks), now and then backward, sometimes below 0.
func (r *randomRun) moveClock() {
	c := r.e.clock
	if c == nil {
		return
	}
	switch x := r.rng.IntN(100); {
	case x < 60:
		c.Advance(1 + r.rng.Int64N(3))
	case x < 88: // equal times across tasks
	default: // backward, now and then below 0
		c.Advance(-1 - r.rng.Int64N(15))
	}
}

// create creates a task, on an OwnerStore half the time for an owner (now
// and then one over the length limit, O1).
func (r *randomRun) create() error {
	id := r.pickID()
	tk := r.randTask(id)
	if r.e.o == nil || r.rng.IntN(2) == 0 {
		r.note("Create(%q) state %s ctx %q", string(id), tk.Status.State, tk.ContextID)
		return r.mutation("Create", id, true,
			func() (engine.Record, error) { return r.e.s.Create(r.e.ctx, tk) },
			func() (engine.Record, error) { return r.m.Create(r.e.ctx, tk) })
	}
	owner := r.owners[r.rng.IntN(len(r.owners))]
	if r.rng.IntN(30) == 0 {
		owner = strings.Repeat("o", specMaxOwnerBytes+1)
	}
	r.note("CreateOwned(%q, %.20q) state %s ctx %q", string(id), owner, tk.Status.State, tk.ContextID)
	return r.mutation("CreateOwned", id, true,
		func() (engine.Record, error) { return r.e.o.CreateOwned(r.e.ctx, tk, owner) },
		func() (engine.Record, error) { return r.m.CreateOwned(r.e.ctx, tk, owner) })
}

// replace replaces a task with an edit of its current content or new
// content, unconditionally or on a right or wrong revision.
func (r *randomRun) replace() error {
	id := r.pickID()
	var tk *a2a.Task
	if cur := r.m.get(id); cur != nil && r.rng.IntN(2) == 0 {
		tk = clone(cur) // an edit of the current task
		tk.Metadata = map[string]any{"edit": float64(r.n)}
		if r.rng.IntN(2) == 0 {
			tk.Status.State = allStates[r.rng.IntN(len(allStates))]
		}
	} else {
		tk = r.randTask(id)
	}
	exp := r.randExpected(id)
	r.note("Replace(%q, rev %d) state %s ctx %q", string(id), exp, tk.Status.State, tk.ContextID)
	return r.mutation("Replace", id, false,
		func() (engine.Record, error) { return r.e.s.Replace(r.e.ctx, tk, exp) },
		func() (engine.Record, error) { return r.m.Replace(r.e.ctx, tk, exp) })
}

// randExpected draws an expected revision for a conditional write of id:
// none (0), the current one, or one the task is not at.
func (r *randomRun) randExpected(id a2a.TaskID) int64 {
	if rev := r.m.revision(id); rev > 0 {
		switch r.rng.IntN(5) {
		case 0, 1:
			return rev
		case 2:
			return rev + 1 + r.rng.Int64N(2)
		case 3:
			if rev > 1 {
				return rev - 1
			}
		}
	} else if r.rng.IntN(2) == 0 {
		return 1
	}
	return 0
}

// conditional reports whether the next Cancel, AppendHistory or Delete is
// a conditional one (half of them, on an engine.ConditionalStore), and on
// which revision.
func (r *randomRun) conditional(id a2a.TaskID) (int64, bool) {
	if r.e.c == nil || r.rng.IntN(2) == 0 {
		return 0, false
	}
	return r.randExpected(id), true
}

func (r *randomRun) cancel() error {
	id := r.pickID()
	if exp, ok := r.conditional(id); ok {
		r.note("CancelIf(%q, rev %d)", string(id), exp)
		return r.mutation("Cancel", id, false,
			func() (engine.Record, error) { return r.e.c.CancelIf(r.e.ctx, id, exp) },
			func() (engine.Record, error) { return r.m.CancelIf(r.e.ctx, id, exp) })
	}
	r.note("Cancel(%q)", string(id))
	return r.mutation("Cancel", id, false,
		func() (engine.Record, error) { return r.e.s.Cancel(r.e.ctx, id) },
		func() (engine.Record, error) { return r.m.Cancel(r.e.ctx, id) })
}

// appendHistory appends a new message, or one whose ID is already in the
// history with other content (deduplicated, S3).
func (r *randomRun) appendHistory() error {
	id := r.pickID()
	msg := newMessage(fmt.Sprintf("rm-%d", r.n))
	if cur := r.m.get(id); cur != nil && len(cur.History) > 0 && r.rng.IntN(3) == 0 {
		msg.ID = cur.History[r.rng.IntN(len(cur.History))].ID // duplicate, other content
	}
	if exp, ok := r.conditional(id); ok {
		r.note("AppendHistoryIf(%q, %q, rev %d)", string(id), msg.ID, exp)
		return r.mutation("AppendHistory", id, false,
			func() (engine.Record, error) { return r.e.c.AppendHistoryIf(r.e.ctx, id, msg, exp) },
			func() (engine.Record, error) { return r.m.AppendHistoryIf(r.e.ctx, id, msg, exp) })
	}
	r.note("AppendHistory(%q, %q)", string(id), msg.ID)
	return r.mutation("AppendHistory", id, false,
		func() (engine.Record, error) { return r.e.s.AppendHistory(r.e.ctx, id, msg) },
		func() (engine.Record, error) { return r.m.AppendHistory(r.e.ctx, id, msg) })
}

func (r *randomRun) delete() error {
	id := r.pickID()
	var gerr, werr error
	if exp, ok := r.conditional(id); ok {
		r.note("DeleteIf(%q, rev %d)", string(id), exp)
		gerr = r.e.c.DeleteIf(r.e.ctx, id, exp)
		werr = r.m.DeleteIf(r.e.ctx, id, exp)
	} else {
		r.note("Delete(%q)", string(id))
		gerr = r.e.s.Delete(r.e.ctx, id)
		werr = r.m.Delete(r.e.ctx, id)
	}
	if !sameClass(gerr, werr) {
		return fmt.Errorf("Delete(%q): error %v, model says %v", string(id), gerr, werr)
	}
	if gerr == nil {
		r.done["delete"]++
		for _, tv := range r.travs {
			tv.check.touched[id] = true
		}
	}
	return nil
}

func (r *randomRun) get() error {
	id := r.pickID()
	r.note("Get(%q)", string(id))
	got, gerr := r.e.s.Get(r.e.ctx, id)
	want, werr := r.m.Get(r.e.ctx, id)
	if !sameClass(gerr, werr) && !(werr != nil && errors.Is(gerr, engine.ErrInvalidArgument) && !r.e.h.BinaryIDs) {
		return fmt.Errorf("Get(%q): error %v, model says %v", string(id), gerr, werr)
	}
	if gerr == nil {
		if d := diffRecord(got, want); d != "" {
			return fmt.Errorf("Get(%q): %s", string(id), d)
		}
	}
	return nil
}

// mutation runs one write on the store and the model and compares them.
func (r *randomRun) mutation(op string, id a2a.TaskID, create bool, real, mdl func() (engine.Record, error)) error {
	before := r.m.revision(id)
	got, gerr := real()
	switch {
	case r.e.clock != nil:
		r.mnow = r.e.clock.Now()
	case gerr == nil:
		// The store's own clock: the model takes the store's time and
		// checks S4 (new > old) through NextTime.
		r.mnow = got.Cursor.UpdatedAt
	default:
		r.mnow = 0
	}
	want, werr := mdl()
	if !sameClass(gerr, werr) {
		return fmt.Errorf("%s(%q): error %v, model says %v", op, string(id), gerr, werr)
	}
	if gerr != nil {
		return nil
	}
	if d := diffRecord(got, want); d != "" {
		return fmt.Errorf("%s(%q): %s", op, string(id), d)
	}
	if now, err := r.e.s.Get(r.e.ctx, id); err != nil || diffRecord(now, want) != "" {
		return fmt.Errorf("%s(%q): Get afterwards: %v %s", op, string(id), err, diffRecord(now, want))
	}
	switch {
	case create:
		r.done[strings.ToLower(op)]++
	case want.Revision == before:
		r.done["append-dup"]++
		return nil // deduplicated: nothing changed
	default:
		r.done[strings.ToLower(strings.TrimSuffix(op, "History"))]++
	}
	for _, tv := range r.travs {
		tv.check.touched[id] = true
		if create {
			tv.check.recreated[id] = true
		}
	}
	return nil
}

// randRequest draws per-page options onto req.
func (r *randomRun) randRequest(req engine.ListRequest) engine.ListRequest {
	req.PageSize = 1 + r.rng.IntN(6)
	if r.rng.IntN(20) == 0 {
		req.PageSize = 0
	}
	req.HistoryLength = nil
	if x := r.rng.IntN(4); x > 0 {
		req.HistoryLength = intp(x - 1)
	}
	req.IncludeArtifacts = r.rng.IntN(2) == 0
	req.IncludeTotalSize = r.rng.IntN(2) == 0
	return req
}

// randFilter draws the filters of a traversal: on an OwnerStore now and
// then an owner, who may have no task.
func (r *randomRun) randFilter() engine.ListRequest {
	var req engine.ListRequest
	if r.e.o != nil && r.rng.IntN(3) == 0 {
		req.Owner = "nobody"
		if k := r.rng.IntN(len(r.owners) + 1); k < len(r.owners) {
			req.Owner = r.owners[k]
		}
	}
	if r.rng.IntN(3) == 0 {
		req.ContextID = r.ctxs[r.rng.IntN(len(r.ctxs))]
	}
	if r.rng.IntN(5) == 0 {
		req.Status = allStates[r.rng.IntN(len(allStates))]
	}
	if r.rng.IntN(6) == 0 {
		req.StatusTimestampAfter = statusAt(r.rng.IntN(10))
	}
	if r.rng.IntN(8) == 0 {
		req.Projection = engine.ProjectionLight
	}
	return req
}

// list runs one List on both and compares the responses.
func (r *randomRun) list(req engine.ListRequest) (*engine.ListResponse, error) {
	got, gerr := r.e.s.List(r.e.ctx, &req)
	want, werr := r.m.List(r.e.ctx, &req)
	if !sameClass(gerr, werr) {
		return nil, fmt.Errorf("List(%s): error %v, model says %v", fmtReq(req), gerr, werr)
	}
	if gerr != nil {
		return nil, nil
	}
	if msg := r.e.checkPage(req, got); msg != "" {
		return nil, fmt.Errorf("List(%s): %s", fmtReq(req), msg)
	}
	if d := diffPage(got, want, r.e.o != nil); d != "" {
		return nil, fmt.Errorf("List(%s): %s", fmtReq(req), d)
	}
	return got, nil
}

func fmtReq(req engine.ListRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "size=%d", req.PageSize)
	if req.Owner != "" {
		fmt.Fprintf(&b, " owner=%.40q", req.Owner)
	}
	if req.ContextID != "" {
		fmt.Fprintf(&b, " ctx=%q", req.ContextID)
	}
	if req.Status != "" {
		fmt.Fprintf(&b, " status=%s", req.Status)
	}
	if req.StatusTimestampAfter != nil {
		fmt.Fprintf(&b, " after=%s", req.StatusTimestampAfter.Format(time.RFC3339Nano))
	}
	if req.PageToken != "" {
		if c, ok := specBoundary(req.PageToken); ok {
			fmt.Fprintf(&b, " boundary=%s", fmtCursor(c))
		} else {
			fmt.Fprintf(&b, " token=%.30q", req.PageToken)
		}
	}
	if req.HistoryLength != nil {
		fmt.Fprintf(&b, " history=%d", *req.HistoryLength)
	}
	fmt.Fprintf(&b, " artifacts=%v total=%v light=%v", req.IncludeArtifacts, req.IncludeTotalSize, req.Projection == engine.ProjectionLight)
	return b.String()
}

// page continues (or starts) a traversal by one page.
func (r *randomRun) page() error {
	if len(r.travs) == 0 || len(r.travs) < 3 && r.rng.IntN(5) == 0 {
		req := r.randFilter()
		r.travs = append(r.travs, &randomTrav{req: req, check: newTravCheck(r.m.matching(req))})
	}
	k := r.rng.IntN(len(r.travs))
	tv := r.travs[k]
	req := r.randRequest(tv.req)
	r.note("List(%s) page %d", fmtReq(req), tv.pages)
	resp, err := r.list(req)
	if err != nil {
		return err
	}
	if resp == nil {
		return fmt.Errorf("traversal page %d (%s) failed on both", tv.pages, fmtReq(req))
	}
	r.done["page"]++
	if req.Owner != "" {
		r.done["page-owned"]++
	}
	tv.pages++
	if err := tv.check.page(resp); err != nil {
		return fmt.Errorf("traversal %s page %d: %w", fmtReq(tv.req), tv.pages, err)
	}
	if resp.NextPageToken == "" {
		if err := tv.check.finish(); err != nil {
			return fmt.Errorf("traversal %s of %d pages: %w", fmtReq(tv.req), tv.pages, err)
		}
		r.done["traversal-end"]++
		r.travs = append(r.travs[:k], r.travs[k+1:]...)
		return nil
	}
	tv.req.PageToken = resp.NextPageToken
	return nil
}

// oneOffPage lists after a random boundary — of a live, deleted or
// never-existing task (T5) — or with an invalid token (T4).
func (r *randomRun) oneOffPage() error {
	req := r.randRequest(r.randFilter())
	if r.rng.IntN(4) == 0 {
		bad := invalidTokens()
		req.PageToken = bad[r.rng.IntN(len(bad))]
	} else {
		at := int64(0)
		if c := r.e.clock; c != nil {
			at = max(0, c.Now()-r.rng.Int64N(50))
		} else if cur, err := r.m.Get(r.e.ctx, r.pickID()); err == nil {
			at = cur.Cursor.UpdatedAt + r.rng.Int64N(3) - 1
		}
		req.PageToken = specToken(engine.Cursor{UpdatedAt: max(at, 0), ID: r.pickID()})
	}
	r.note("List(%s) one-off", fmtReq(req))
	_, err := r.list(req)
	return err
}

// final compares everything: every task by Get and a whole traversal.
func (r *randomRun) final() error {
	for _, id := range r.ids {
		got, gerr := r.e.s.Get(r.e.ctx, id)
		want, werr := r.m.Get(r.e.ctx, id)
		if werr == nil && gerr != nil || werr != nil && gerr == nil {
			return fmt.Errorf("Get(%q): error %v, model says %v", string(id), gerr, werr)
		}
		if gerr == nil {
			if d := diffRecord(got, want); d != "" {
				return fmt.Errorf("Get(%q): %s", string(id), d)
			}
		}
	}
	req := engine.ListRequest{PageSize: 100, IncludeArtifacts: true, IncludeTotalSize: true}
	_, err := r.list(req)
	return err
}
