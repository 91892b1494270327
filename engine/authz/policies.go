package authz

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine"
)

// AllowAll lets every caller access every task. It is for tests and
// single-tenant servers. The dispatcher recognizes it and passes every call
// straight to the store: with nothing to deny there is nothing to scan,
// re-read or re-check. List still fails closed on a store page whose
// cursors or token do not match its tasks (A7).
type AllowAll struct{}

func (AllowAll) ScopeTaskList(_ context.Context, req engine.ListRequest) (engine.ListRequest, error) {
	return req, nil
}

func (AllowAll) CanAccessTask(context.Context, *a2a.Task) (bool, error) { return true, nil }

// Projection is light: AllowAll needs no field at all.
func (AllowAll) Projection() engine.Projection { return engine.ProjectionLight }

type callerKey struct{}

// WithCaller returns a context whose caller is id, for code that does not run
// inside an a2a-go server. It takes precedence over the server's call
// context. An empty id means no caller.
func WithCaller(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callerKey{}, id)
}

// CallerFrom returns the caller's identity: the one set by WithCaller, else
// the name of the authenticated user of the a2a-go server's call context
// (a2asrv.CallContextFrom(ctx).User, when Authenticated and named). ok is
// false when there is none.
func CallerFrom(ctx context.Context) (id string, ok bool) {
	if id, set := ctx.Value(callerKey{}).(string); set {
		return id, id != ""
	}
	if cc, found := a2asrv.CallContextFrom(ctx); found && cc.User != nil &&
		cc.User.Authenticated && cc.User.Name != "" {
		return cc.User.Name, true
	}
	return "", false
}

// OwnerPolicy lets a caller access the tasks it created: the owner the
// store records beside each task (engine.Record.Owner), not anything in the
// task's content.
//
// Create through the dispatcher records the caller's identity as the
// task's owner with the store's CreateOwned (it is an OwnerAssigner); the
// store keeps it for the task's life, and no Replace can change it (O1,
// O2). A store that does not record owners (not an engine.OwnerStore)
// refuses such a Create with engine.ErrOwnersUnsupported: never a silent
// unowned task. CreateOwned through the dispatcher may name the caller
// itself or no one (both record the caller); naming another owner is
// ErrDenied.
//
// Access requires an identity equal to the recorded owner (it is an
// OwnerChecker). A task without an owner is nobody's: under OwnerPolicy no
// caller sees it.
//
// Lists are narrowed to the caller's tasks: ScopeTaskList sets
// engine.ListRequest.Owner, and the scope is exact (ExactScoper), so the
// dispatcher takes the store's owner-filtered page and total in one store
// call, and what a page costs does not depend on other callers' tasks
// (O6). Every returned task is still checked.
//
// A caller without identity cannot list (ErrUnauthenticated, as a2a-go's
// own taskstore.InMemory refuses) nor create (ErrUnauthenticated); Get and
// the mutations answer it not found, as for a missing task (A6). An empty
// identity is no identity, even when Caller reports one, and so is an
// identity longer than engine.MaxOwnerBytes, which no owner can be.
//
// Migration: versions before #15 recorded the owner in the task's metadata
// under the key "a2astore.owner", or the key the removed MetadataKey field
// named. Nothing reads or writes that key any more; each backend moves
// existing owners from it into the store (Pebble upgrades its database on
// open; PostgreSQL backfills the owner column from it, see pgstore's
// migrations). Both read "a2astore.owner" unless their Options name
// another key (UpgradeOwnerKey, required where MetadataKey was set, since
// "a2astore.owner" was then client metadata) or none
// (UpgradeWithoutOwners). A task whose metadata still carries the key keeps
// it as ordinary, client-visible metadata that grants nothing.
//
// The zero value is ready to use: identities come from CallerFrom.
type OwnerPolicy struct {
	// Caller returns the caller's identity. nil = CallerFrom. An id that
	// is empty or longer than engine.MaxOwnerBytes counts as none.
	Caller func(ctx context.Context) (id string, ok bool)
}

var (
	_ Policy        = OwnerPolicy{}
	_ OwnerChecker  = OwnerPolicy{}
	_ OwnerAssigner = OwnerPolicy{}
	_ ExactScoper   = OwnerPolicy{}
)

// caller returns the caller's identity. An empty identity is no identity
// (whatever Caller says: as an owner filter "" would match every task),
// and neither is one that no owner can be (longer than
// engine.MaxOwnerBytes): such a caller is unauthenticated everywhere,
// rather than a server fault on Create and an invalid filter on List.
func (p OwnerPolicy) caller(ctx context.Context) (string, bool) {
	var id string
	var ok bool
	if p.Caller != nil {
		id, ok = p.Caller(ctx)
	} else {
		id, ok = CallerFrom(ctx)
	}
	if !ok || id == "" || engine.ValidateOwner(id) != nil {
		return "", false
	}
	return id, true
}

// ScopeTaskList narrows req to the caller's tasks (Owner). A caller without
// identity gets ErrUnauthenticated; a request already filtered by another
// owner can match nothing (ErrEmptyScope).
func (p OwnerPolicy) ScopeTaskList(ctx context.Context, req engine.ListRequest) (engine.ListRequest, error) {
	caller, ok := p.caller(ctx)
	if !ok {
		return req, ErrUnauthenticated
	}
	if req.Owner != "" && req.Owner != caller {
		return req, ErrEmptyScope
	}
	req.Owner = caller
	return req, nil
}

// ScopeIsExact reports that a scope naming the caller as owner is exact:
// every task of that owner is one CanAccessOwned allows. A scope without
// an owner filter never is.
func (p OwnerPolicy) ScopeIsExact(ctx context.Context, scoped engine.ListRequest) bool {
	caller, ok := p.caller(ctx)
	return ok && scoped.Owner != "" && scoped.Owner == caller
}

// CanAccessTask cannot decide: the owner is not part of the task. It
// denies; the dispatcher asks CanAccessOwned instead.
func (p OwnerPolicy) CanAccessTask(context.Context, *a2a.Task) (bool, error) { return false, nil }

// CanAccessOwned allows the caller whose identity is the task's recorded
// owner.
func (p OwnerPolicy) CanAccessOwned(ctx context.Context, _ *a2a.Task, owner string) (bool, error) {
	caller, ok := p.caller(ctx)
	return ok && owner != "" && owner == caller, nil
}

// CreateOwner records the caller as the owner of the tasks it creates.
func (p OwnerPolicy) CreateOwner(ctx context.Context, _ *a2a.Task, requested string) (string, error) {
	caller, ok := p.caller(ctx)
	if !ok {
		return "", ErrUnauthenticated
	}
	if requested != "" && requested != caller {
		return "", fmt.Errorf("authz: a caller cannot create tasks for another owner: %w", ErrDenied)
	}
	return caller, nil
}

// Projection is light; it matters only on a path the dispatcher never
// takes for OwnerPolicy (its scope is exact, so nothing is scanned).
func (p OwnerPolicy) Projection() engine.Projection { return engine.ProjectionLight }

type allowedContextsKey struct{}

// WithAllowedContexts returns a context whose caller may see the tasks of the
// given context IDs under ContextAllowList.
func WithAllowedContexts(ctx context.Context, contextIDs ...string) context.Context {
	set := make(map[string]bool, len(contextIDs))
	for _, id := range contextIDs {
		set[id] = true
	}
	return context.WithValue(ctx, allowedContextsKey{}, set)
}

// AllowedContextsFrom returns the set stored by WithAllowedContexts (nil if
// none: nothing is allowed). The set must not be modified.
func AllowedContextsFrom(ctx context.Context) (map[string]bool, error) {
	set, _ := ctx.Value(allowedContextsKey{}).(map[string]bool)
	return set, nil
}

// ContextAllowList lets a caller access the tasks of a set of context IDs.
//
// ScopeTaskList narrows the store query whenever one context can be named:
// when the request names an allowed context, or when exactly one context is
// allowed. A request naming a context outside the set, or an empty set,
// reads nothing. Otherwise the scan covers every context and each task is
// checked. Creating or replacing a task into a context outside the set fails
// with ErrDenied. Its decision reads the context ID only, so scans use the
// light projection.
//
// The zero value takes the set from the request context (WithAllowedContexts).
type ContextAllowList struct {
	// Allowed returns the context IDs the caller may see: those mapped to
	// true. It is called once per List and once per task checked, so it
	// must be cheap. nil = AllowedContextsFrom.
	Allowed func(ctx context.Context) (map[string]bool, error)
}

var _ Policy = ContextAllowList{}

func (p ContextAllowList) allowed(ctx context.Context) (map[string]bool, error) {
	if p.Allowed != nil {
		return p.Allowed(ctx)
	}
	return AllowedContextsFrom(ctx)
}

func (p ContextAllowList) ScopeTaskList(ctx context.Context, req engine.ListRequest) (engine.ListRequest, error) {
	set, err := p.allowed(ctx)
	if err != nil {
		return req, err
	}
	if req.ContextID != "" {
		if !set[req.ContextID] {
			return req, ErrEmptyScope
		}
		return req, nil
	}
	only, n := "", 0
	for id, ok := range set {
		if ok {
			only, n = id, n+1
		}
	}
	switch n {
	case 0:
		return req, ErrEmptyScope
	case 1:
		req.ContextID = only
	}
	return req, nil
}

func (p ContextAllowList) CanAccessTask(ctx context.Context, task *a2a.Task) (bool, error) {
	set, err := p.allowed(ctx)
	if err != nil {
		return false, err
	}
	return set[task.ContextID], nil
}

func (p ContextAllowList) Projection() engine.Projection { return engine.ProjectionLight }
