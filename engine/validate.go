package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Page sizes (L3).
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// knownStates is the one list of the task states A2A defines: active
// states, then terminal ones (a2a.TaskState.Terminal). Backends and the
// conformance suite derive their own lists and tables from it.
var knownStates = [...]a2a.TaskState{
	a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
	a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected,
}

// KnownStates returns the task states A2A defines (TaskStateUnspecified is
// not one), active ones first, then terminal ones. The slice is the
// caller's.
func KnownStates() []a2a.TaskState { return slices.Clone(knownStates[:]) }

// KnownState reports whether s is one of KnownStates.
func KnownState(s a2a.TaskState) bool { return slices.Contains(knownStates[:], s) }

// ValidateID checks a task ID against S8's length rule: 1..MaxIDBytes bytes.
// Backends that cannot store some bytes add their own check.
func ValidateID(id a2a.TaskID) error {
	if len(id) == 0 {
		return fmt.Errorf("engine: empty task ID: %w", ErrInvalidArgument)
	}
	if len(id) > MaxIDBytes {
		return fmt.Errorf("engine: task ID longer than %d bytes: %w", MaxIDBytes, ErrInvalidArgument)
	}
	return nil
}

// ValidateTask checks what every backend requires of a task it stores (S8):
// non-nil, a valid ID, a context ID of at most MaxIDBytes bytes, and a
// known state.
func ValidateTask(t *a2a.Task) error {
	if t == nil {
		return fmt.Errorf("engine: nil task: %w", ErrInvalidArgument)
	}
	if err := ValidateID(t.ID); err != nil {
		return err
	}
	if len(t.ContextID) > MaxIDBytes {
		return fmt.Errorf("engine: context ID longer than %d bytes: %w", MaxIDBytes, ErrInvalidArgument)
	}
	if !KnownState(t.Status.State) {
		return fmt.Errorf("engine: unknown task state: %w", ErrInvalidArgument)
	}
	return nil
}

// ValidateOwner checks an owner against O1's length rule: at most
// MaxOwnerBytes bytes ("" = no owner). Backends that cannot store some bytes
// add their own check.
func ValidateOwner(owner string) error {
	if len(owner) > MaxOwnerBytes {
		return fmt.Errorf("engine: owner longer than %d bytes: %w", MaxOwnerBytes, ErrInvalidArgument)
	}
	return nil
}

// ValidateExpectedRevision checks Replace's expectedRevision (S7): 0
// (unconditional) or a revision, which is at least 1. A negative value is
// ErrInvalidArgument, decided before the store is read, so it fails the
// same way whether or not the task exists.
func ValidateExpectedRevision(rev int64) error {
	if rev < 0 {
		return fmt.Errorf("engine: negative expected revision: %w", ErrInvalidArgument)
	}
	return nil
}

// ValidateMessage checks a message for AppendHistory: non-nil, with an ID.
func ValidateMessage(m *a2a.Message) error {
	if m == nil {
		return fmt.Errorf("engine: nil message: %w", ErrInvalidArgument)
	}
	if m.ID == "" {
		return fmt.Errorf("engine: message without ID: %w", ErrInvalidArgument)
	}
	return nil
}

// Query is a validated ListRequest, ready for a backend to run (package
// engine/listpage holds what backends do with it).
type Query struct {
	ContextID   string        // "" = any
	Owner       string        // "" = any (O3)
	Status      a2a.TaskState // unspecified = any
	StatusAfter *time.Time    // nil = no status-timestamp filter
	PageSize    int           // 1..MaxPageSize
	After       *Cursor       // boundary; nil = start of the list
	// HistoryLength is -1 for all history, otherwise the number of most
	// recent messages to keep.
	HistoryLength    int
	IncludeArtifacts bool
	IncludeTotalSize bool
	Projection       Projection
}

// ParseListRequest validates req (L3, T4) and returns the query it asks for.
// Every backend calls it first, so bad input fails the same way everywhere
// and before any storage is touched.
func ParseListRequest(req *ListRequest) (Query, error) {
	if req == nil {
		return Query{}, fmt.Errorf("engine: nil list request: %w", ErrInvalidArgument)
	}
	q := Query{
		ContextID:        req.ContextID,
		Owner:            req.Owner,
		Status:           req.Status,
		StatusAfter:      req.StatusTimestampAfter,
		PageSize:         req.PageSize,
		HistoryLength:    -1,
		IncludeArtifacts: req.IncludeArtifacts,
		IncludeTotalSize: req.IncludeTotalSize,
		Projection:       req.Projection,
	}
	switch {
	case q.PageSize == 0:
		q.PageSize = DefaultPageSize
	case q.PageSize < 0 || q.PageSize > MaxPageSize:
		return Query{}, fmt.Errorf("engine: page size must be 1..%d: %w", MaxPageSize, ErrInvalidArgument)
	}
	if q.Status != a2a.TaskStateUnspecified && !KnownState(q.Status) {
		return Query{}, fmt.Errorf("engine: unknown status filter: %w", ErrInvalidArgument)
	}
	if req.HistoryLength != nil {
		if *req.HistoryLength < 0 {
			return Query{}, fmt.Errorf("engine: negative history length: %w", ErrInvalidArgument)
		}
		q.HistoryLength = *req.HistoryLength
	}
	if len(q.ContextID) > MaxIDBytes {
		return Query{}, fmt.Errorf("engine: context ID longer than %d bytes: %w", MaxIDBytes, ErrInvalidArgument)
	}
	if err := ValidateOwner(q.Owner); err != nil {
		return Query{}, err
	}
	if q.Projection != ProjectionFull && q.Projection != ProjectionLight {
		return Query{}, fmt.Errorf("engine: unknown projection: %w", ErrInvalidArgument)
	}
	if req.PageToken != "" {
		c, err := DecodeToken(req.PageToken)
		if err != nil {
			return Query{}, err
		}
		q.After = &c
	}
	return q, nil
}
