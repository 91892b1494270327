package engine

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// ConditionalStore is a Store whose Cancel, AppendHistory and Delete can be
// made conditional on the revision the caller last read, as Replace always
// can: the write acts only on that version of the task. It is what lets a
// decorator decide on one read and write that very version (the
// authorization dispatcher, SPEC A9), with no window in which another
// writer's change slips between the decision and the write.
//
// It is an optional interface, like OwnerStore, so that stores written
// against Store keep compiling. The backends of this module implement it
// and the decorators (engine/authz, engine/storemetrics) forward it; a
// decorator over a store that lacks it answers every conditional call with
// ErrConditionalUnsupported. storetest.Run runs its clauses (C-If) against
// every ConditionalStore:
//
//   - expectedRevision 0 is the unconditional method (CancelIf(ctx, id, 0)
//     is Cancel(ctx, id)); a negative one is ErrInvalidArgument, decided
//     before the store is read (ValidateExpectedRevision), as is every
//     other bad input of the unconditional method.
//   - A missing task is ErrNotFound, whatever the revision.
//   - A revision that differs from the stored one is ErrRevisionConflict
//     and changes nothing (S3). The revision is compared first: a
//     mismatch is a conflict even when the unconditional method would have
//     refused the write (ErrNotCancelable on a terminal task, ErrInternal
//     on a task at the maximum time) or changed nothing (an AppendHistory
//     whose message is already in the history returns no record then).
//   - A revision that matches makes the call exactly the unconditional
//     one, atomically with the comparison: the same result, the same
//     errors (ErrNotCancelable, the deduplicated append returning the
//     current record unchanged, …) and the same effect on time and
//     revision (S2–S5, S7, S9).
//
// A revision identifies a version of one incarnation of a task: a task
// deleted and created again under the same ID starts over at revision 1
// (S7), so a condition on revision 1 read before the Delete matches the new
// task too.
type ConditionalStore interface {
	Store
	// CancelIf is Cancel of the task at revision expectedRevision.
	CancelIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) (Record, error)
	// AppendHistoryIf is AppendHistory to the task at revision
	// expectedRevision.
	AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, expectedRevision int64) (Record, error)
	// DeleteIf is Delete of the task at revision expectedRevision.
	DeleteIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) error
}

// ErrConditionalUnsupported is the error of a conditional write (CancelIf,
// AppendHistoryIf, DeleteIf) sent to a decorator whose wrapped store is not
// a ConditionalStore, and of the authorization dispatcher's Cancel,
// AppendHistory and Delete over such a store (they fail closed rather than
// write a version they did not check, SPEC A9). It is a deployment fault,
// not bad input: errors.Is(ErrConditionalUnsupported, ErrInternal) holds.
var ErrConditionalUnsupported error = &childError{msg: "engine: store has no conditional writes", parent: ErrInternal}
