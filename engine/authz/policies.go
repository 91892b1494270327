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

// OwnerMetadataKey is the task metadata key under which OwnerPolicy records
// a task's owner, unless OwnerPolicy.MetadataKey says otherwise. Its value is
// the owner's identity as a JSON string.
const OwnerMetadataKey = "a2astore.owner"

// OwnerPolicy lets a caller access the tasks it created.
//
// On Create and Replace (it is a Stamper) it records the caller's identity in
// the task's metadata, overwriting whatever the content said, so a caller can
// neither forge nor give away ownership. Access requires an identity equal to
// the recorded owner. A caller without identity can create nothing and sees
// nothing. Its decision reads metadata only, so scans use the light
// projection.
//
// The zero value is ready to use: identities come from CallerFrom and are
// recorded under OwnerMetadataKey.
type OwnerPolicy struct {
	// MetadataKey is where the owner is recorded. "" = OwnerMetadataKey.
	MetadataKey string
	// Caller returns the caller's identity. nil = CallerFrom.
	Caller func(ctx context.Context) (id string, ok bool)
}

var (
	_ Policy  = OwnerPolicy{}
	_ Stamper = OwnerPolicy{}
)

func (p OwnerPolicy) key() string {
	if p.MetadataKey == "" {
		return OwnerMetadataKey
	}
	return p.MetadataKey
}

func (p OwnerPolicy) caller(ctx context.Context) (string, bool) {
	if p.Caller != nil {
		return p.Caller(ctx)
	}
	return CallerFrom(ctx)
}

// ScopeTaskList cannot narrow by owner (the store has no owner filter): it
// returns req unchanged for a caller with identity and ErrEmptyScope
// otherwise.
func (p OwnerPolicy) ScopeTaskList(ctx context.Context, req engine.ListRequest) (engine.ListRequest, error) {
	if _, ok := p.caller(ctx); !ok {
		return req, ErrEmptyScope
	}
	return req, nil
}

func (p OwnerPolicy) CanAccessTask(ctx context.Context, task *a2a.Task) (bool, error) {
	caller, ok := p.caller(ctx)
	if !ok {
		return false, nil
	}
	owner, _ := task.Metadata[p.key()].(string)
	return owner == caller, nil
}

func (p OwnerPolicy) Projection() engine.Projection { return engine.ProjectionLight }

// StampTask records the caller as the task's owner.
func (p OwnerPolicy) StampTask(ctx context.Context, task *a2a.Task) error {
	caller, ok := p.caller(ctx)
	if !ok {
		return fmt.Errorf("authz: no caller identity: %w", ErrDenied)
	}
	if task.Metadata == nil {
		task.Metadata = make(map[string]any, 1)
	}
	task.Metadata[p.key()] = caller
	return nil
}

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
