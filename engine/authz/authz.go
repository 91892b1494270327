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
	// (ContextID, Status, StatusTimestampAfter); the dispatcher still checks
	// every task with CanAccessTask and the caller's own filters, so a
	// scope that narrows too little leaks nothing, it only costs a longer
	// scan. Return ErrEmptyScope when the caller can see no task the
	// request could match: the dispatcher then answers with an empty page
	// without reading the store.
	ScopeTaskList(ctx context.Context, req engine.ListRequest) (engine.ListRequest, error)
	// CanAccessTask reports whether the caller may see task. During list
	// scans task is in Projection(); elsewhere it is whole.
	CanAccessTask(ctx context.Context, task *a2a.Task) (bool, error)
	// Projection says which fields CanAccessTask needs during list scans:
	// engine.ProjectionLight when ID, context ID, status state and
	// timestamp and metadata suffice (the store then decodes no history or
	// artifacts while scanning, A4), engine.ProjectionFull otherwise.
	Projection() engine.Projection
}

// Stamper is an optional interface of a Policy. When the policy implements
// it, the dispatcher calls StampTask on a copy of the content of every Create
// and Replace before storing it, so the policy can record ownership (for
// example in the task's metadata). task is a shallow copy whose Metadata map
// is the dispatcher's own: the stamper may set top-level fields and metadata
// keys but must not modify what the other fields point to. An error refuses
// the write and is returned to the caller.
//
// After stamping, the content must pass CanAccessTask, or the write fails
// with ErrDenied: a caller cannot create or replace a task it could not see
// afterwards.
type Stamper interface {
	StampTask(ctx context.Context, task *a2a.Task) error
}

// ErrEmptyScope is returned by Policy.ScopeTaskList when the caller can see
// no task the request could match.
var ErrEmptyScope = errors.New("authz: empty scope")

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

// Dispatcher is an engine.Store that applies a Policy to another Store. It
// is safe for concurrent use when the store and the policy are.
//
// Point operations look the task up and check access before mutating it.
// Replace is made conditional on the revision that was checked, so it never
// overwrites content the caller was not allowed to see. An unconditional
// Replace (expectedRevision 0) whose task changed in between checks the new
// version and tries again, for as long as other writers keep changing the
// task or until ctx ends: it never fails with ErrRevisionConflict. Cancel,
// AppendHistory and Delete have no revision condition in the Store
// interface: a change of access between their check and their write (for
// example a concurrent Replace that moves the task out of the caller's
// scope) can let that one write through.
//
// Create of an ID that exists but is invisible to the caller still fails
// with engine.ErrAlreadyExists: IDs are global, and hiding the conflict would
// lose the caller's task. Use unguessable task IDs (a2a.NewTaskID does).
type Dispatcher struct {
	store  engine.Store
	policy Policy
	// open is set for AllowAll: no decision can ever deny, so calls pass
	// straight to the store (still failing closed on misaligned cursors).
	open bool
}

var (
	_ engine.Store   = (*Dispatcher)(nil)
	_ engine.Checker = (*Dispatcher)(nil)
	_ io.Closer      = (*Dispatcher)(nil)
)

// New returns a Dispatcher that applies policy to store.
func New(store engine.Store, policy Policy) *Dispatcher {
	_, open := policy.(AllowAll)
	return &Dispatcher{store: store, policy: policy, open: open}
}

// Create stamps the task through the policy when it is a Stamper, checks the
// caller could access the result (else ErrDenied) and stores it.
func (d *Dispatcher) Create(ctx context.Context, task *a2a.Task) (engine.Record, error) {
	if err := engine.ValidateTask(task); err != nil {
		return engine.Record{}, err
	}
	task, err := d.admit(ctx, task)
	if err != nil {
		return engine.Record{}, err
	}
	return d.store.Create(ctx, task)
}

// Get returns the task, or the not-found error when it is missing or
// inaccessible (A6).
func (d *Dispatcher) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return d.get(ctx, id)
}

// Replace replaces an accessible task with content the caller may access.
func (d *Dispatcher) Replace(ctx context.Context, task *a2a.Task, expectedRevision int64) (engine.Record, error) {
	if err := engine.ValidateTask(task); err != nil {
		return engine.Record{}, err
	}
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	// The new content is judged before the store is read, so ErrDenied
	// says nothing about the stored task.
	task, err := d.admit(ctx, task)
	if err != nil {
		return engine.Record{}, err
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

// Cancel cancels an accessible task.
func (d *Dispatcher) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	if err := d.access(ctx, id); err != nil {
		return engine.Record{}, err
	}
	rec, err := d.store.Cancel(ctx, id)
	return rec, notFound(err)
}

// AppendHistory appends a message to an accessible task.
func (d *Dispatcher) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	if err := engine.ValidateMessage(msg); err != nil {
		return engine.Record{}, err
	}
	if err := d.access(ctx, id); err != nil {
		return engine.Record{}, err
	}
	rec, err := d.store.AppendHistory(ctx, id, msg)
	return rec, notFound(err)
}

// Delete deletes an accessible task.
func (d *Dispatcher) Delete(ctx context.Context, id a2a.TaskID) error {
	if err := d.access(ctx, id); err != nil {
		return err
	}
	return notFound(d.store.Delete(ctx, id))
}

// access checks the caller may access id before a mutation.
func (d *Dispatcher) access(ctx context.Context, id a2a.TaskID) error {
	if d.open {
		return nil
	}
	_, err := d.get(ctx, id)
	return err
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
	return d.allow(ctx, rec.Task)
}

// readAs fails closed unless rec, read for id, holds that task.
func readAs(id a2a.TaskID, rec engine.Record) error {
	if rec.Task == nil || rec.Task.ID != id {
		return fmt.Errorf("authz: store returned another task: %w", engine.ErrInternal)
	}
	return nil
}

// allow asks the policy whether the caller may access task: nil, the
// not-found error of an inaccessible task, or the policy's error.
func (d *Dispatcher) allow(ctx context.Context, task *a2a.Task) error {
	ok, err := d.policy.CanAccessTask(ctx, task)
	if err != nil {
		return policyError(err)
	}
	if !ok {
		return errNotFound
	}
	return nil
}

// admit stamps task (on a copy) and checks the caller may access the result.
func (d *Dispatcher) admit(ctx context.Context, task *a2a.Task) (*a2a.Task, error) {
	if s, ok := d.policy.(Stamper); ok {
		cp := *task
		cp.Metadata = maps.Clone(task.Metadata)
		if err := s.StampTask(ctx, &cp); err != nil {
			return nil, fmt.Errorf("authz: stamp: %w", err)
		}
		task = &cp
	}
	ok, err := d.policy.CanAccessTask(ctx, task)
	if err != nil {
		return nil, policyError(err)
	}
	if !ok {
		return nil, ErrDenied
	}
	return task, nil
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
