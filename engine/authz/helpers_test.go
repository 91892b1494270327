package authz_test

import (
	"context"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
	"github.com/a2astore/a2astore/taskiter"
)

func newMem(t testing.TB, c *storetest.ManualClock) *memstore.Store {
	s := memstore.New(memstore.Options{Clock: c.Now})
	t.Cleanup(func() {
		if err := s.CheckInvariants(); err != nil {
			t.Errorf("memstore invariants: %v", err)
		}
		s.Close()
	})
	return s
}

// funcPolicy is a Policy built from a predicate. It narrows nothing.
type funcPolicy struct {
	proj  engine.Projection
	allow func(ctx context.Context, t *a2a.Task) bool
}

func (p funcPolicy) ScopeTaskList(_ context.Context, req engine.ListRequest) (engine.ListRequest, error) {
	return req, nil
}
func (p funcPolicy) CanAccessTask(ctx context.Context, t *a2a.Task) (bool, error) {
	return p.allow(ctx, t), nil
}
func (p funcPolicy) Projection() engine.Projection { return p.proj }

// admitAll admits everything like authz.AllowAll, but goes through the
// dispatcher's scan and final read (AllowAll takes a pass-through path).
var admitAll = funcPolicy{proj: engine.ProjectionLight, allow: func(context.Context, *a2a.Task) bool { return true }}

// exactAll admits everything and says every scope is exact: every List
// takes the dispatcher's one-call path (authz.ExactScoper).
type exactAll struct{ funcPolicy }

func (exactAll) ScopeIsExact(context.Context, engine.ListRequest) bool { return true }

// ownedAll admits everything through CanAccessOwned (authz.OwnerChecker),
// so scans and final reads carry owners; its scopes are not exact.
type ownedAll struct{ funcPolicy }

func (ownedAll) CanAccessOwned(context.Context, *a2a.Task, string) (bool, error) { return true, nil }

// inexactOwner is authz.OwnerPolicy without its exact scope: the
// dispatcher scans the caller's tasks (owner-filtered batches), counts them
// and re-reads the page, deciding by owner.
type inexactOwner struct{ authz.OwnerPolicy }

func (inexactOwner) ScopeIsExact(context.Context, engine.ListRequest) bool { return false }

// scanOwner decides by the recorded owner, as OwnerPolicy does, but does
// not narrow lists: the dispatcher scans every task, in proj (the cost of
// owner lists before #15, when the owner was in task metadata).
type scanOwner struct{ proj engine.Projection }

func (scanOwner) ScopeTaskList(ctx context.Context, req engine.ListRequest) (engine.ListRequest, error) {
	if _, ok := authz.CallerFrom(ctx); !ok {
		return req, authz.ErrEmptyScope
	}
	return req, nil
}

func (scanOwner) CanAccessTask(context.Context, *a2a.Task) (bool, error) { return false, nil }

func (scanOwner) CanAccessOwned(ctx context.Context, _ *a2a.Task, owner string) (bool, error) {
	caller, ok := authz.CallerFrom(ctx)
	return ok && owner == caller, nil
}

func (p scanOwner) Projection() engine.Projection { return p.proj }

// revocable admits everything except the task IDs revoked so far.
type revocable struct {
	mu      sync.Mutex
	revoked map[a2a.TaskID]bool
	// afterCheck, when set, is called after each decision (not
	// concurrently: tests using it list from one goroutine).
	afterCheck func(id a2a.TaskID)
}

func (p *revocable) revoke(id a2a.TaskID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.revoked == nil {
		p.revoked = make(map[a2a.TaskID]bool)
	}
	p.revoked[id] = true
}
func (p *revocable) ScopeTaskList(_ context.Context, req engine.ListRequest) (engine.ListRequest, error) {
	return req, nil
}
func (p *revocable) CanAccessTask(_ context.Context, t *a2a.Task) (bool, error) {
	p.mu.Lock()
	ok := !p.revoked[t.ID]
	p.mu.Unlock()
	if p.afterCheck != nil {
		p.afterCheck(t.ID)
	}
	return ok, nil
}
func (p *revocable) Projection() engine.Projection { return engine.ProjectionLight }

// probe wraps a store to observe and alter what the dispatcher sees.
type probe struct {
	engine.Store
	mu         sync.Mutex
	lists      []engine.ListRequest // every List request, in order
	rows       int                  // tasks returned by List, summed
	maxBatch   int                  // most tasks one List returned
	gets       int
	afterList  func(resp *engine.ListResponse)     // may alter resp
	beforeList func(req *engine.ListRequest) error // may fail the call
	beforeGet  func(id a2a.TaskID)
}

func (p *probe) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	if p.beforeList != nil {
		if err := p.beforeList(req); err != nil {
			return nil, err
		}
	}
	resp, err := p.Store.List(ctx, req)
	p.mu.Lock()
	p.lists = append(p.lists, *req)
	if resp != nil {
		p.rows += len(resp.Tasks)
		p.maxBatch = max(p.maxBatch, len(resp.Tasks))
	}
	p.mu.Unlock()
	if err == nil && p.afterList != nil {
		p.afterList(resp)
	}
	return resp, err
}

// CreateOwned forwards to the wrapped store, so a probe over an OwnerStore
// is one.
func (p *probe) CreateOwned(ctx context.Context, t *a2a.Task, owner string) (engine.Record, error) {
	return p.Store.(engine.OwnerStore).CreateOwned(ctx, t, owner)
}

func (p *probe) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	p.mu.Lock()
	p.gets++
	p.mu.Unlock()
	if p.beforeGet != nil {
		p.beforeGet(id)
	}
	return p.Store.Get(ctx, id)
}

func (p *probe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lists, p.rows, p.maxBatch, p.gets = nil, 0, 0, 0
}

func ptr[T any](v T) *T { return &v }

// traverse lists every page of a traversal, failing the test on error.
func traverse(t testing.TB, ctx context.Context, s engine.Store, req engine.ListRequest) []*engine.ListResponse {
	t.Helper()
	var pages []*engine.ListResponse
	for resp, err := range taskiter.StorePages(ctx, s, req) {
		if err != nil {
			t.Fatalf("List(%+v) page %d: %v", req, len(pages), err)
		}
		pages = append(pages, resp)
		if len(pages) > 100000 {
			t.Fatal("traversal does not end")
		}
	}
	return pages
}

func ids(ts []*a2a.Task) []a2a.TaskID {
	out := make([]a2a.TaskID, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}
