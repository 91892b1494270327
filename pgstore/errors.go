package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2astore/a2astore/engine"
	"github.com/jackc/pgx/v5/pgconn"
)

// opError is a translated database error. Its message holds only the
// operation and the engine sentinel — never driver text, which may quote
// SQL or data — while Unwrap still reaches the driver error for logging
// (errors.As(err, new(*pgconn.PgError))).
type opError struct {
	op    string
	kind  error // an engine sentinel
	cause error
}

func (e *opError) Error() string { return "pgstore: " + e.op + ": " + e.kind.Error() }

func (e *opError) Unwrap() []error { return []error{e.kind, e.cause} }

// errTimeAtMax is the error of a mutation of a task at its maximum time
// (S5): an engine.ErrInternal.
var errTimeAtMax = fmt.Errorf("task time is at its maximum: %w", engine.ErrInternal)

// SQLSTATEs the store reacts to.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

// translate turns an error from pgx into the error a Store method returns.
// Context errors come back as themselves (wrapped with the operation); a
// query the context cancelled is reported as the context's error even when
// the server answered "canceling statement".
func translate(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &ctxError{op: op, err: ctxErr, cause: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeUniqueViolation:
			return &opError{op: op, kind: engine.ErrAlreadyExists, cause: err}
		case "22021", // character_not_in_repertoire (invalid UTF-8)
			"22P05", // untranslatable_character (NUL)
			"22001", // string_data_right_truncation
			"54000": // program_limit_exceeded (e.g. index row too large)
			return &opError{op: op, kind: engine.ErrInvalidArgument, cause: err}
		}
	}
	return &opError{op: op, kind: engine.ErrInternal, cause: err}
}

// ctxError reports a cancelled or timed-out call.
type ctxError struct {
	op    string
	err   error // context.Canceled or context.DeadlineExceeded
	cause error
}

func (e *ctxError) Error() string { return "pgstore: " + e.op + ": " + e.err.Error() }

func (e *ctxError) Unwrap() []error { return []error{e.err, e.cause} }
