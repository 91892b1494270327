package authz_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/storetest"
)

// ownerStore builds a memstore where alice owns 122 tasks (120 in contexts
// a1 and a2, 2 in "ctx-bob") and bob owns foreign tasks, nine in ten in
// "ctx-bob", the others in a1, interleaved in list order with alice's.
// Alice's tasks have the same IDs, times and content whatever foreign is.
func ownerStore(t testing.TB, foreign int) engine.OwnerStore {
	c := storetest.NewManualClock(1_000_000)
	mem := newMem(t, c)
	bg := context.Background()
	const mine = 122
	for i := range mine {
		c.Set(int64(2_000_000 + 1000*i))
		ctxID := []string{"a1", "a2"}[i%2]
		if i == 10 || i == 100 {
			ctxID = "ctx-bob"
		}
		task := working(a2a.TaskID(fmt.Sprintf("a%03d", i)), ctxID)
		if i%3 == 0 {
			task.Status.State = a2a.TaskStateCompleted
		}
		if _, err := mem.CreateOwned(bg, task, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	for i := range foreign {
		// Bob's times fall between, before and after alice's.
		c.Set(int64(1_999_000 + (mine*1000+2000)*i/max(foreign, 1)))
		ctxID := "ctx-bob"
		if i%10 == 0 {
			ctxID = "a1"
		}
		if _, err := mem.CreateOwned(bg, working(a2a.TaskID(fmt.Sprintf("b%06d", i)), ctxID), "bob"); err != nil {
			t.Fatal(err)
		}
	}
	return mem
}

// TestOwnerPageCost (O6 through the dispatcher): under OwnerPolicy a
// caller's page is one store List, reading PageSize+1 entries (filtered by
// owner, or owner and context), with the
// total from the store's counters (nothing counted; memstore counts an
// owner's tasks of one context and state among that owner's entries of
// the context only) — with 100k tasks of another owner in the store
// exactly as with none, also when the caller filters by that owner's busy
// context. Page contents, totals, tokens and costs are identical in both
// stores.
func TestOwnerPageCost(t *testing.T) {
	if testing.Short() {
		t.Skip("100k tasks")
	}
	alice := authz.WithCaller(context.Background(), "alice")
	empty, busy := ownerStore(t, 0), ownerStore(t, 100_000)
	for _, req := range []engine.ListRequest{
		{PageSize: 50, IncludeTotalSize: true},
		{PageSize: 50, IncludeTotalSize: true, Projection: engine.ProjectionLight},
		{PageSize: 20, IncludeTotalSize: true, Status: a2a.TaskStateWorking},
		{PageSize: 1, IncludeTotalSize: true, ContextID: "ctx-bob"}, // bob's busy context
		{PageSize: 10, IncludeTotalSize: true, ContextID: "a1", Status: a2a.TaskStateCompleted},
		{PageSize: 7}, // no total: nothing counted either way
	} {
		var got [2][]*engine.ListResponse
		for k, s := range []engine.OwnerStore{empty, busy} {
			pr := &probe{Store: s}
			pages := traverse(t, alice, authz.New(pr, authz.OwnerPolicy{}), req)
			if len(pr.lists) != len(pages) || pr.gets != 0 {
				t.Fatalf("%+v: %d store lists and %d gets for %d pages; want one list per page", req, len(pr.lists), pr.gets, len(pages))
			}
			// Pages by owner, or owner and context, visit PageSize+1
			// entries; a state filter also skips the owner's own
			// entries of other states (equal with or without bob's
			// tasks, checked below).
			seek := req.Status == ""
			for i, p := range pages {
				size := p.PageSize
				switch {
				case !seek:
				case p.NextPageToken != "" && p.Stats.Examined != size+1:
					t.Errorf("%+v, page %d: examined %d entries, want PageSize+1 = %d (O6)", req, i, p.Stats.Examined, size+1)
				case p.NextPageToken == "" && p.Stats.Examined != len(p.Tasks):
					t.Errorf("%+v, last page %d: examined %d entries for %d tasks", req, i, p.Stats.Examined, len(p.Tasks))
				}
				counters := req.ContextID == "" || req.Status == ""
				if (counters && p.Stats.Counted != 0) || p.Stats.TotalComputed != req.IncludeTotalSize {
					t.Errorf("%+v, page %d: counted %d entries (computed %v), want 0: the owner's total comes from counters",
						req, i, p.Stats.Counted, p.Stats.TotalComputed)
				}
				for j, o := range p.TaskOwners {
					if o != "alice" {
						t.Fatalf("%+v: task %s of %q listed to alice", req, p.Tasks[j].ID, o)
					}
				}
			}
			got[k] = pages
		}
		if g0, g1 := jsonOf(got[0]), jsonOf(got[1]); g0 != g1 {
			t.Fatalf("%+v: pages differ with 100k foreign tasks:\n%s\n%s", req, g0, g1)
		}
		for i := range got[0] {
			if got[0][i].Stats != got[1][i].Stats {
				t.Fatalf("%+v, page %d: cost %+v without foreign tasks, %+v with 100k", req, i, got[0][i].Stats, got[1][i].Stats)
			}
		}
	}
	// The same page through a policy that does not narrow by owner (as
	// before #15) reads every task to count them.
	resp, err := authz.New(busy, scanOwner{}).List(alice, &engine.ListRequest{PageSize: 50, IncludeTotalSize: true})
	if err != nil || resp.TotalSize != 122 || resp.Stats.Examined < 100_000 {
		t.Fatalf("scan path: total %v, examined %d, %v; want 122 found among 100k+", resp.TotalSize, resp.Stats.Examined, err)
	}
}

// TestOwnerFilterFailsClosed: whenever the dispatcher needs owners (an
// owner filter, or a policy deciding by owner), a store page without its
// owners, with owners misaligned with its tasks, with tasks of another
// owner (a store that ignores ListRequest.Owner) or, on the exact path,
// with tasks outside the scope's other filters fails the List with
// engine.ErrInternal and no task, before any task is read whole (A7).
func TestOwnerFilterFailsClosed(t *testing.T) {
	mem := ownerStore(t, 300)
	bg := context.Background()
	alice := authz.WithCaller(bg, "alice")
	type alter struct {
		name   string
		before func(*engine.ListRequest) error
		after  func(*engine.ListResponse)
	}
	alters := []alter{
		{"dropped-owners", nil, func(r *engine.ListResponse) { r.TaskOwners = nil }},
		{"short-owners", nil, func(r *engine.ListResponse) { r.TaskOwners = r.TaskOwners[:len(r.TaskOwners)-1] }},
		{"extra-owner", nil, func(r *engine.ListResponse) { r.TaskOwners = append(r.TaskOwners, "alice") }},
		{"ignores-owner", func(req *engine.ListRequest) error { req.Owner = ""; return nil }, nil},
		{"ignores-context", func(req *engine.ListRequest) error { req.ContextID = ""; return nil }, nil},
	}
	for _, tc := range []struct {
		name   string
		policy authz.Policy
		ctx    context.Context
		req    engine.ListRequest
	}{
		{"owner", authz.OwnerPolicy{}, alice, engine.ListRequest{PageSize: 5}},
		{"owner/total", authz.OwnerPolicy{}, alice, engine.ListRequest{PageSize: 5, IncludeTotalSize: true}},
		{"owner/context", authz.OwnerPolicy{}, alice, engine.ListRequest{PageSize: 5, ContextID: "a1"}},
		{"inexactowner", inexactOwner{}, alice, engine.ListRequest{PageSize: 5, IncludeTotalSize: true}},
		{"allowall/owner-filter", authz.AllowAll{}, bg, engine.ListRequest{PageSize: 5, Owner: "alice"}},
		{"admitall/owner-filter", admitAll, bg, engine.ListRequest{PageSize: 5, Owner: "alice", Projection: engine.ProjectionLight}},
		{"ownedall", ownedAll{admitAll}, bg, engine.ListRequest{PageSize: 5}},
	} {
		for _, a := range alters {
			if a.name == "ignores-context" && tc.req.ContextID == "" ||
				a.name == "ignores-owner" && tc.name == "ownedall" {
				continue // nothing to ignore
			}
			t.Run(tc.name+"/"+a.name, func(t *testing.T) {
				pr := &probe{Store: mem, beforeList: a.before, afterList: a.after}
				req := tc.req
				resp, err := authz.New(pr, tc.policy).List(tc.ctx, &req)
				if resp != nil || !errors.Is(err, engine.ErrInternal) {
					t.Fatalf("got %v, %v; want nil, ErrInternal", resp, err)
				}
				if pr.gets != 0 {
					t.Fatalf("%d tasks read whole after a bad page", pr.gets)
				}
			})
		}
	}
	// Unaltered, every case answers.
	for _, pol := range []authz.Policy{authz.OwnerPolicy{}, inexactOwner{}} {
		if _, err := authz.New(&probe{Store: mem}, pol).List(alice, &engine.ListRequest{PageSize: 5, IncludeTotalSize: true}); err != nil {
			t.Fatalf("%T: %v", pol, err)
		}
	}
}

// revokedOne is OwnerPolicy (an exact scope) whose check denies one task:
// a scope and a check that disagree.
type revokedOne struct {
	authz.OwnerPolicy
	id a2a.TaskID
}

func (p revokedOne) CanAccessOwned(ctx context.Context, t *a2a.Task, owner string) (bool, error) {
	if t.ID == p.id {
		return false, nil
	}
	return p.OwnerPolicy.CanAccessOwned(ctx, t, owner)
}

// TestExactScopeChecksEveryTask: on the exact path every task of the store
// page is still checked (defence in depth); a task the check denies fails
// the List closed, with no task, instead of returning it.
func TestExactScopeChecksEveryTask(t *testing.T) {
	mem := ownerStore(t, 10)
	alice := authz.WithCaller(context.Background(), "alice")
	d := authz.New(mem, revokedOne{id: "a119"}) // on alice's first page
	for _, req := range []engine.ListRequest{{PageSize: 5}, {PageSize: 5, Projection: engine.ProjectionLight}, {PageSize: 5, IncludeTotalSize: true}} {
		resp, err := d.List(alice, &req)
		if resp != nil || !errors.Is(err, engine.ErrInternal) {
			t.Fatalf("%+v: %v, %v; want nil, ErrInternal", req, resp, err)
		}
	}
	// Pages without it are served.
	first, err := authz.New(mem, authz.OwnerPolicy{}).List(alice, &engine.ListRequest{PageSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := d.List(alice, &engine.ListRequest{PageSize: 5, PageToken: first.NextPageToken}); err != nil || len(resp.Tasks) != 5 {
		t.Fatalf("the next page: %v, %v", resp, err)
	}
}

// TestUnauthenticatedList: under OwnerPolicy a caller without identity
// cannot list (ErrUnauthenticated, an invalid argument), as a2a-go's
// taskstore.InMemory refuses; the store is not read, except to judge a
// page token, so a bad token still fails alike for every caller (T4).
// Reads of a task answer not found, as for a missing one (A6), and Create
// is ErrUnauthenticated. An empty identity is no identity, also from a
// custom Caller that says it identified one (else it would list with no
// owner filter: everyone's tasks and totals); so is an identity no owner
// can be (over engine.MaxOwnerBytes), which would otherwise be a server
// fault on Create and an invalid owner filter on List.
func TestUnauthenticatedList(t *testing.T) {
	mem := ownerStore(t, 10)
	bg := context.Background()
	anonUser, cc := a2asrv.NewCallContext(bg, nil)
	cc.User = &a2asrv.User{Name: "alice"} // named, not authenticated
	long := strings.Repeat("x", engine.MaxOwnerBytes+1)
	longUser, cc := a2asrv.NewCallContext(bg, nil)
	cc.User = a2asrv.NewAuthenticatedUser(long, nil)
	first, err := mem.List(bg, &engine.ListRequest{PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	end := engine.EncodeToken(engine.Cursor{UpdatedAt: 0, ID: "\x00"}) // past every task: an empty page
	says := func(id string) authz.OwnerPolicy {
		return authz.OwnerPolicy{Caller: func(context.Context) (string, bool) { return id, true }}
	}
	for name, c := range map[string]struct {
		ctx    context.Context
		policy authz.OwnerPolicy
	}{
		"no caller":                {bg, authz.OwnerPolicy{}},
		"empty caller":             {authz.WithCaller(bg, ""), authz.OwnerPolicy{}},
		"unauthenticated user":     {anonUser, authz.OwnerPolicy{}},
		"Caller says empty":        {bg, says("")},
		"over-long caller":         {authz.WithCaller(bg, long), authz.OwnerPolicy{}},
		"over-long user":           {longUser, authz.OwnerPolicy{}},
		"Caller says over-long id": {bg, says(long)},
	} {
		ctx := c.ctx
		for _, tok := range []string{"", first.NextPageToken, end} {
			pr := &probe{Store: mem}
			resp, err := authz.New(pr, c.policy).List(ctx, &engine.ListRequest{PageToken: tok, IncludeTotalSize: true})
			if resp != nil || !errors.Is(err, authz.ErrUnauthenticated) || !errors.Is(err, engine.ErrInvalidArgument) {
				t.Errorf("%s, token %q: %v, %v; want ErrUnauthenticated", name, tok, resp, err)
			}
			if want := map[bool]int{false: 0, true: 1}[tok != ""]; len(pr.lists) != want {
				t.Errorf("%s, token %q: %d store lists, want %d (only to judge the token)", name, tok, len(pr.lists), want)
			}
		}
		if _, err := authz.New(mem, c.policy).List(ctx, &engine.ListRequest{PageToken: "v1.bogus"}); err != engine.ErrInvalidPageToken {
			t.Errorf("%s, bad token: %v, want the generic token error", name, err)
		}
		if _, err := authz.New(mem, c.policy).Get(ctx, "a000"); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("%s, Get: %v, want not found", name, err)
		}
		if _, err := authz.New(mem, c.policy).Create(ctx, working(a2a.TaskID("new-"+name), "c")); !errors.Is(err, authz.ErrUnauthenticated) {
			t.Errorf("%s, Create: %v, want ErrUnauthenticated", name, err)
		}
		if c.policy.ScopeIsExact(ctx, engine.ListRequest{}) {
			t.Errorf("%s: a scope without owner is exact", name)
		}
	}
}

// fixedScope scopes every list to scope, whatever the caller asked, and
// admits every task; its scopes are exact when exact is set.
type fixedScope struct {
	scope engine.ListRequest
	exact bool
}

func (p fixedScope) ScopeTaskList(context.Context, engine.ListRequest) (engine.ListRequest, error) {
	return p.scope, nil
}
func (fixedScope) CanAccessTask(context.Context, *a2a.Task) (bool, error) { return true, nil }
func (fixedScope) Projection() engine.Projection                          { return engine.ProjectionLight }
func (p fixedScope) ScopeIsExact(context.Context, engine.ListRequest) bool {
	return p.exact
}

// TestScopeCombinesFilters: the store reads apply the caller's filters and
// the scope's together, on the exact path and the scan path: a scope that
// drops a caller's filter cannot widen the answer, the later of two status
// times applies, and filters that exclude each other read nothing.
func TestScopeCombinesFilters(t *testing.T) {
	mem := ownerStore(t, 50)
	bg := context.Background()
	t1, t2 := time.UnixMicro(1).UTC(), time.UnixMicro(2).UTC()
	for _, exact := range []bool{false, true} {
		for _, tc := range []struct {
			name   string
			caller engine.ListRequest
			scope  engine.ListRequest
			want   engine.ListRequest // the filters of every store read; zero: none
		}{
			{"context+state", engine.ListRequest{Status: a2a.TaskStateWorking}, engine.ListRequest{ContextID: "a1"},
				engine.ListRequest{ContextID: "a1", Status: a2a.TaskStateWorking}},
			{"dropped-filter", engine.ListRequest{ContextID: "a1", Owner: "bob"}, engine.ListRequest{},
				engine.ListRequest{ContextID: "a1", Owner: "bob"}},
			{"later-time", engine.ListRequest{StatusTimestampAfter: &t1}, engine.ListRequest{StatusTimestampAfter: &t2},
				engine.ListRequest{StatusTimestampAfter: &t2}},
			{"later-time-caller", engine.ListRequest{StatusTimestampAfter: &t2}, engine.ListRequest{StatusTimestampAfter: &t1},
				engine.ListRequest{StatusTimestampAfter: &t2}},
			{"contexts-exclude", engine.ListRequest{ContextID: "a1"}, engine.ListRequest{ContextID: "a2"}, engine.ListRequest{}},
			{"owners-exclude", engine.ListRequest{Owner: "alice"}, engine.ListRequest{Owner: "bob"}, engine.ListRequest{}},
			{"states-exclude", engine.ListRequest{Status: a2a.TaskStateWorking}, engine.ListRequest{Status: a2a.TaskStateCompleted}, engine.ListRequest{}},
		} {
			pr := &probe{Store: mem}
			req := tc.caller
			req.PageSize, req.IncludeTotalSize = 10, true
			resp, err := authz.New(pr, fixedScope{tc.scope, exact}).List(bg, &req)
			if err != nil {
				t.Fatalf("exact=%v %s: %v", exact, tc.name, err)
			}
			if tc.want == (engine.ListRequest{}) {
				if len(pr.lists) != 0 || len(resp.Tasks) != 0 || resp.TotalSize != 0 {
					t.Errorf("exact=%v %s: %d store reads, %d tasks, total %d; want none", exact, tc.name, len(pr.lists), len(resp.Tasks), resp.TotalSize)
				}
				continue
			}
			if len(pr.lists) == 0 {
				t.Fatalf("exact=%v %s: no store read", exact, tc.name)
			}
			for _, l := range pr.lists {
				if l.ContextID != tc.want.ContextID || l.Owner != tc.want.Owner || l.Status != tc.want.Status ||
					(l.StatusTimestampAfter == nil) != (tc.want.StatusTimestampAfter == nil) ||
					(l.StatusTimestampAfter != nil && !l.StatusTimestampAfter.Equal(*tc.want.StatusTimestampAfter)) {
					t.Errorf("exact=%v %s: store read %+v, want the filters of %+v", exact, tc.name, l, tc.want)
				}
			}
		}
	}
}

// ownerNotIn is OwnerPolicy that also denies tasks in one context: a
// decision on the content and the owner together.
type ownerNotIn struct {
	authz.OwnerPolicy
	context string
}

func (p ownerNotIn) CanAccessOwned(ctx context.Context, t *a2a.Task, owner string) (bool, error) {
	ok, err := p.OwnerPolicy.CanAccessOwned(ctx, t, owner)
	return ok && t.ContextID != p.context, err
}

// TestReplaceJudgesContentWithOwner: under a policy deciding by owner, a
// Replace's new content is judged with the stored owner, which Replace
// keeps (O2): content the owner could not access is ErrDenied and changes
// nothing; another caller still gets not found first, exactly as for a
// missing task (A6); Create judges its content with the owner it records.
func TestReplaceJudgesContentWithOwner(t *testing.T) {
	mem := newMem(t, storetest.NewManualClock(1000))
	bg := context.Background()
	alice, bob := authz.WithCaller(bg, "alice"), authz.WithCaller(bg, "bob")
	d := authz.New(mem, ownerNotIn{context: "forbidden"})
	if _, err := d.Create(alice, working("t", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create(alice, working("t2", "forbidden")); !errors.Is(err, authz.ErrDenied) {
		t.Fatalf("Create into the forbidden context: %v, want ErrDenied", err)
	}
	for _, rev := range []int64{0, 1} {
		if _, err := d.Replace(alice, working("t", "forbidden"), rev); !errors.Is(err, authz.ErrDenied) {
			t.Fatalf("alice moving her task into the forbidden context (rev %d): %v, want ErrDenied", rev, err)
		}
		_, hidden := d.Replace(bob, working("t", "forbidden"), rev)
		_, missing := d.Replace(bob, working("nope", "forbidden"), rev)
		if hidden == nil || hidden != missing {
			t.Fatalf("bob replacing alice's task (rev %d): %v; a missing one: %v; want the same not-found error", rev, hidden, missing)
		}
	}
	if rec, err := mem.Get(bg, "t"); err != nil || rec.Revision != 1 || rec.Task.ContextID != "a" {
		t.Fatalf("refused replaces changed the task: %+v, %v", rec, err)
	}
	if rec, err := d.Replace(alice, working("t", "b"), 1); err != nil || rec.Owner != "alice" {
		t.Fatalf("allowed replace: %+v, %v", rec, err)
	}
}
