package authz

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The dispatcher is an engine.ConditionalStore whatever it wraps, and its
// own Cancel, AppendHistory and Delete are its conditional writes with
// expected revision 0 (except under AllowAll, which checks nothing and
// passes the unconditional call through).
var _ engine.ConditionalStore = (*Dispatcher)(nil)

// MaxWriteAttempts bounds the check-then-write rounds of one Cancel,
// AppendHistory or Delete (and their conditional forms): the first, and
// one more each time another writer changed the task between the check and
// the write (A9).
const MaxWriteAttempts = 8

// ErrWriteContention is the error of a Cancel, AppendHistory or Delete
// whose task another writer changed between the check and the write on
// each of MaxWriteAttempts attempts. Nothing was written. It is an
// engine.ErrRevisionConflict under errors.Is (a2aserver's adapter maps it
// to a2a-go's concurrent modification), and the call may be retried. The caller could
// access the task at the last check, so the error tells it nothing it could
// not read.
var ErrWriteContention = fmt.Errorf("authz: the task changed on every attempt to write it: %w", engine.ErrRevisionConflict)

// errConditionalUnsupported is the error of a write the dispatcher cannot
// make conditional on what it checked: the wrapped store is no
// engine.ConditionalStore, or wraps none.
var errConditionalUnsupported = fmt.Errorf("authz: %w", engine.ErrConditionalUnsupported)

// CancelIf implements engine.ConditionalStore: Cancel of the task at
// revision expectedRevision (0: any) when the caller may access it.
func (d *Dispatcher) CancelIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) (engine.Record, error) {
	var rec engine.Record
	err := d.writeChecked(ctx, id, expectedRevision, func(c engine.ConditionalStore, rev int64) (err error) {
		rec, err = c.CancelIf(ctx, id, rev)
		return err
	})
	return rec, err
}

// AppendHistoryIf implements engine.ConditionalStore: AppendHistory to the
// task at revision expectedRevision (0: any) when the caller may access it.
func (d *Dispatcher) AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, expectedRevision int64) (engine.Record, error) {
	if err := engine.ValidateMessage(msg); err != nil {
		return engine.Record{}, err
	}
	var rec engine.Record
	err := d.writeChecked(ctx, id, expectedRevision, func(c engine.ConditionalStore, rev int64) (err error) {
		rec, err = c.AppendHistoryIf(ctx, id, msg, rev)
		return err
	})
	return rec, err
}

// DeleteIf implements engine.ConditionalStore: Delete of the task at
// revision expectedRevision (0: any) when the caller may access it.
func (d *Dispatcher) DeleteIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) error {
	return d.writeChecked(ctx, id, expectedRevision, func(c engine.ConditionalStore, rev int64) error {
		return c.DeleteIf(ctx, id, rev)
	})
}

// writeChecked is the write path of Cancel, AppendHistory and Delete (A6,
// A9): read the task and check access (a missing or inaccessible task is
// the not-found error), then write conditionally on the revision that was
// checked, so the write acts on the version the policy allowed and on no
// other. When another writer changed the task in between, the write fails
// with a revision conflict and changes nothing; writeChecked then reads
// and checks the new version, so a task moved out of the caller's reach
// meanwhile is not found, at most MaxWriteAttempts times in all (then
// ErrWriteContention), and stops with ctx's error when ctx ends between
// attempts.
//
// expectedRevision is the caller's own condition (0: none): a task at
// another revision is a conflict, reported only after the check, so an
// inaccessible task is not found whatever its revision.
//
// Over a store that is not an engine.ConditionalStore (or a decorator over
// one, which answers engine.ErrConditionalUnsupported) the write fails
// closed with engine.ErrConditionalUnsupported before the store is read:
// an unconditional write after the check could act on a version the
// caller may not access, and whether it can depends on the policy and on
// every other writer, which the dispatcher cannot know.
func (d *Dispatcher) writeChecked(ctx context.Context, id a2a.TaskID, expectedRevision int64, write func(c engine.ConditionalStore, rev int64) error) error {
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return err
	}
	c, ok := d.store.(engine.ConditionalStore)
	if !ok {
		return errConditionalUnsupported
	}
	for attempt := 1; ; attempt++ {
		var cur engine.Record
		var err error
		if d.open {
			// AllowAll: nothing to check, the caller's condition only.
			cur.Revision = expectedRevision
		} else if cur, err = d.get(ctx, id); err != nil {
			return err
		}
		if expectedRevision != 0 && cur.Revision != expectedRevision {
			return fmt.Errorf("authz: revision %d, expected %d: %w", cur.Revision, expectedRevision, engine.ErrRevisionConflict)
		}
		err = write(c, cur.Revision)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, engine.ErrNotFound):
			return errNotFound
		case errors.Is(err, engine.ErrConditionalUnsupported):
			return errConditionalUnsupported
		case errors.Is(err, engine.ErrRevisionConflict) && !d.open:
			// Changed since the check: check the new version. Each
			// retry follows another writer's successful mutation of
			// this task.
			if attempt == MaxWriteAttempts {
				return ErrWriteContention
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		return err
	}
}
