package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/a2astore/a2astore/engine"
)

// The conditional writes (engine.ConditionalStore) are the unconditional
// statements with one more condition, as Replace has always had: the row
// is written only while its revision is the expected one ($n::bigint = 0
// OR t.revision = $n), in the same statement, so no other writer's change
// can come between the comparison and the write. Cancel, AppendHistory and
// Delete are CancelIf, AppendHistoryIf and DeleteIf with expected
// revision 0. When a statement writes nothing, a follow-up read tells why:
// a missing task (ErrNotFound), another revision (ErrRevisionConflict,
// compared first), or the unconditional method's own reasons. When it
// finds none of them (the row the statement waited on was deleted and the
// task created again under its ID in between, which the statement's
// snapshot cannot see), Cancel and AppendHistory run again on the task as
// it is now, at most maxAttempts times (then ErrRevisionConflict): they
// never report a write that did not happen.
var _ engine.ConditionalStore = (*Store)(nil)

// validateConditional checks the arguments every conditional write takes,
// before any SQL runs.
func validateConditional(id a2a.TaskID, expectedRevision int64) error {
	if err := validateID(id); err != nil {
		return err
	}
	return engine.ValidateExpectedRevision(expectedRevision)
}

// deleteMissed is the error of a DeleteIf whose statement deleted nothing:
// the task is missing, or (conditional) it is at another revision.
func (s *Store) deleteMissed(ctx context.Context, id a2a.TaskID, expectedRevision int64) error {
	if expectedRevision == 0 {
		return fmt.Errorf("pgstore: delete: %w", engine.ErrNotFound)
	}
	var rev int64
	var full bool
	err := s.pool.QueryRow(ctx, s.sql.revisionOf, string(id)).Scan(&rev, &full)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgstore: delete: %w", engine.ErrNotFound)
	case err != nil:
		return translate(ctx, "delete", err)
	case rev != expectedRevision:
		return fmt.Errorf("pgstore: delete: revision %d, expected %d: %w", rev, expectedRevision, engine.ErrRevisionConflict)
	}
	// At the expected revision now, yet the DELETE found no such row: the
	// task was created (again) in between. Report it as the missing task
	// it was when the statement ran.
	return fmt.Errorf("pgstore: delete: %w", engine.ErrNotFound)
}
