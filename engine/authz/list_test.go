package authz_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/listpage"
	"github.com/a2astore/a2astore/engine/storetest"
	"github.com/a2astore/a2astore/internal/taskgen"
)

var seedFlag = flag.Uint64("authz.seed", 0, "seed for randomized authz tests (0 = random)")

func seed(t *testing.T) *rand.Rand { return rand.New(rand.NewPCG(seedValue(t), 0x5eed)) }

// seedValue returns the seed of a randomized test, -authz.seed when set
// (else random), and logs it.
func seedValue(t *testing.T) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -authz.seed=%d)", s, s)
	return s
}

var (
	owners   = []string{"alice", "bob", "carol"}
	contexts = []string{"a", "b", "c", "\x00nul"}
	states   = []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateCanceled}
)

// randomContent builds the tasks' content: a status message, up to three
// history messages and one small artifact, which randomTask trims.
var randomContent = taskgen.New(taskgen.Shape{History: 3, Artifacts: 1, ArtifactBytes: 1})

// randomTask returns a task with random light and heavy fields: a status
// timestamp (or none) in a small range, with or without a status message,
// 0 to 3 history messages, an artifact or none, metadata or none.
func randomTask(r *rand.Rand, i int) *a2a.Task {
	id := a2a.TaskID(fmt.Sprintf("%c%d", 'a'+r.IntN(3), i))
	contextID, state := contexts[r.IntN(len(contexts))], states[r.IntN(len(states))]
	var ts *time.Time
	if r.IntN(3) > 0 {
		ts = ptr(time.UnixMicro(int64(r.IntN(10))).UTC())
	}
	t := randomContent.Build(id, contextID, state, ts, i)
	if r.IntN(2) == 0 {
		t.Status.Message = nil
	}
	if t.History = t.History[:r.IntN(4)]; len(t.History) == 0 {
		t.History = nil
	}
	if r.IntN(2) == 0 {
		t.Artifacts = nil
	}
	if r.IntN(2) == 0 {
		t.Metadata = map[string]any{"k": float64(r.IntN(5))}
	}
	return t
}

// fill creates n random tasks, each owned by one of owners, with a clock
// that often repeats a time (equal-time ties, S6).
func fill(t testing.TB, r *rand.Rand, s engine.OwnerStore, c *storetest.ManualClock, n int) {
	for i := range n {
		if r.IntN(3) > 0 {
			c.Advance(1)
		}
		createOwned(t, s, randomTask(r, i), owners[r.IntN(len(owners))])
	}
}

type caseSpec struct {
	name   string
	policy authz.Policy
	ctx    context.Context
}

// anonymous reports whether the case's policy refuses to list for its
// caller: an owner policy without identity (ErrUnauthenticated).
func (cs caseSpec) anonymous() bool {
	_, identified := authz.CallerFrom(cs.ctx)
	switch cs.policy.(type) {
	case authz.OwnerPolicy, inexactOwner:
		return !identified
	}
	return false
}

func randomCase(r *rand.Rand) caseSpec {
	bg := context.Background()
	who := append(slices.Clone(owners), "")[r.IntN(len(owners)+1)]
	switch r.IntN(10) {
	case 9:
		return caseSpec{"ownedall", ownedAll{admitAll}, bg}
	case 8:
		return caseSpec{"exactall", exactAll{admitAll}, bg}
	case 7:
		return caseSpec{"scanowner=" + who, scanOwner{engine.ProjectionLight}, authz.WithCaller(bg, who)}
	case 6:
		return caseSpec{"inexactowner=" + who, inexactOwner{}, authz.WithCaller(bg, who)}
	case 5:
		return caseSpec{"admitall", admitAll, bg}
	case 0:
		return caseSpec{"owner=" + who, authz.OwnerPolicy{}, authz.WithCaller(bg, who)}
	case 1:
		var allowed []string
		for _, c := range contexts {
			if r.IntN(2) == 0 {
				allowed = append(allowed, c)
			}
		}
		return caseSpec{fmt.Sprintf("contexts=%q", allowed), authz.ContextAllowList{}, authz.WithAllowedContexts(bg, allowed...)}
	case 2:
		return caseSpec{"allowall", authz.AllowAll{}, bg}
	case 3:
		// A policy needing full tasks: access by history length.
		return caseSpec{"full", funcPolicy{proj: engine.ProjectionFull, allow: func(_ context.Context, t *a2a.Task) bool {
			return len(t.History)%2 == 0
		}}, bg}
	default:
		return caseSpec{"none", funcPolicy{allow: func(context.Context, *a2a.Task) bool { return false }}, bg}
	}
}

func randomRequest(r *rand.Rand) engine.ListRequest {
	var req engine.ListRequest
	if r.IntN(3) == 0 {
		req.ContextID = contexts[r.IntN(len(contexts))]
	}
	if r.IntN(3) == 0 {
		req.Status = states[r.IntN(len(states))]
	}
	if r.IntN(4) == 0 {
		req.StatusTimestampAfter = ptr(time.UnixMicro(int64(r.IntN(10))).UTC())
	}
	if r.IntN(5) == 0 {
		req.Owner = append(slices.Clone(owners), "nobody")[r.IntN(len(owners)+1)]
	}
	req.PageSize = []int{0, 1, 2, 3, 7, 100}[r.IntN(6)]
	req.IncludeTotalSize = r.IntN(2) == 0
	if r.IntN(3) == 0 {
		req.Projection = engine.ProjectionLight
	}
	if r.IntN(2) == 0 {
		req.HistoryLength = ptr(r.IntN(3))
	}
	req.IncludeArtifacts = r.IntN(2) == 0
	return req
}

// ref is every task in the store, whole, in list order, with its cursor
// and owner.
type ref struct {
	tasks   []*a2a.Task
	cursors []engine.Cursor
	owners  []string
}

// reference reads ref from the store.
func reference(t testing.TB, s engine.Store) ref {
	var r ref
	for _, p := range traverse(t, context.Background(), s, engine.ListRequest{PageSize: 100, IncludeArtifacts: true}) {
		r.tasks = append(r.tasks, p.Tasks...)
		r.cursors = append(r.cursors, p.TaskCursors...)
		r.owners = append(r.owners, p.TaskOwners...)
	}
	return r
}

// decide is the policy's decision as the dispatcher asks for it: with the
// owner for an OwnerChecker.
func decide(t testing.TB, cs caseSpec, task *a2a.Task, owner string) bool {
	var ok bool
	var err error
	if oc, is := cs.policy.(authz.OwnerChecker); is {
		ok, err = oc.CanAccessOwned(cs.ctx, task, owner)
	} else {
		ok, err = cs.policy.CanAccessTask(cs.ctx, task)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// expectPages computes what a traversal must return: the reference filtered
// by the request and the policy, cut into pages.
func expectPages(t testing.TB, cs caseSpec, req engine.ListRequest, all ref) []*engine.ListResponse {
	q, err := engine.ParseListRequest(&req)
	if err != nil {
		t.Fatal(err)
	}
	var vis []*a2a.Task
	var vc []engine.Cursor
	var vo []string
	for i, task := range all.tasks {
		if decide(t, cs, task, all.owners[i]) && listpage.Matches(&q, all.owners[i], task.ContextID, task.Status.State, task.Status.Timestamp) {
			vis, vc, vo = append(vis, task), append(vc, all.cursors[i]), append(vo, all.owners[i])
		}
	}
	var pages []*engine.ListResponse
	for start := 0; ; start += q.PageSize {
		end := min(start+q.PageSize, len(vis))
		var pt []*a2a.Task
		for _, task := range vis[start:end] {
			pt = append(pt, shaped(&q, task))
		}
		p := listpage.Response(&q, pt, slices.Clone(vc[start:end]), end < len(vis))
		p.TaskOwners = append([]string{}, vo[start:end]...)
		if q.IncludeTotalSize {
			p.TotalSize = len(vis)
		}
		pages = append(pages, p)
		if end == len(vis) {
			return pages
		}
	}
}

func shaped(q *engine.Query, task *a2a.Task) *a2a.Task {
	b, _ := json.Marshal(task)
	var cp a2a.Task
	if err := json.Unmarshal(b, &cp); err != nil {
		panic(err)
	}
	if q.Projection == engine.ProjectionLight {
		return &a2a.Task{ID: cp.ID, ContextID: cp.ContextID, Metadata: cp.Metadata,
			Status: a2a.TaskStatus{State: cp.Status.State, Timestamp: cp.Status.Timestamp}}
	}
	listpage.Shape(q, &cp)
	return &cp
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestListModel checks random traversals under random policies against a
// model computed from the raw store (A1, A2, L1–L5, T6).
func TestListModel(t *testing.T) {
	r := seed(t)
	for round := range 15 {
		c := storetest.NewManualClock(1000)
		s := newMem(t, c)
		fill(t, r, s, c, r.IntN(250))
		all := reference(t, s)
		for range 10 {
			cs, req := randomCase(r), randomRequest(r)
			if cs.anonymous() {
				resp, err := authz.New(s, cs.policy).List(cs.ctx, &req)
				if resp != nil || !errors.Is(err, authz.ErrUnauthenticated) {
					t.Fatalf("round %d, %s, request %+v: %v, %v; want ErrUnauthenticated", round, cs.name, req, resp, err)
				}
				continue
			}
			got := traverse(t, cs.ctx, authz.New(s, cs.policy), req)
			want := expectPages(t, cs, req, all)
			if g, w := jsonOf(got), jsonOf(want); g != w {
				t.Fatalf("round %d, %s, request %+v:\n got %s\nwant %s", round, cs.name, req, g, w)
			}
		}
	}
}

// createOwned creates task in s owned by owner.
func createOwned(t testing.TB, s engine.OwnerStore, task *a2a.Task, owner string) {
	if _, err := s.CreateOwned(context.Background(), task, owner); err != nil {
		t.Fatal(err)
	}
}

// TestNoninterference: two stores that differ only in tasks the caller
// cannot see give identical responses for every page (A2, T5), whichever
// way the dispatcher answers: the exact owner scope (one store call), a
// scan of the owner's tasks, or a scan of everyone's (scanOwner).
func TestNoninterference(t *testing.T) {
	r := seed(t)
	for round := range 5 {
		c1, c2 := storetest.NewManualClock(1000), storetest.NewManualClock(1000)
		s1, s2 := newMem(t, c1), newMem(t, c2)
		alice := authz.WithCaller(context.Background(), "alice")
		// Identical visible tasks at identical times; s2 also holds
		// bob's tasks, at times of their own and at times shared with
		// alice's (equal-time ties interleave them), in alice's
		// contexts and states.
		n := r.IntN(120)
		for i := range n {
			if r.IntN(2) == 0 {
				c1.Advance(1)
				c2.Advance(1)
			}
			task := randomTask(r, i)
			createOwned(t, s1, task, "alice")
			createOwned(t, s2, task, "alice")
			for j := range r.IntN(3) {
				if r.IntN(2) == 0 {
					c2.Advance(1)
				}
				hidden := randomTask(r, i)
				hidden.ID = a2a.TaskID(fmt.Sprintf("%c%d.%d", 'a'+r.IntN(3), i, j))
				createOwned(t, s2, hidden, "bob")
			}
			c1.Set(c2.Now())
		}
		for _, pol := range []authz.Policy{authz.OwnerPolicy{}, inexactOwner{}, scanOwner{engine.ProjectionFull}} {
			d1, d2 := authz.New(s1, pol), authz.New(s2, pol)
			for range 10 {
				req := randomRequest(r)
				p1 := traverse(t, alice, d1, req)
				p2 := traverse(t, alice, d2, req)
				if g1, g2 := jsonOf(p1), jsonOf(p2); g1 != g2 {
					t.Fatalf("round %d, %T, request %+v: responses differ\n%s\n%s", round, pol, req, g1, g2)
				}
				// Every token of the traversal, including an arbitrary
				// boundary at a hidden task, answers the same in both.
				for _, tok := range randomTokens(r, s2) {
					req.PageToken = tok
					a, err1 := d1.List(alice, &req)
					b, err2 := d2.List(alice, &req)
					if jsonOf(a) != jsonOf(b) || fmt.Sprint(err1) != fmt.Sprint(err2) {
						t.Fatalf("round %d, %T, token %q: %s %v / %s %v", round, pol, tok, jsonOf(a), err1, jsonOf(b), err2)
					}
				}
			}
		}
	}
}

// randomTokens returns a few tokens at and around tasks of s, hidden ones
// included, and some invalid ones.
func randomTokens(r *rand.Rand, s engine.Store) []string {
	toks := []string{"", "0", "v1.", engine.EncodeToken(engine.Cursor{UpdatedAt: 1 << 40, ID: "zz"})}
	resp, err := s.List(context.Background(), &engine.ListRequest{PageSize: 100, Projection: engine.ProjectionLight})
	if err != nil || len(resp.TaskCursors) == 0 {
		return toks
	}
	for range 5 {
		c := resp.TaskCursors[r.IntN(len(resp.TaskCursors))]
		toks = append(toks, engine.EncodeToken(c), engine.EncodeToken(engine.Cursor{UpdatedAt: c.UpdatedAt, ID: c.ID + "\x00"}))
	}
	return toks
}

// TestRevokedDuringFinalRead: a task revoked between selection and the final
// read fails the call with the error Get gives for an inaccessible task, and
// the total excludes it afterwards (A5). A task deleted in between makes
// List scan again (TestRescansBounded: at most MaxScans times).
func TestRevokedDuringFinalRead(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		act       func(mem engine.Store, p *revocable, id a2a.TaskID) // run before the final Get of id
		wantErr   bool
		wantScans int
		gone      a2a.TaskID // a task the call made inaccessible
	}{
		{"revoke", func(_ engine.Store, p *revocable, id a2a.TaskID) { p.revoke(id) }, true, 1, "t5"},
		{"delete", func(mem engine.Store, _ *revocable, id a2a.TaskID) { _ = mem.Delete(ctx, id) }, false, 2, "t5"},
	} {
		for _, byOwner := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/byowner=%v", tc.name, byOwner), func(t *testing.T) {
				c := storetest.NewManualClock(1000)
				mem := newMem(t, c)
				for i := range 10 {
					c.Advance(1)
					if _, err := mem.CreateOwned(ctx, working(a2a.TaskID(fmt.Sprint("t", i)), "a"), "alice"); err != nil {
						t.Fatal(err)
					}
				}
				pol := new(revocable)
				pr := &probe{Store: mem}
				d := authz.New(pr, pol)
				if byOwner {
					// The same decisions, made with the owner the final read
					// returns.
					d = authz.New(pr, ownedRevocable{pol})
				}
				victim := a2a.TaskID("t5") // on the first page of 6
				// The error an inaccessible task gets, before any change.
				inaccessible := authz.New(mem, funcPolicy{allow: func(context.Context, *a2a.Task) bool { return false }})
				_, wantErr := inaccessible.Get(ctx, victim)
				pr.beforeGet = func(id a2a.TaskID) {
					if id == victim {
						pr.beforeGet = nil // once
						tc.act(mem, pol, id)
					}
				}
				resp, err := d.List(ctx, &engine.ListRequest{PageSize: 6, IncludeTotalSize: true})
				scans := 0
				for _, l := range pr.lists {
					if l.PageToken == "" {
						scans++
					}
				}
				pr.beforeGet = nil
				if scans != tc.wantScans {
					t.Errorf("%d scans, want %d", scans, tc.wantScans)
				}
				if tc.wantErr {
					if resp != nil || err != wantErr || err.Error() != wantErr.Error() || !errors.Is(err, engine.ErrNotFound) {
						t.Fatalf("List = %v, %v; want nil, %v", resp, err, wantErr)
					}
					if _, getErr := d.Get(ctx, tc.gone); getErr != err {
						t.Fatalf("Get after the change = %v, List gave %v", getErr, err)
					}
				} else if err != nil || len(resp.Tasks) != 6 || slices.Contains(ids(resp.Tasks), victim) || resp.TotalSize != 9 {
					t.Fatalf("List after a deletion = %v, %v; want 6 tasks without %s, total 9", resp, err, victim)
				}
				resp, err = d.List(ctx, &engine.ListRequest{PageSize: 6, IncludeTotalSize: true})
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(ids(resp.Tasks), tc.gone) || resp.TotalSize > 9 {
					t.Fatalf("afterwards: total %d, tasks %v", resp.TotalSize, ids(resp.Tasks))
				}
			})
		}
	}
}

// ownedRevocable is revocable deciding with the owner (authz.OwnerChecker):
// alice's tasks, less the revoked ones.
type ownedRevocable struct{ *revocable }

func (p ownedRevocable) CanAccessOwned(ctx context.Context, t *a2a.Task, owner string) (bool, error) {
	ok, err := p.CanAccessTask(ctx, t)
	return ok && owner == "alice", err
}

// TestChangedDuringFinalRead: a task replaced between selection and the
// final read (out of the request's filters, or still matching but moved to
// the head) is never returned with content that no longer matches nor with
// a cursor from another read: every returned task matches every filter and
// carries the content and cursor the store holds, and the page stays a
// valid page (L1, L2, L6, L7, A5).
func TestChangedDuringFinalRead(t *testing.T) {
	ctx := context.Background()
	policies := []caseSpec{
		{"admitall", admitAll, ctx},
		{"fullscan", funcPolicy{proj: engine.ProjectionFull, allow: func(context.Context, *a2a.Task) bool { return true }}, ctx},
		{"contexts", authz.ContextAllowList{}, authz.WithAllowedContexts(ctx, "c1", "other")},
	}
	for _, tc := range []struct {
		name   string
		page   int                         // 0: the first page; 1: the second
		change func(t *a2a.Task) *a2a.Task // the replacement of the victim
	}{
		{"leaves-filters", 0, func(t *a2a.Task) *a2a.Task { return working(t.ID, "other") }},
		{"leaves-state", 1, func(t *a2a.Task) *a2a.Task {
			c := working(t.ID, "c1")
			c.Status.State = a2a.TaskStateCompleted
			return c
		}},
		{"moves-ahead-first-page", 0, func(t *a2a.Task) *a2a.Task { return working(t.ID, "c1") }},
		{"moves-ahead-later-page", 1, func(t *a2a.Task) *a2a.Task { return working(t.ID, "c1") }},
	} {
		for _, cs := range policies {
			for _, total := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/total=%v", tc.name, cs.name, total), func(t *testing.T) {
					c := storetest.NewManualClock(1000)
					mem := newMem(t, c)
					for i := range 12 {
						c.Advance(1)
						ctxID := []string{"c1", "c2"}[i%3/2] // two in three in c1
						if _, err := mem.Create(ctx, working(a2a.TaskID(fmt.Sprint("t", i)), ctxID)); err != nil {
							t.Fatal(err)
						}
					}
					req := engine.ListRequest{ContextID: "c1", Status: a2a.TaskStateWorking, PageSize: 3, IncludeTotalSize: total}
					if tc.page == 1 {
						first, err := authz.New(mem, cs.policy).List(cs.ctx, &req)
						if err != nil {
							t.Fatal(err)
						}
						req.PageToken = first.NextPageToken
					}
					pr := &probe{Store: mem}
					var victim a2a.TaskID
					pr.beforeGet = func(id a2a.TaskID) {
						if victim != "" {
							return
						}
						if n := pr.gets; n == 2 { // the second selected task
							victim = id
							cur, err := mem.Get(ctx, id)
							if err != nil {
								t.Error(err)
								return
							}
							c.Advance(1)
							if _, err := mem.Replace(ctx, tc.change(cur.Task), 0); err != nil {
								t.Error(err)
							}
						}
					}
					resp, err := authz.New(pr, cs.policy).List(cs.ctx, &req)
					if err != nil {
						t.Fatal(err)
					}
					if victim == "" {
						t.Fatal("no task was changed during the final read")
					}
					checkCurrent(t, mem, &req, resp)
				})
			}
		}
	}
}

// checkCurrent fails unless every task of resp matches req's filters, is
// strictly after its boundary, and carries exactly the content and cursor
// the store holds now (the store has not changed since resp was made), and
// the next token encodes the last task's cursor.
func checkCurrent(t *testing.T, s engine.Store, req *engine.ListRequest, resp *engine.ListResponse) {
	t.Helper()
	q, err := engine.ParseListRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != len(resp.TaskCursors) {
		t.Fatalf("%d tasks, %d cursors", len(resp.Tasks), len(resp.TaskCursors))
	}
	prev := q.After
	for i, task := range resp.Tasks {
		c := resp.TaskCursors[i]
		if !listpage.Matches(&q, "", task.ContextID, task.Status.State, task.Status.Timestamp) {
			t.Errorf("task %s does not match the request: %s", task.ID, jsonOf(task))
		}
		if prev != nil && prev.Compare(c) >= 0 {
			t.Errorf("cursor %+v does not follow %+v", c, *prev)
		}
		prev = &resp.TaskCursors[i]
		rec, err := s.Get(context.Background(), task.ID)
		if err != nil {
			t.Errorf("returned task %s: %v", task.ID, err)
			continue
		}
		if rec.Cursor != c {
			t.Errorf("task %s returned at %+v, stored at %+v", task.ID, c, rec.Cursor)
		}
		if g, w := jsonOf(task), jsonOf(shaped(&q, rec.Task)); g != w {
			t.Errorf("task %s returned as %s, stored as %s", task.ID, g, w)
		}
	}
	if resp.NextPageToken != "" && (len(resp.Tasks) == 0 || resp.NextPageToken != engine.EncodeToken(resp.TaskCursors[len(resp.TaskCursors)-1])) {
		t.Errorf("next token %q does not encode the last task's cursor", resp.NextPageToken)
	}
}

// TestRescansBounded: a List whose final reads keep finding selected
// tasks deleted scans at most MaxScans times (A5). Then it returns the
// selected tasks that survived the last final read, each as read, with a
// token when more follow; when none survived it answers an empty page if
// nothing follows, and ErrListContention if more does.
func TestRescansBounded(t *testing.T) {
	const maxScans = authz.MaxScans
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		tasks   int
		size    int
		all     bool // delete every task read, not only the top one
		wantLen int  // tasks on the page
		// The total: the last scan's count less the tasks its final
		// read found deleted (one per earlier scan, then the page's).
		wantTotal int
		wantErr   error
	}{
		{"top", 200, 10, false, 9, 200 - maxScans, nil},
		{"all-more-follow", 10, 6, true, 0, 0, authz.ErrListContention},
		{"all-nothing-follows", 10, 100, true, 0, 0, nil},
	} {
		for _, total := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/total=%v", tc.name, total), func(t *testing.T) {
				c := storetest.NewManualClock(1000)
				mem := newMem(t, c)
				for i := range tc.tasks {
					c.Advance(1)
					if _, err := mem.Create(ctx, working(a2a.TaskID(fmt.Sprintf("t%03d", i)), "a")); err != nil {
						t.Fatal(err)
					}
				}
				// Every final read finds the top of its page deleted (or
				// every task it reads).
				pr := &probe{Store: mem}
				fresh := false
				pr.afterList = func(*engine.ListResponse) { fresh = true }
				pr.beforeGet = func(id a2a.TaskID) {
					if fresh || tc.all {
						fresh = false
						if err := mem.Delete(ctx, id); err != nil {
							t.Error(err)
						}
					}
				}
				req := engine.ListRequest{PageSize: tc.size, IncludeTotalSize: total}
				resp, err := authz.New(pr, admitAll).List(ctx, &req)
				pr.beforeGet = nil
				scans := 0
				for _, l := range pr.lists {
					if l.PageToken == "" {
						scans++
					}
				}
				if scans != maxScans {
					t.Errorf("%d scans, want %d", scans, maxScans)
				}
				if tc.wantErr != nil {
					if resp != nil || !errors.Is(err, tc.wantErr) || !errors.Is(err, engine.ErrInternal) {
						t.Fatalf("List = %v, %v; want %v", resp, err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Tasks) != tc.wantLen || (resp.NextPageToken != "") != (tc.wantLen > 0) {
					t.Fatalf("page of %d tasks, token %q; want %d tasks and a token iff any", len(resp.Tasks), resp.NextPageToken, tc.wantLen)
				}
				if total && resp.TotalSize != tc.wantTotal {
					t.Errorf("total %d, want %d", resp.TotalSize, tc.wantTotal)
				}
				checkCurrent(t, mem, &req, resp)
			})
		}
	}
}

// TestDeletedRescanStopsWithContext: rescans end when the context does.
func TestDeletedRescanStopsWithContext(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	for i := range 3 {
		c.Advance(1)
		if _, err := mem.Create(context.Background(), working(a2a.TaskID(fmt.Sprint("t", i)), "a")); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr := &probe{Store: mem}
	pr.beforeGet = func(id a2a.TaskID) {
		cancel()
		_ = mem.Delete(context.Background(), id)
	}
	resp, err := authz.New(pr, admitAll).List(ctx, &engine.ListRequest{})
	if resp != nil || !errors.Is(err, context.Canceled) || len(pr.lists) != 1 {
		t.Fatalf("List = %v, %v after %d scans; want context.Canceled after 1", resp, err, len(pr.lists))
	}
}

// TestLightRequest: a light request returns light tasks without re-reading
// them in full, and still re-checks them before returning (A4, A5).
func TestLightRequest(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	ctx := context.Background()
	for i := range 5 {
		c.Advance(1)
		task := randomTask(rand.New(rand.NewPCG(uint64(i), 1)), i)
		task.Status.Message = a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("busy"))
		task.History = []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))}
		if _, err := mem.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	pol := new(revocable)
	pr := &probe{Store: mem}
	d := authz.New(pr, pol)
	resp, err := d.List(ctx, &engine.ListRequest{Projection: engine.ProjectionLight, IncludeArtifacts: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != 5 || pr.gets != 0 {
		t.Fatalf("got %d tasks with %d Gets, want 5 and none", len(resp.Tasks), pr.gets)
	}
	for _, task := range resp.Tasks {
		if task.Status.Message != nil || task.History != nil || task.Artifacts != nil {
			t.Fatalf("light task carries heavy fields: %s", jsonOf(task))
		}
	}
	for _, l := range pr.lists {
		if l.Projection != engine.ProjectionLight {
			t.Fatalf("scan used projection %v", l.Projection)
		}
	}
	// Revoked right after the scan admitted it, before the dispatcher
	// returns.
	pol.afterCheck = func(id a2a.TaskID) {
		pol.afterCheck = nil
		pol.revoke(id)
	}
	if _, err := d.List(ctx, &engine.ListRequest{Projection: engine.ProjectionLight}); err == nil || !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("List with a task revoked after the scan = %v, want not found", err)
	}
}

// TestTokenAcrossCallers: a token issued to one caller, used by another or
// with changed filters, yields only the second caller's visible tasks after
// the boundary; an empty page has an empty token (T6, T7).
func TestTokenAcrossCallers(t *testing.T) {
	r := seed(t)
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	fill(t, r, mem, c, 300)
	all := reference(t, mem)
	d := authz.New(mem, authz.OwnerPolicy{})
	alice := authz.WithCaller(context.Background(), "alice")
	bob := authz.WithCaller(context.Background(), "bob")
	pages := traverse(t, alice, d, engine.ListRequest{PageSize: 7})
	if len(pages) < 3 {
		t.Fatalf("want several pages, got %d", len(pages))
	}
	for _, p := range pages[:len(pages)-1] {
		for _, req := range []engine.ListRequest{
			{PageSize: 7, PageToken: p.NextPageToken, IncludeTotalSize: true},
			{PageSize: 100, PageToken: p.NextPageToken, ContextID: "b", IncludeTotalSize: true},
			{PageSize: 3, PageToken: p.NextPageToken, Status: a2a.TaskStateWorking},
		} {
			got, err := d.List(bob, &req)
			if err != nil {
				t.Fatal(err)
			}
			bound, _ := engine.DecodeToken(p.NextPageToken)
			q, _ := engine.ParseListRequest(&req)
			var want []a2a.TaskID
			total := 0
			for i, task := range all.tasks {
				owner := all.owners[i]
				if owner != "bob" || !listpage.Matches(&q, owner, task.ContextID, task.Status.State, task.Status.Timestamp) {
					continue
				}
				total++
				if all.cursors[i].Compare(bound) > 0 {
					want = append(want, task.ID)
				}
			}
			more := len(want) > q.PageSize
			want = want[:min(len(want), q.PageSize)]
			if !slices.Equal(ids(got.Tasks), want) || (got.NextPageToken != "") != more {
				t.Fatalf("bob with alice's token %+v: got %v (next %q), want %v (more %v)", req, ids(got.Tasks), got.NextPageToken, want, more)
			}
			if req.IncludeTotalSize && got.TotalSize != total {
				t.Fatalf("total %d, want %d", got.TotalSize, total)
			}
			for i, task := range got.Tasks {
				if got.TaskOwners[i] != "bob" {
					t.Fatalf("bob sees %s of %q", jsonOf(task), got.TaskOwners[i])
				}
			}
		}
	}
	// An empty page: the boundary is the last task of the whole store.
	last := engine.EncodeToken(all.cursors[len(all.cursors)-1])
	got, err := d.List(alice, &engine.ListRequest{PageToken: last, IncludeTotalSize: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tasks) != 0 || got.Tasks == nil || got.NextPageToken != "" || got.TotalSize == 0 {
		t.Fatalf("empty page: %d tasks (nil %v), token %q, total %d", len(got.Tasks), got.Tasks == nil, got.NextPageToken, got.TotalSize)
	}
}

// TestTokenErrorsIgnoreScope: bad tokens and bad requests fail with the same
// error whatever the caller may see, before the policy runs (T4).
func TestTokenErrorsIgnoreScope(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	fill(t, rand.New(rand.NewPCG(1, 2)), mem, c, 50)
	bg := context.Background()
	callers := []caseSpec{
		{"owner", authz.OwnerPolicy{}, authz.WithCaller(bg, "alice")},
		{"anonymous", authz.OwnerPolicy{}, bg},
		{"emptyset", authz.ContextAllowList{}, bg},
		{"onecontext", authz.ContextAllowList{}, authz.WithAllowedContexts(bg, "a")},
		{"allowall", authz.AllowAll{}, bg},
		{"admitall", admitAll, bg},
		{"policyerror", errPolicy{}, bg},
	}
	for _, tok := range []string{"0", "1", "50", "-1", "v1.", "v2.AAAAAAAAAAFh", "v1.AAAAAAAAAAFh=", "v1.AAAAAAAAAAE"} {
		for _, cs := range callers {
			_, err := authz.New(mem, cs.policy).List(cs.ctx, &engine.ListRequest{PageToken: tok})
			if err != engine.ErrInvalidPageToken {
				t.Errorf("%s, token %q: %v, want the generic token error itself", cs.name, tok, err)
			}
		}
	}
	// A backend that cannot represent some boundaries (as PostgreSQL
	// cannot store NUL): its generic token error reaches every caller,
	// with and without a total.
	picky := &probe{Store: mem}
	picky.beforeList = func(req *engine.ListRequest) error {
		if c, err := engine.DecodeToken(req.PageToken); err == nil && strings.ContainsRune(string(c.ID), 0) {
			return engine.ErrInvalidPageToken
		}
		return nil
	}
	nul := engine.EncodeToken(engine.Cursor{UpdatedAt: 1100, ID: "a\x00b"})
	for _, total := range []bool{false, true} {
		for _, cs := range callers[:len(callers)-1] {
			_, err := authz.New(picky, cs.policy).List(cs.ctx, &engine.ListRequest{PageToken: nul, IncludeTotalSize: total})
			if err != engine.ErrInvalidPageToken {
				t.Errorf("%s, unrepresentable token, total %v: %v, want the generic token error itself", cs.name, total, err)
			}
		}
	}
	for _, req := range []engine.ListRequest{{PageSize: -1}, {PageSize: 101}, {Status: "bogus"}, {HistoryLength: ptr(-1)}} {
		var first error
		for _, cs := range callers {
			_, err := authz.New(mem, cs.policy).List(cs.ctx, &req)
			if !errors.Is(err, engine.ErrInvalidArgument) || (first != nil && err.Error() != first.Error()) {
				t.Errorf("%s, %+v: %v (first caller: %v)", cs.name, req, err, first)
			}
			first = err
		}
	}
}

// errPolicy fails every decision.
type errPolicy struct{}

var errPolicyDown = errors.New("policy down")

func (errPolicy) ScopeTaskList(context.Context, engine.ListRequest) (engine.ListRequest, error) {
	return engine.ListRequest{}, errPolicyDown
}
func (errPolicy) CanAccessTask(context.Context, *a2a.Task) (bool, error) { return false, errPolicyDown }
func (errPolicy) Projection() engine.Projection                          { return engine.ProjectionLight }

// TestFailClosed: a store whose cursors are missing or misaligned makes List
// fail with ErrInternal and no tasks (A7).
func TestFailClosed(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	ctx := context.Background()
	for i := range 20 {
		c.Advance(1)
		if _, err := mem.Create(ctx, &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%02d", i)), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		alter func(*engine.ListResponse)
	}{
		{"nocursors", func(r *engine.ListResponse) { r.TaskCursors = nil }},
		{"shortcursors", func(r *engine.ListResponse) { r.TaskCursors = r.TaskCursors[:len(r.TaskCursors)-1] }},
		{"extracursor", func(r *engine.ListResponse) {
			r.TaskCursors = append(r.TaskCursors, engine.Cursor{UpdatedAt: 1, ID: "x"})
		}},
		{"swappedids", func(r *engine.ListResponse) { r.Tasks[0], r.Tasks[1] = r.Tasks[1], r.Tasks[0] }},
		{"notdescending", func(r *engine.ListResponse) {
			r.Tasks[0], r.Tasks[1] = r.Tasks[1], r.Tasks[0]
			r.TaskCursors[0], r.TaskCursors[1] = r.TaskCursors[1], r.TaskCursors[0]
		}},
		{"duplicate", func(r *engine.ListResponse) { r.Tasks[1], r.TaskCursors[1] = r.Tasks[0], r.TaskCursors[0] }},
		{"nilTask", func(r *engine.ListResponse) { r.Tasks[2] = nil }},
		{"emptyWithToken", func(r *engine.ListResponse) {
			r.Tasks, r.TaskCursors, r.NextPageToken = nil, nil, engine.EncodeToken(engine.Cursor{UpdatedAt: 1, ID: "x"})
		}},
	} {
		for _, req := range []engine.ListRequest{{PageSize: 5}, {PageSize: 5, IncludeTotalSize: true}, {Projection: engine.ProjectionLight}} {
			for _, pol := range []authz.Policy{authz.AllowAll{}, admitAll} {
				t.Run(tc.name, func(t *testing.T) {
					pr := &probe{Store: mem, afterList: tc.alter}
					resp, err := authz.New(pr, pol).List(ctx, &req)
					if resp != nil || !errors.Is(err, engine.ErrInternal) {
						t.Fatalf("%+v: got %v, %v; want nil, ErrInternal", req, resp, err)
					}
					if pr.gets != 0 {
						t.Fatalf("%d tasks read in full after a misaligned batch", pr.gets)
					}
				})
			}
		}
	}
	// A pass-through page whose token is not its last task's cursor.
	pr := &probe{Store: mem, afterList: func(r *engine.ListResponse) { r.NextPageToken = engine.EncodeToken(r.TaskCursors[0]) }}
	if resp, err := authz.New(pr, authz.AllowAll{}).List(ctx, &engine.ListRequest{PageSize: 5}); resp != nil || !errors.Is(err, engine.ErrInternal) {
		t.Fatalf("token off the last cursor: %v, %v", resp, err)
	}
	// A later batch that goes back above the previous one.
	calls := 0
	var first engine.Cursor
	pr = &probe{Store: mem, afterList: func(r *engine.ListResponse) {
		calls++
		if calls == 1 {
			first = r.TaskCursors[0]
			return
		}
		r.Tasks[0] = &a2a.Task{ID: first.ID}
		r.TaskCursors[0] = first
	}}
	resp, err := authz.New(pr, funcPolicy{allow: func(context.Context, *a2a.Task) bool { return false }}).List(ctx, &engine.ListRequest{PageSize: 1})
	if resp != nil || !errors.Is(err, engine.ErrInternal) || calls < 2 {
		t.Fatalf("repeated cursor across batches: %v, %v after %d batches", resp, err, calls)
	}
}

// TestScanStartsAtBoundary: without a total the scan starts at the boundary
// (the store receives the request's token) and reads only what the page
// needs; with a total it scans the whole narrowed result.
func TestScanStartsAtBoundary(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	fill(t, rand.New(rand.NewPCG(3, 4)), mem, c, 1000)
	ctx := context.Background()
	pr := &probe{Store: mem}
	d := authz.New(pr, admitAll)
	first, err := d.List(ctx, &engine.ListRequest{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	pr.reset()
	if _, err := d.List(ctx, &engine.ListRequest{PageSize: 10, PageToken: first.NextPageToken}); err != nil {
		t.Fatal(err)
	}
	if len(pr.lists) != 1 || pr.lists[0].PageToken != first.NextPageToken || pr.rows != 11 || pr.gets != 10 {
		t.Fatalf("no total: %d store lists (first token %q), %d rows, %d gets; want 1 at the boundary, 11 rows, 10 gets",
			len(pr.lists), pr.lists[0].PageToken, pr.rows, pr.gets)
	}
	pr.reset()
	resp, err := d.List(ctx, &engine.ListRequest{PageSize: 10, PageToken: first.NextPageToken, IncludeTotalSize: true})
	if err != nil {
		t.Fatal(err)
	}
	// With a total: from the top to the boundary, then from the boundary
	// with the caller's own token, re-reading at most one batch.
	withToken := slices.IndexFunc(pr.lists, func(l engine.ListRequest) bool { return l.PageToken == first.NextPageToken })
	if pr.lists[0].PageToken != "" || withToken < 1 || pr.rows < 1000 || pr.rows > 1000+authz.BatchSize ||
		resp.TotalSize != 1000 || pr.maxBatch > authz.BatchSize || len(resp.Tasks) != 10 {
		t.Fatalf("with total: first token %q, caller's token at call %d, %d rows, total %d, max batch %d",
			pr.lists[0].PageToken, withToken, pr.rows, resp.TotalSize, pr.maxBatch)
	}
	for _, l := range pr.lists {
		if l.IncludeTotalSize || l.PageSize > authz.BatchSize || l.Projection != engine.ProjectionLight {
			t.Fatalf("scan batch %+v", l)
		}
	}
	// A policy that needs whole tasks gets them in the scan (A4).
	pr.reset()
	full := funcPolicy{proj: engine.ProjectionFull, allow: func(_ context.Context, t *a2a.Task) bool { return t.Artifacts != nil }}
	resp, err = authz.New(pr, full).List(ctx, &engine.ListRequest{PageSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != 10 || len(pr.lists) == 0 || pr.lists[0].Projection != engine.ProjectionFull || pr.lists[0].IncludeTotalSize {
		t.Fatalf("full-projection policy scanned with %+v", pr.lists)
	}
}

// TestLiveTraversal: while other writers replace and delete tasks, a
// dispatcher traversal keeps L7: cursors strictly descend, no ID appears
// twice, and every visible task left alone appears exactly once: through
// the exact owner scope (one store call per page) and through a scan of
// the owner's tasks.
func TestLiveTraversal(t *testing.T) {
	r := seed(t)
	for _, tc := range []struct {
		name   string
		policy authz.Policy
		total  bool
	}{
		{"owner", authz.OwnerPolicy{}, false},
		{"owner", authz.OwnerPolicy{}, true},
		{"inexactowner", inexactOwner{}, false},
		{"inexactowner", inexactOwner{}, true},
	} {
		total := tc.total
		c := storetest.NewManualClock(1000)
		mem := newMem(t, c)
		fill(t, r, mem, c, 400)
		alice := authz.WithCaller(context.Background(), "alice")
		d := authz.New(mem, tc.policy)
		all := reference(t, mem)
		start := all.tasks
		var mu sync.Mutex
		touched := map[a2a.TaskID]bool{}
		stop := make(chan struct{})
		done := make(chan struct{})
		wr := rand.New(rand.NewPCG(r.Uint64(), 2))
		go func() {
			defer close(done)
			bg := context.Background()
			for {
				select {
				case <-stop:
					return
				default:
				}
				task := start[wr.IntN(len(start))]
				mu.Lock()
				touched[task.ID] = true
				mu.Unlock()
				c.Advance(1)
				if wr.IntN(4) == 0 {
					_ = mem.Delete(bg, task.ID)
				} else {
					_, _ = mem.Replace(bg, task, 0)
				}
			}
		}()
		var seen []a2a.TaskID
		var last *engine.Cursor
		req := engine.ListRequest{PageSize: 7, IncludeTotalSize: total}
		for {
			resp, err := d.List(alice, &req)
			if err != nil {
				t.Fatal(err) // deletions before the final read rescan, never fail
			}
			for i, cur := range resp.TaskCursors {
				if last != nil && last.Compare(cur) >= 0 {
					t.Fatalf("cursor %+v does not follow %+v", cur, *last)
				}
				last = &resp.TaskCursors[i]
			}
			seen = append(seen, ids(resp.Tasks)...)
			if resp.NextPageToken == "" {
				break
			}
			req.PageToken = resp.NextPageToken
		}
		close(stop)
		<-done
		count := map[a2a.TaskID]int{}
		for _, id := range seen {
			count[id]++
			if count[id] > 1 {
				t.Fatalf("%s, total=%v: %s appears twice", tc.name, total, id)
			}
		}
		for i, task := range start {
			if all.owners[i] == "alice" && !touched[task.ID] && count[task.ID] != 1 {
				t.Fatalf("%s, total=%v: untouched task %s appears %d times", tc.name, total, task.ID, count[task.ID])
			}
		}
	}
}
