package authz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// Policy decides what the caller carried in a context may see.
//
// A Policy must be safe for concurrent use. Its decisions must depend only on
// the caller and the task given, never on other tasks, or the dispatcher's
// noninterference guarantee (responses do not depend on tasks the caller
// cannot see) is lost.
type Policy interface {
	// ScopeTaskList narrows a list request for the caller before anything
	// is read (A1). Only the filters of the returned request are used
	// (ContextID, Owner, Status, StatusTimestampAfter), combined (and) with
	// the caller's own; the dispatcher still checks every task with the
	// policy and the caller's filters, so a scope that narrows too little
	// leaks nothing, it only costs a longer scan (unless the policy says
	// the scope is exact, ExactScoper). Return ErrEmptyScope when the
	// caller can see no task the request could match: the dispatcher then
	// answers with an empty page without reading the store. Return
	// ErrUnauthenticated when the caller must identify itself to list.
	ScopeTaskList(ctx context.Context, req engine.ListRequest) (engine.ListRequest, error)
	// CanAccessTask reports whether the caller may see task. During list
	// scans task is in Projection(); elsewhere it is whole. A policy that
	// is an OwnerChecker is asked CanAccessOwned instead.
	CanAccessTask(ctx context.Context, task *a2a.Task) (bool, error)
	// Projection says which fields CanAccessTask needs during list scans:
	// engine.ProjectionLight when ID, context ID, status state and
	// timestamp and metadata suffice (the store then decodes no history or
	// artifacts while scanning, A4), engine.ProjectionFull otherwise.
	Projection() engine.Projection
}

// Stamper is an optional interface of a Policy. When the policy implements
// it, the dispatcher calls StampTask on a copy of the content of every Create
// and Replace before storing it, so the policy can record something in the
// content (a label in the task's metadata, say). Ownership belongs in the
// store instead (OwnerAssigner): metadata is the client's to read and
// write. task is a shallow copy whose Metadata map is the dispatcher's own:
// the stamper may set top-level fields and metadata keys but must not
// modify what the other fields point to. An error refuses the write and is
// returned to the caller.
//
// After stamping, the content must pass the policy's check (CanAccessTask,
// or CanAccessOwned with the task's owner), or the write fails with
// ErrDenied: a caller cannot create or replace a task it could not see
// afterwards.
type Stamper interface {
	StampTask(ctx context.Context, task *a2a.Task) error
}

// OwnerChecker is an optional interface of a Policy whose decisions need
// what the store records beside a task: its owner (engine.Record.Owner,
// engine.ListResponse.TaskOwners; clauses O1–O6 on engine.OwnerStore).
// When the policy implements it, the dispatcher asks CanAccessOwned
// instead of CanAccessTask for every decision:
//
//   - Get, Cancel, AppendHistory, Delete and Replace: the stored task with
//     the owner read with it (Record.Owner);
//   - List: every task scanned or returned, with the owner listed beside it
//     (TaskOwners); a store page without aligned owners fails closed with
//     engine.ErrInternal;
//   - Create: the content with the owner the Create will record; Replace:
//     the new content with the stored owner, which Replace keeps (O2), so
//     it is judged after the stored task (a missing or inaccessible task
//     still gets the not-found error first, A6).
//
// A store that records no owners reports "" for every task. A policy that
// does not implement OwnerChecker keeps deciding on the task alone.
type OwnerChecker interface {
	// CanAccessOwned reports whether the caller may see task, whose
	// recorded owner is owner ("" = none). During list scans task is in
	// the policy's Projection(); elsewhere it is whole.
	CanAccessOwned(ctx context.Context, task *a2a.Task, owner string) (bool, error)
}

// OwnerAssigner is an optional interface of a Policy that decides who owns
// the tasks a caller creates. The dispatcher calls CreateOwner on every
// Create (requested "") and CreateOwned (requested the owner asked for),
// before the store is read, and records the owner it returns with the
// store's CreateOwned (O1). A non-empty owner on a store that is not an
// engine.OwnerStore fails with engine.ErrOwnersUnsupported: the task is
// never stored without the owner the policy chose. An error refuses the
// Create and is returned to the caller (ErrUnauthenticated, ErrDenied, …).
//
// Without it, Create records no owner and CreateOwned records the owner
// asked for; either way the policy's check must then admit the content
// with that owner.
type OwnerAssigner interface {
	CreateOwner(ctx context.Context, task *a2a.Task, requested string) (owner string, err error)
}

// ExactScoper is an optional interface of a Policy whose scopes can be
// exact. A scope is exact when every task matching its filters (combined
// with the caller's own) is one the policy's check allows. The dispatcher
// then answers List with one store call: the store's page, token and total
// as they are (the total from the store's counters where it keeps them, so
// no scan), instead of scanning, counting and re-reading. That is how an
// owner-scoped page costs PageSize+1 entries whatever other owners hold
// (O6).
//
// Defence in depth: every task of the store's page is still checked
// against the policy and the caller's filters (with its owner when the
// policy is an OwnerChecker or the scope filters by owner, from aligned
// TaskOwners). A task the check denies, or that does not match, means the
// store ignored a filter or the policy's scope and check disagree: List
// then fails closed with engine.ErrInternal and returns no task. A policy
// must therefore answer true only for scopes its check cannot contradict
// later (decisions that can be revoked while a List runs are not exact).
type ExactScoper interface {
	// ScopeIsExact reports whether scoped, a request ScopeTaskList
	// returned for the caller in ctx, is exact.
	ScopeIsExact(ctx context.Context, scoped engine.ListRequest) bool
}

// ErrEmptyScope is returned by Policy.ScopeTaskList when the caller can see
// no task the request could match.
var ErrEmptyScope = errors.New("authz: empty scope")

// ErrUnauthenticated is the error of a call that needs the caller's
// identity when the context carries none: a List or Create under
// OwnerPolicy (as a2a-go's taskstore.InMemory refuses to list for no one).
// A policy returns it from ScopeTaskList or OwnerAssigner.CreateOwner, and
// the dispatcher passes it on (a List with a page token first has the
// store judge the token, so a bad token fails alike for every caller, T4).
// It is an engine.ErrInvalidArgument under errors.Is; a2aserver answers it
// with the A2A unauthenticated error (HTTP 401, JSON-RPC -31401, gRPC
// UNAUTHENTICATED), as a2aserver.HeaderIdentity does with Required.
var ErrUnauthenticated error = unauthenticatedError{}

type unauthenticatedError struct{}

func (unauthenticatedError) Error() string { return "authz: caller identity required" }
func (unauthenticatedError) Unwrap() error { return engine.ErrInvalidArgument }

// ErrDenied is the error of a Create or Replace whose content the caller
// could not access once stored (or that a Stamper refused). It is an
// engine.ErrInvalidArgument under errors.Is. It tells nothing about stored
// tasks: the content is checked before the store is read.
var ErrDenied error = deniedError{}

type deniedError struct{}

func (deniedError) Error() string { return "authz: permission denied" }
func (deniedError) Unwrap() error { return engine.ErrInvalidArgument }

// errNotFound is the one error of a missing or inaccessible task (A6): the
// same value, whichever it was, whatever the store said.
var errNotFound = fmt.Errorf("authz: %w", engine.ErrNotFound)

// errMisaligned is the fail-closed error of A7.
var errMisaligned = fmt.Errorf("authz: store returned tasks without aligned cursors: %w", engine.ErrInternal)

// errOwnersMisaligned is the fail-closed error of a page whose owners the
// dispatcher needs (an owner filter, or an OwnerChecker policy) when the
// store did not list them aligned with its tasks, or listed a task of
// another owner than the filter's.
var errOwnersMisaligned = fmt.Errorf("authz: store returned tasks without their owners or of another owner: %w", engine.ErrInternal)

// errScopeBroken is the fail-closed error of an exact scope (ExactScoper)
// whose store page holds a task the policy or the caller's filters reject.
var errScopeBroken = fmt.Errorf("authz: store page holds a task outside the exact scope: %w", engine.ErrInternal)

// errOwnersUnsupported is the error of a call that needs the store to
// record owners when it does not.
var errOwnersUnsupported = fmt.Errorf("authz: %w", engine.ErrOwnersUnsupported)

// Dispatcher is an engine.Store that applies a Policy to another Store. It
// is safe for concurrent use when the store and the policy are.
//
// It is also an engine.OwnerStore whatever it wraps: over a store that
// records owners it forwards CreateOwned and owner filters (subject to the
// policy); over one that does not, CreateOwned with an owner, an
// owner-filtered List and any Create whose policy assigns an owner fail
// with engine.ErrOwnersUnsupported (run the conformance suite's owner
// clauses against the store itself, or a dispatcher over an OwnerStore).
//
// Point operations look the task up and check access before mutating it,
// and the mutation acts only on the version that was checked (A9): Replace
// is made conditional on the checked revision; Cancel, AppendHistory and
// Delete use the store's conditional writes (engine.ConditionalStore:
// CancelIf, AppendHistoryIf, DeleteIf) on it. When another writer changed
// the task between the check and the write (a concurrent Replace that moves
// it out of the caller's scope, say), the write changes nothing and the
// dispatcher reads and checks the new version: a task the caller can no
// longer access is then not found (A6). An unconditional Replace
// (expectedRevision 0) retries for as long as other writers keep changing
// the task or until ctx ends: it never fails with ErrRevisionConflict.
// Cancel, AppendHistory and Delete retry at most MaxWriteAttempts times,
// then fail with ErrWriteContention, and stop when ctx ends. Over a store
// without conditional writes they fail closed with
// engine.ErrConditionalUnsupported (under AllowAll, which checks nothing,
// they pass straight through). The dispatcher is an engine.ConditionalStore
// itself: CancelIf, AppendHistoryIf and DeleteIf add the caller's own
// revision condition to the checked write.
//
// A revision names a version of one incarnation of a task: a task deleted
// and created again under the same ID between the check and the write
// starts over at revision 1 (S7), so a check of revision 1 of the old task
// matches the new one. Only writers of that very ID can do this, and with
// unguessable task IDs (a2a.NewTaskID) only those who could access it.
//
// Create of an ID that exists but is invisible to the caller still fails
// with engine.ErrAlreadyExists: IDs are global, and hiding the conflict would
// lose the caller's task. Use unguessable task IDs (a2a.NewTaskID does).
type Dispatcher struct {
	store  engine.Store
	owners engine.OwnerStore // store, when it records owners; else nil
	policy Policy
	// byOwner is policy when its decisions need the owner; else nil.
	byOwner OwnerChecker
	// open is set for AllowAll: no decision can ever deny, so calls pass
	// straight to the store (still failing closed on misaligned cursors).
	open bool
}

var (
	_ engine.OwnerStore = (*Dispatcher)(nil)
	_ engine.Checker    = (*Dispatcher)(nil)
	_ io.Closer         = (*Dispatcher)(nil)
)

// New returns a Dispatcher that applies policy to store.
func New(store engine.Store, policy Policy) *Dispatcher {
	_, open := policy.(AllowAll)
	owners, _ := store.(engine.OwnerStore)
	byOwner, _ := policy.(OwnerChecker)
	return &Dispatcher{store: store, owners: owners, policy: policy, byOwner: byOwner, open: open}
}

// Create stores a new task. The owner it records is the policy's choice
// when the policy is an OwnerAssigner (OwnerPolicy: the caller), else none.
// The content is stamped through the policy when it is a Stamper and must
// be accessible to the caller, with that owner, once stored (else
// ErrDenied).
func (d *Dispatcher) Create(ctx context.Context, task *a2a.Task) (engine.Record, error) {
	return d.create(ctx, task, "")
}

// CreateOwned is Create asking for owner as the task's owner (O1). Under
// an OwnerAssigner policy the policy decides whether the caller may ask for
// it (OwnerPolicy: only its own identity); otherwise owner is recorded as
// asked. A store that records no owners fails with
// engine.ErrOwnersUnsupported unless the owner is "".
func (d *Dispatcher) CreateOwned(ctx context.Context, task *a2a.Task, owner string) (engine.Record, error) {
	if err := engine.ValidateOwner(owner); err != nil {
		return engine.Record{}, err
	}
	return d.create(ctx, task, owner)
}

func (d *Dispatcher) create(ctx context.Context, task *a2a.Task, owner string) (engine.Record, error) {
	if err := engine.ValidateTask(task); err != nil {
		return engine.Record{}, err
	}
	if a, ok := d.policy.(OwnerAssigner); ok {
		o, err := a.CreateOwner(ctx, task, owner)
		if err != nil {
			return engine.Record{}, fmt.Errorf("authz: create: %w", err)
		}
		if err := engine.ValidateOwner(o); err != nil {
			return engine.Record{}, fmt.Errorf("authz: policy chose an invalid owner: %v: %w", err, engine.ErrInternal)
		}
		owner = o
	}
	task, err := d.stamp(ctx, task)
	if err != nil {
		return engine.Record{}, err
	}
	if err := d.admit(ctx, task, owner); err != nil {
		return engine.Record{}, err
	}
	if owner == "" {
		return d.store.Create(ctx, task)
	}
	if d.owners == nil {
		return engine.Record{}, errOwnersUnsupported
	}
	return d.owners.CreateOwned(ctx, task, owner)
}

// Get returns the task, or the not-found error when it is missing or
// inaccessible (A6).
func (d *Dispatcher) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return d.get(ctx, id)
}

// Replace replaces an accessible task with content the caller may access.
// The stored owner stays (O2): an OwnerChecker policy judges the new
// content with it, after reading the stored task.
func (d *Dispatcher) Replace(ctx context.Context, task *a2a.Task, expectedRevision int64) (engine.Record, error) {
	if err := engine.ValidateTask(task); err != nil {
		return engine.Record{}, err
	}
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	task, err := d.stamp(ctx, task)
	if err != nil {
		return engine.Record{}, err
	}
	if d.byOwner == nil {
		// The new content is judged before the store is read, so
		// ErrDenied says nothing about the stored task.
		if err := d.admit(ctx, task, ""); err != nil {
			return engine.Record{}, err
		}
	}
	if d.open {
		rec, err := d.store.Replace(ctx, task, expectedRevision)
		return rec, notFound(err)
	}
	for {
		cur, err := d.get(ctx, task.ID)
		if err != nil {
			return engine.Record{}, err
		}
		if d.byOwner != nil {
			// Only a caller who may access the stored task gets here,
			// so ErrDenied tells it nothing it could not read.
			if err := d.admit(ctx, task, cur.Owner); err != nil {
				return engine.Record{}, err
			}
		}
		if expectedRevision != 0 && cur.Revision != expectedRevision {
			return engine.Record{}, fmt.Errorf("authz: replace: %w", engine.ErrRevisionConflict)
		}
		rec, err := d.store.Replace(ctx, task, cur.Revision)
		switch {
		case err == nil:
			return rec, nil
		case errors.Is(err, engine.ErrNotFound):
			return engine.Record{}, errNotFound
		case errors.Is(err, engine.ErrRevisionConflict) && expectedRevision == 0:
			// Changed since the check: check the new version again.
			// Each retry follows another writer's successful mutation
			// of this task, so writers as a whole progress; ctx bounds
			// how long this one waits. No attempt limit: a conflict is
			// not an answer an unconditional Replace may give (S7).
			if err := ctx.Err(); err != nil {
				return engine.Record{}, err
			}
			continue
		}
		return engine.Record{}, err
	}
}

// Cancel cancels an accessible task, conditionally on the version checked
// (A9; see writeChecked).
func (d *Dispatcher) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	if d.open {
		rec, err := d.store.Cancel(ctx, id)
		return rec, notFound(err)
	}
	return d.CancelIf(ctx, id, 0)
}

// AppendHistory appends a message to an accessible task, conditionally on
// the version checked (A9; see writeChecked).
func (d *Dispatcher) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	if d.open {
		if err := engine.ValidateMessage(msg); err != nil {
			return engine.Record{}, err
		}
		rec, err := d.store.AppendHistory(ctx, id, msg)
		return rec, notFound(err)
	}
	return d.AppendHistoryIf(ctx, id, msg, 0)
}

// Delete deletes an accessible task, conditionally on the version checked
// (A9; see writeChecked).
func (d *Dispatcher) Delete(ctx context.Context, id a2a.TaskID) error {
	if d.open {
		return notFound(d.store.Delete(ctx, id))
	}
	return d.DeleteIf(ctx, id, 0)
}

// get reads a task and checks access: missing and inaccessible tasks give
// the same errNotFound.
func (d *Dispatcher) get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	rec, err := d.store.Get(ctx, id)
	if d.open {
		return rec, notFound(err)
	}
	if err != nil {
		return engine.Record{}, notFound(err)
	}
	if err := d.check(ctx, id, rec); err != nil {
		return engine.Record{}, err
	}
	return rec, nil
}

// check checks that rec, read for id, is accessible.
func (d *Dispatcher) check(ctx context.Context, id a2a.TaskID, rec engine.Record) error {
	if err := readAs(id, rec); err != nil {
		return err
	}
	return d.allow(ctx, rec.Task, rec.Owner)
}

// readAs fails closed unless rec, read for id, holds that task at a
// revision: a write conditional on revision 0 would be unconditional, on
// a version nobody checked (A9).
func readAs(id a2a.TaskID, rec engine.Record) error {
	if rec.Task == nil || rec.Task.ID != id {
		return fmt.Errorf("authz: store returned another task: %w", engine.ErrInternal)
	}
	if rec.Revision < 1 {
		return fmt.Errorf("authz: store returned task %q at revision %d: %w", id, rec.Revision, engine.ErrInternal)
	}
	return nil
}

// decide asks the policy whether the caller may access task, recorded with
// owner: CanAccessOwned for an OwnerChecker, else CanAccessTask.
func (d *Dispatcher) decide(ctx context.Context, task *a2a.Task, owner string) (bool, error) {
	if d.byOwner != nil {
		return d.byOwner.CanAccessOwned(ctx, task, owner)
	}
	return d.policy.CanAccessTask(ctx, task)
}

// allow asks the policy whether the caller may access task: nil, the
// not-found error of an inaccessible task, or the policy's error.
func (d *Dispatcher) allow(ctx context.Context, task *a2a.Task, owner string) error {
	ok, err := d.decide(ctx, task, owner)
	if err != nil {
		return policyError(err)
	}
	if !ok {
		return errNotFound
	}
	return nil
}

// stamp stamps task through the policy when it is a Stamper, on a copy.
func (d *Dispatcher) stamp(ctx context.Context, task *a2a.Task) (*a2a.Task, error) {
	s, ok := d.policy.(Stamper)
	if !ok {
		return task, nil
	}
	cp := *task
	cp.Metadata = maps.Clone(task.Metadata)
	if err := s.StampTask(ctx, &cp); err != nil {
		return nil, fmt.Errorf("authz: stamp: %w", err)
	}
	return &cp, nil
}

// admit checks the caller may access content stored with owner (ErrDenied
// if not).
func (d *Dispatcher) admit(ctx context.Context, task *a2a.Task, owner string) error {
	ok, err := d.decide(ctx, task, owner)
	if err != nil {
		return policyError(err)
	}
	if !ok {
		return ErrDenied
	}
	return nil
}

// Close closes the wrapped store when it can be closed (io.Closer), so a
// caller holding only the dispatcher releases the store through it.
func (d *Dispatcher) Close() error {
	if c, ok := d.store.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// CheckInvariants runs the wrapped store's invariant check when it has one
// (engine.Checker), so conformance runs through the dispatcher keep it.
func (d *Dispatcher) CheckInvariants() error {
	if c, ok := d.store.(engine.Checker); ok {
		return c.CheckInvariants()
	}
	return nil
}

// notFound replaces any not-found error with errNotFound, so a missing task
// reads exactly like an inaccessible one.
func notFound(err error) error {
	if errors.Is(err, engine.ErrNotFound) {
		return errNotFound
	}
	return err
}

func policyError(err error) error {
	return fmt.Errorf("authz: policy: %w", err)
}
