package engine

import "errors"

// Sentinel errors. Backends wrap them with context
// (fmt.Errorf("pgstore: list: %w", ErrInternal)); callers test them with
// errors.Is only.
var (
	ErrInvalidArgument  = errors.New("engine: invalid argument")
	ErrNotFound         = errors.New("engine: task not found")
	ErrAlreadyExists    = errors.New("engine: task already exists")
	ErrRevisionConflict = errors.New("engine: revision conflict")
	ErrNotCancelable    = errors.New("engine: task not cancelable")
	ErrInternal         = errors.New("engine: internal error")

	// ErrInvalidPageToken is the one error for every bad page token (T4):
	// errors.Is(ErrInvalidPageToken, ErrInvalidArgument) holds, and its
	// message never contains the token.
	ErrInvalidPageToken error = &childError{msg: "engine: invalid page token", parent: ErrInvalidArgument}

	// ErrOwnersUnsupported is the error of an owner-filtered List or a
	// CreateOwned sent to a store that does not record owners (it is not
	// an OwnerStore, or a decorator wraps one that is not): a deployment
	// fault, not bad input, so errors.Is(ErrOwnersUnsupported, ErrInternal)
	// holds.
	ErrOwnersUnsupported error = &childError{msg: "engine: store does not record task owners", parent: ErrInternal}
)

// childError is a sentinel that is also its parent sentinel under errors.Is.
type childError struct {
	msg    string
	parent error
}

func (e *childError) Error() string { return e.msg }
func (e *childError) Unwrap() error { return e.parent }
