package authz_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/storetest"
)

func working(id a2a.TaskID, contextID string) *a2a.Task {
	return &a2a.Task{ID: id, ContextID: contextID, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
}

// pointOps runs every point operation on id and returns their errors.
func pointOps(ctx context.Context, d engine.Store, id a2a.TaskID, content *a2a.Task) map[string]error {
	_, get := d.Get(ctx, id)
	_, cancel := d.Cancel(ctx, id)
	_, repl := d.Replace(ctx, content, 0)
	_, repl1 := d.Replace(ctx, content, 1)
	_, app := d.AppendHistory(ctx, id, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x")))
	del := d.Delete(ctx, id)
	return map[string]error{"get": get, "cancel": cancel, "replace": repl, "replace1": repl1, "append": app, "delete": del}
}

// TestInaccessibleIsMissing: every point operation on a task the caller
// cannot access fails exactly like one on a missing task, and changes
// nothing (A6).
func TestInaccessibleIsMissing(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	bg := context.Background()
	alice := authz.WithCaller(bg, "alice")
	bob := authz.WithCaller(bg, "bob")
	for _, tc := range []struct {
		name       string
		policy     authz.Policy
		owner, spy context.Context
		spyContext string // the context of the spy's own replacement content
	}{
		{"owner", authz.OwnerPolicy{}, alice, bob, "a"},
		{"anonymous", authz.OwnerPolicy{}, alice, bg, "a"},
		{"contexts", authz.ContextAllowList{}, authz.WithAllowedContexts(bg, "a"), authz.WithAllowedContexts(bg, "b"), "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := authz.New(mem, tc.policy)
			id := a2a.TaskID("secret-" + tc.name)
			c.Advance(1)
			created, err := d.Create(tc.owner, working(id, "a"))
			if err != nil {
				t.Fatal(err)
			}
			content := working(id, tc.spyContext)
			if tc.spy == bg {
				content = working(id, "a") // cannot pass admission anyway
			}
			hidden := pointOps(tc.spy, d, id, content)
			missingContent := *content
			missingContent.ID = "missing-" + a2a.TaskID(tc.name)
			missing := pointOps(tc.spy, d, missingContent.ID, &missingContent)
			for op, err := range hidden {
				m := missing[op]
				sameValue := err == m || !errors.Is(err, engine.ErrNotFound)
				if err == nil || m == nil || !sameValue || err.Error() != m.Error() {
					t.Errorf("%s: inaccessible %v, missing %v: not the same error", op, err, m)
				}
				if tc.spy != bg && !errors.Is(err, engine.ErrNotFound) {
					t.Errorf("%s: %v, want not found", op, err)
				}
			}
			got, err := mem.Get(bg, id)
			if err != nil || got.Revision != created.Revision || got.Cursor != created.Cursor {
				t.Fatalf("task changed by an inaccessible caller: %+v, %v", got, err)
			}
			// The owner still can do everything.
			for op, err := range pointOps(tc.owner, d, id, working(id, "a")) {
				if op != "replace1" && op != "cancel" && err != nil {
					t.Errorf("owner %s: %v", op, err)
				}
			}
		})
	}
}

// TestReplaceChecksStoredTask: Replace needs access to the stored task, not
// only to the new content (A6), and the new content must stay accessible.
func TestReplaceChecksStoredTask(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	bg := context.Background()
	d := authz.New(mem, authz.ContextAllowList{})
	inA, inB, inAB := authz.WithAllowedContexts(bg, "a"), authz.WithAllowedContexts(bg, "b"), authz.WithAllowedContexts(bg, "a", "b")
	if _, err := d.Create(inA, working("t", "a")); err != nil {
		t.Fatal(err)
	}
	// Content in b is fine for a b-caller, but the stored task is in a.
	_, missing := d.Get(inB, "nope")
	if _, err := d.Replace(inB, working("t", "b"), 0); err != missing || !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("replace of an invisible task: %v, want %v", err, missing)
	}
	// Moving a task out of the caller's scope is denied, before any read.
	if _, err := d.Replace(inA, working("t", "b"), 0); !errors.Is(err, authz.ErrDenied) || !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("replace into a foreign context: %v, want ErrDenied", err)
	}
	if _, err := d.Replace(inA, working("missing", "b"), 0); !errors.Is(err, authz.ErrDenied) {
		t.Fatalf("replace of a missing task into a foreign context: %v, want ErrDenied", err)
	}
	// A caller who sees both may move it.
	rec, err := d.Replace(inAB, working("t", "b"), 0)
	if err != nil || rec.Task.ContextID != "b" || rec.Revision != 2 {
		t.Fatalf("replace by a caller allowed both: %+v, %v", rec, err)
	}
	// Conditional replace keeps its conflict semantics.
	if _, err := d.Replace(inB, working("t", "b"), 1); !errors.Is(err, engine.ErrRevisionConflict) {
		t.Fatalf("stale conditional replace: %v", err)
	}
	if rec, err := d.Replace(inB, working("t", "b"), 2); err != nil || rec.Revision != 3 {
		t.Fatalf("conditional replace: %+v, %v", rec, err)
	}
}

// TestReplaceRechecksAfterConcurrentChange: an unconditional Replace is
// applied only to the version whose access was checked; when the task
// changes in between, the new version is checked again.
func TestReplaceRechecksAfterConcurrentChange(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	bg := context.Background()
	inA := authz.WithAllowedContexts(bg, "a")
	if _, err := mem.Create(bg, working("t", "a")); err != nil {
		t.Fatal(err)
	}
	pr := &probe{Store: mem}
	moved := false
	// Move the task out of a after the dispatcher checked it, before its
	// write reaches the store.
	rs := &replaceHook{probe: pr, before: func() {
		if !moved {
			moved = true
			c.Advance(1)
			if _, err := mem.Replace(bg, working("t", "z"), 0); err != nil {
				t.Error(err)
			}
		}
	}}
	d := authz.New(rs, authz.ContextAllowList{})
	_, err := d.Replace(inA, working("t", "a"), 0)
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("replace after the task left the caller's scope: %v, want not found", err)
	}
	got, _ := mem.Get(bg, "t")
	if got.Task.ContextID != "z" {
		t.Fatalf("the concurrent move was overwritten: %+v", got.Task)
	}
	if pr.gets != 2 {
		t.Fatalf("%d Gets, want 2 (check, re-check after the conflict)", pr.gets)
	}
}

// slowOwner is OwnerPolicy with a slow access check: it yields the
// processor before deciding, widening the window between a check and the
// write that follows it.
type slowOwner struct{ authz.OwnerPolicy }

func (p slowOwner) CanAccessOwned(ctx context.Context, t *a2a.Task, owner string) (bool, error) {
	for range 50 {
		runtime.Gosched()
	}
	return p.OwnerPolicy.CanAccessOwned(ctx, t, owner)
}

// TestUnconditionalReplaceNeverConflicts: many callers replacing one task
// unconditionally (expectedRevision 0) through a dispatcher whose check is
// slow never get ErrRevisionConflict: every call succeeds (S7, W1).
func TestUnconditionalReplaceNeverConflicts(t *testing.T) {
	mem := newMem(t, storetest.NewManualClock(1000))
	alice := authz.WithCaller(context.Background(), "alice")
	d := authz.New(mem, slowOwner{})
	if _, err := d.Create(alice, working("t", "a")); err != nil {
		t.Fatal(err)
	}
	const writers, each = 32, 30
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := map[string]int{}
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				task := working("t", "a")
				task.Metadata = map[string]any{"writer": float64(w), "i": float64(i)}
				if _, err := d.Replace(alice, task, 0); err != nil {
					mu.Lock()
					failures[err.Error()]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("unconditional replaces failed: %v", failures)
	}
	rec, err := mem.Get(context.Background(), "t")
	if err != nil || rec.Revision != 1+writers*each {
		t.Fatalf("after %d replaces: %+v, %v", writers*each, rec, err)
	}
}

// TestUnconditionalReplaceHonoursContext: an unconditional Replace that
// keeps losing to other writers ends with its context, not a conflict.
func TestUnconditionalReplaceHonoursContext(t *testing.T) {
	mem := newMem(t, storetest.NewManualClock(1000))
	bg := context.Background()
	if _, err := mem.Create(bg, working("t", "a")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	writes := 0
	// Another writer changes the task between every check and write;
	// after 100 such losses the caller gives up.
	rs := &replaceHook{probe: &probe{Store: mem}, before: func() {
		if writes++; writes == 100 {
			cancel()
		}
		if _, err := mem.Replace(bg, working("t", "a"), 0); err != nil {
			t.Error(err)
		}
	}}
	_, err := authz.New(rs, admitAll).Replace(ctx, working("t", "a"), 0)
	if !errors.Is(err, context.Canceled) || errors.Is(err, engine.ErrRevisionConflict) || writes != 100 {
		t.Fatalf("Replace = %v after %d lost races; want context.Canceled after 100", err, writes)
	}
}

type replaceHook struct {
	*probe
	before func()
}

func (r *replaceHook) Replace(ctx context.Context, t *a2a.Task, rev int64) (engine.Record, error) {
	r.before()
	return r.probe.Replace(ctx, t, rev)
}

// TestCreateRecordsOwner: OwnerPolicy records the caller as the task's
// owner in the store (O1), never in the task's metadata, which is stored as
// given and grants nothing; Replace keeps the owner (O2); a caller can
// neither create for someone else nor create without an identity.
func TestCreateRecordsOwner(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	bg := context.Background()
	d := authz.New(mem, authz.OwnerPolicy{})
	alice := authz.WithCaller(bg, "alice")
	mallory := authz.WithCaller(bg, "mallory")
	in := working("t1", "a")
	in.Metadata = map[string]any{"a2astore.owner": "mallory", "other": "kept"}
	rec, err := d.Create(alice, in)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Owner != "alice" || jsonOf(rec.Task.Metadata) != jsonOf(in.Metadata) {
		t.Fatalf("created: owner %q, metadata %v; want alice and the metadata as given", rec.Owner, rec.Task.Metadata)
	}
	if got, _ := mem.Get(bg, "t1"); got.Owner != "alice" {
		t.Fatalf("the store recorded owner %q", got.Owner)
	}
	// The metadata claim grants mallory nothing.
	if _, err := d.Get(mallory, "t1"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("mallory, named in metadata, reads alice's task: %v", err)
	}
	// A replacement claiming another owner keeps alice.
	next := working("t1", "a")
	next.Metadata = map[string]any{"a2astore.owner": "mallory"}
	rec, err = d.Replace(alice, next, 0)
	if err != nil || rec.Owner != "alice" {
		t.Fatalf("replace: owner %q, %v", rec.Owner, err)
	}
	// Asking for one's own identity is Create; for another's is denied.
	if rec, err := d.CreateOwned(alice, working("t2", "a"), "alice"); err != nil || rec.Owner != "alice" {
		t.Fatalf("CreateOwned for oneself: %+v, %v", rec, err)
	}
	if _, err := d.CreateOwned(alice, working("t3", "a"), "bob"); !errors.Is(err, authz.ErrDenied) {
		t.Fatalf("CreateOwned for another owner: %v, want ErrDenied", err)
	}
	// No identity: no create, and the caller learns it must authenticate.
	if _, err := d.Create(bg, working("t4", "a")); !errors.Is(err, authz.ErrUnauthenticated) || !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("anonymous create: %v, want ErrUnauthenticated", err)
	}
	for _, id := range []a2a.TaskID{"t3", "t4"} {
		if _, err := mem.Get(bg, id); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("a refused create stored %s: %v", id, err)
		}
	}
	// A custom identity source.
	custom := authz.OwnerPolicy{Caller: func(context.Context) (string, bool) { return "acme", true }}
	rec, err = authz.New(mem, custom).Create(bg, working("t5", "a"))
	if err != nil || rec.Owner != "acme" || rec.Task.Metadata != nil {
		t.Fatalf("custom owner: %+v, %v", rec, err)
	}
}

// TestOwnersUnsupported: over a store that does not record owners, an
// owner policy fails closed: Create, CreateOwned and List answer
// engine.ErrOwnersUnsupported and store nothing, and tasks that store holds
// (no owner) are nobody's. A policy that assigns no owner still creates.
func TestOwnersUnsupported(t *testing.T) {
	mem := newMem(t, storetest.NewManualClock(1000))
	bg := context.Background()
	alice := authz.WithCaller(bg, "alice")
	plain := struct{ engine.Store }{mem} // hides CreateOwned
	if _, err := mem.Create(bg, working("old", "a")); err != nil {
		t.Fatal(err)
	}
	d := authz.New(plain, authz.OwnerPolicy{})
	if _, err := d.Create(alice, working("t1", "a")); !errors.Is(err, engine.ErrOwnersUnsupported) {
		t.Fatalf("Create: %v, want ErrOwnersUnsupported", err)
	}
	if _, err := d.CreateOwned(alice, working("t2", "a"), "alice"); !errors.Is(err, engine.ErrOwnersUnsupported) {
		t.Fatalf("CreateOwned: %v, want ErrOwnersUnsupported", err)
	}
	for _, id := range []a2a.TaskID{"t1", "t2"} {
		if _, err := mem.Get(bg, id); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%s stored without its owner: %v", id, err)
		}
	}
	if resp, err := d.List(alice, &engine.ListRequest{}); resp != nil || !errors.Is(err, engine.ErrOwnersUnsupported) {
		t.Fatalf("List: %v, %v; want ErrOwnersUnsupported", resp, err)
	}
	if _, err := d.Get(alice, "old"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Get of a task without owner: %v, want not found", err)
	}
	// Owner filters and owners asked for, under any policy.
	for _, pol := range []authz.Policy{authz.AllowAll{}, admitAll} {
		d := authz.New(plain, pol)
		if _, err := d.List(bg, &engine.ListRequest{Owner: "alice"}); !errors.Is(err, engine.ErrOwnersUnsupported) {
			t.Errorf("%T: owner-filtered List: %v, want ErrOwnersUnsupported", pol, err)
		}
		if _, err := d.CreateOwned(bg, working("t3", "a"), "alice"); !errors.Is(err, engine.ErrOwnersUnsupported) {
			t.Errorf("%T: CreateOwned: %v, want ErrOwnersUnsupported", pol, err)
		}
		if rec, err := d.CreateOwned(bg, working(a2a.TaskID(fmt.Sprintf("t-%T", pol)), "a"), ""); err != nil || rec.Owner != "" {
			t.Errorf("%T: CreateOwned without owner: %+v, %v", pol, rec, err)
		}
	}
}

// TestCallerFromServer: the identity comes from WithCaller first, else from
// the authenticated user of the a2a-go server call context.
func TestCallerFromServer(t *testing.T) {
	bg := context.Background()
	ctx, cc := a2asrv.NewCallContext(bg, nil)
	if id, ok := authz.CallerFrom(ctx); ok {
		t.Fatalf("unauthenticated call context gave caller %q", id)
	}
	cc.User = a2asrv.NewAuthenticatedUser("carol", nil)
	if id, ok := authz.CallerFrom(ctx); !ok || id != "carol" {
		t.Fatalf("CallerFrom = %q, %v; want carol", id, ok)
	}
	cc.User = &a2asrv.User{Name: "dave"} // named but not authenticated
	if id, ok := authz.CallerFrom(ctx); ok {
		t.Fatalf("unauthenticated user gave caller %q", id)
	}
	cc.User = a2asrv.NewAuthenticatedUser("carol", nil)
	if id, ok := authz.CallerFrom(authz.WithCaller(ctx, "erin")); !ok || id != "erin" {
		t.Fatalf("WithCaller did not take precedence: %q", id)
	}
	if _, ok := authz.CallerFrom(authz.WithCaller(ctx, "")); ok {
		t.Fatal("WithCaller(\"\") still has a caller")
	}
	// End to end through the dispatcher.
	mem := newMem(t, storetest.NewManualClock(1))
	d := authz.New(mem, authz.OwnerPolicy{})
	if _, err := d.Create(ctx, working("mine", "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(authz.WithCaller(bg, "carol"), "mine"); err != nil {
		t.Fatalf("carol via WithCaller: %v", err)
	}
	if _, err := d.Get(authz.WithCaller(bg, "dave"), "mine"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("dave: %v", err)
	}
}

// TestContextAllowListScope: the list request reaching the store is narrowed
// to one context whenever one can be named (A1), and an impossible request
// reads nothing.
func TestContextAllowListScope(t *testing.T) {
	c := storetest.NewManualClock(1000)
	mem := newMem(t, c)
	bg := context.Background()
	for i, ctxID := range []string{"a", "b", "c", "a", "b", "c"} {
		c.Advance(1)
		if _, err := mem.Create(bg, working(a2a.TaskID(rune('0'+i)), ctxID)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		allowed   []string
		req       string
		wantScope []string // ContextID of each store List; nil: no store read
		wantTasks int
	}{
		{[]string{"a"}, "", []string{"a"}, 2},
		{[]string{"a", "b"}, "b", []string{"b"}, 2},
		{[]string{"a", "b"}, "", []string{""}, 4},
		{[]string{"a"}, "b", nil, 0},
		{nil, "", nil, 0},
	} {
		pr := &probe{Store: mem}
		resp, err := authz.New(pr, authz.ContextAllowList{}).List(authz.WithAllowedContexts(bg, tc.allowed...),
			&engine.ListRequest{ContextID: tc.req, IncludeTotalSize: true})
		if err != nil {
			t.Fatal(err)
		}
		var scopes []string
		for _, l := range pr.lists {
			scopes = append(scopes, l.ContextID)
		}
		if len(scopes) != len(tc.wantScope) || (len(scopes) > 0 && scopes[0] != tc.wantScope[0]) ||
			len(resp.Tasks) != tc.wantTasks || resp.TotalSize != tc.wantTasks {
			t.Errorf("allowed %v, request %q: store scopes %q, %d tasks, total %d; want %q, %d",
				tc.allowed, tc.req, scopes, len(resp.Tasks), resp.TotalSize, tc.wantScope, tc.wantTasks)
		}
	}
}

// checkCounter is a store whose invariant check and Close are counted.
type checkCounter struct {
	engine.Store
	checks, closes int
}

func (c *checkCounter) CheckInvariants() error { c.checks++; return errors.New("broken") }
func (c *checkCounter) Close() error           { c.closes++; return nil }

// TestForwardsCapabilities: the dispatcher forwards Close and the invariant
// check to the store it wraps, and does nothing for a store without them.
func TestForwardsCapabilities(t *testing.T) {
	inner := &checkCounter{Store: newMem(t, storetest.NewManualClock(1))}
	d := authz.New(inner, authz.OwnerPolicy{})
	if err := d.CheckInvariants(); err == nil || inner.checks != 1 {
		t.Errorf("CheckInvariants = %v after %d checks, want the store's error", err, inner.checks)
	}
	if err := d.Close(); err != nil || inner.closes != 1 {
		t.Errorf("Close = %v after %d closes, want the store closed", err, inner.closes)
	}
	bare := authz.New(struct{ engine.Store }{inner}, authz.AllowAll{})
	if bare.CheckInvariants() != nil || bare.Close() != nil || inner.checks != 1 || inner.closes != 1 {
		t.Error("a store without the capabilities was checked or closed")
	}
}

// labeler stamps a label into the metadata of what it writes (except
// content marked "unlabelled"), refuses content marked "refuse", and admits
// only labelled tasks.
type labeler struct{ funcPolicy }

func (labeler) StampTask(_ context.Context, t *a2a.Task) error {
	if t.Metadata["refuse"] != nil {
		return errors.New("refused")
	}
	if t.Metadata["unlabelled"] != nil {
		return nil
	}
	t.Metadata = map[string]any{"label": "stamped", "kept": t.Metadata["kept"]}
	return nil
}

func (labeler) CanAccessTask(_ context.Context, t *a2a.Task) (bool, error) {
	return t.Metadata["label"] == "stamped", nil
}

// TestStamper: a Stamper changes a copy of the content of Create and
// Replace, never the caller's task; its error refuses the write; the
// stamped content must pass the policy's check.
func TestStamper(t *testing.T) {
	mem := newMem(t, storetest.NewManualClock(1000))
	bg := context.Background()
	d := authz.New(mem, labeler{})
	in := working("t", "a")
	in.Metadata = map[string]any{"kept": "yes"}
	rec, err := d.Create(bg, in)
	if err != nil || rec.Task.Metadata["label"] != "stamped" || rec.Task.Metadata["kept"] != "yes" {
		t.Fatalf("Create: %+v, %v", rec, err)
	}
	if in.Metadata["label"] != nil {
		t.Fatal("Create changed the caller's task")
	}
	if rec, err = d.Replace(bg, working("t", "b"), 0); err != nil || rec.Task.Metadata["label"] != "stamped" {
		t.Fatalf("Replace: %+v, %v", rec, err)
	}
	bad := working("u", "a")
	bad.Metadata = map[string]any{"refuse": true}
	if _, err := d.Create(bg, bad); err == nil || err.Error() != "authz: stamp: refused" {
		t.Fatalf("refused stamp: %v", err)
	}
	unlabelled := working("u", "a")
	unlabelled.Metadata = map[string]any{"unlabelled": true}
	if _, err := d.Create(bg, unlabelled); !errors.Is(err, authz.ErrDenied) {
		t.Fatalf("stamped content the policy denies: %v, want ErrDenied", err)
	}
	if _, err := mem.Get(bg, "u"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a refused Create stored the task: %v", err)
	}
}
