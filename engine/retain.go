package engine

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Retainer is a Store that can remove expired tasks in bounded batches: the
// retention part of the contract (R1, R2), an optional interface so that
// stores written against Store keep compiling. engine/retention drives it
// at an interval; a caller may also run it by hand.
//
//   - R1 RemoveExpired examines the tasks oldest first — ascending
//     storage update time, then ascending ID: the reverse of list order
//     (S6) — starting at the tail of the ordering index (or just after
//     RetainRequest.After), never scanning the rest of the store. It
//     removes the tasks in a terminal state (completed, failed, canceled,
//     rejected) whose UpdatedAt is before TerminalBefore and, when
//     StuckBefore is set, the tasks in any other state whose UpdatedAt is
//     before StuckBefore. It examines at most Limit tasks, so one call's
//     work is bounded whatever the store holds.
//   - R2 Each removal is a Delete (S9): lists never show the task again,
//     totals and counters (by state, context and owner) stay exact at
//     every moment (L5, L8), and traversals in progress keep their L7
//     guarantees. A task mutated after the examination and before its
//     removal is left alone when it is no longer due. Backends shared by
//     several servers (pgstore) run one RemoveExpired at a time across
//     them when engine/retention asks (see retention.Locker); several
//     calls are safe anyway, at worst doing the same work twice.
//
// Bad input (RetainRequest.Validate) fails with ErrInvalidArgument and
// removes nothing.
type Retainer interface {
	Store
	RemoveExpired(ctx context.Context, req RetainRequest) (RetainResult, error)
}

// MaxRetainLimit bounds RetainRequest.Limit: the most tasks one
// RemoveExpired call examines.
const MaxRetainLimit = 10000

// RetainRequest is one retention batch.
type RetainRequest struct {
	// TerminalBefore removes the tasks in a terminal state whose UpdatedAt
	// (µs since the Unix epoch) is strictly before it. 0 removes none of
	// them. Valid: 0..math.MaxInt64.
	TerminalBefore int64
	// StuckBefore, when not 0, removes the tasks in a non-terminal state
	// whose UpdatedAt is strictly before it: work that was never finished.
	// Default (0): off, non-terminal tasks are never removed. It must not
	// be after TerminalBefore (a stuck task's age is the longer one).
	StuckBefore int64
	// Limit is the most tasks the call examines (removed or not): 1..
	// MaxRetainLimit. It bounds the call's work and the tasks it removes.
	Limit int
	// After, when not nil, resumes a sweep: only tasks after this cursor
	// in oldest-first order are examined (RetainResult.Next of the
	// previous call). nil starts at the oldest task.
	After *Cursor
}

// RetainResult is what one RemoveExpired call did.
type RetainResult struct {
	// Removed is the number of tasks removed.
	Removed int
	// Examined is the number of tasks examined (at most Limit).
	Examined int
	// Next, when not nil, is where the sweep goes on: the call stopped at
	// Limit while tasks older than TerminalBefore may remain after it.
	// Pass it as the next call's After. nil: nothing after the last
	// examined task is due.
	Next *Cursor
	// OldestTerminal is the cursor of the oldest terminal task the call
	// saw and kept because it is not old enough, when the call reached
	// the tasks newer than TerminalBefore and found one within Limit.
	// Nil otherwise (then the oldest kept terminal task is unknown).
	OldestTerminal *Cursor
}

// Validate checks r: ErrInvalidArgument for a negative time, StuckBefore
// after TerminalBefore, a Limit outside 1..MaxRetainLimit, or an After
// that is no cursor (a bad ID, a negative time).
func (r *RetainRequest) Validate() error {
	switch {
	case r.TerminalBefore < 0:
		return fmt.Errorf("engine: retain: negative TerminalBefore: %w", ErrInvalidArgument)
	case r.StuckBefore < 0:
		return fmt.Errorf("engine: retain: negative StuckBefore: %w", ErrInvalidArgument)
	case r.StuckBefore > r.TerminalBefore:
		return fmt.Errorf("engine: retain: StuckBefore after TerminalBefore (a stuck task's age must be the longer): %w", ErrInvalidArgument)
	case r.Limit < 1 || r.Limit > MaxRetainLimit:
		return fmt.Errorf("engine: retain: Limit %d outside 1..%d: %w", r.Limit, MaxRetainLimit, ErrInvalidArgument)
	}
	if r.After != nil {
		if r.After.UpdatedAt < 0 {
			return fmt.Errorf("engine: retain: After has a negative time: %w", ErrInvalidArgument)
		}
		if err := ValidateID(r.After.ID); err != nil {
			return fmt.Errorf("engine: retain: After: %w", err)
		}
	}
	return nil
}

// Due reports whether a task at time updatedAt in state is removed by r.
func (r *RetainRequest) Due(updatedAt int64, state a2a.TaskState) bool {
	if state.Terminal() {
		return updatedAt < r.TerminalBefore
	}
	return r.StuckBefore != 0 && updatedAt < r.StuckBefore
}

// RetainScan is the decision procedure every backend's RemoveExpired runs
// over the tasks it reads oldest first: Visit each one in that order until
// it says stop; remove those it calls due. Keeping it here keeps the
// backends' batches identical.
type RetainScan struct {
	req    *RetainRequest
	result RetainResult
	last   Cursor
}

// NewRetainScan starts the scan of a validated request.
func NewRetainScan(req *RetainRequest) *RetainScan { return &RetainScan{req: req} }

// Visit examines the next task oldest first (at cursor c, in state). due:
// the caller removes it; more false: the scan stops (before examining c,
// when the Limit is reached).
func (s *RetainScan) Visit(c Cursor, state a2a.TaskState) (due, more bool) {
	if s.result.Examined == s.req.Limit {
		if s.last.UpdatedAt < s.req.TerminalBefore {
			next := s.last
			s.result.Next = &next
		}
		return false, false
	}
	s.result.Examined++
	s.last = c
	if s.req.Due(c.UpdatedAt, state) {
		return true, true
	}
	if c.UpdatedAt >= s.req.TerminalBefore && state.Terminal() {
		// Past everything due: the oldest kept terminal task.
		oldest := c
		s.result.OldestTerminal = &oldest
		return false, false
	}
	return false, true
}

// Removed counts one removal of a due task.
func (s *RetainScan) Removed() { s.result.Removed++ }

// Result is what the scan did.
func (s *RetainScan) Result() RetainResult { return s.result }

// ErrRetainUnsupported is the error of RemoveExpired on a decorator whose
// wrapped store is no Retainer. errors.Is(ErrRetainUnsupported,
// ErrInternal) holds: it is a wiring fault, not bad input.
var ErrRetainUnsupported error = &childError{msg: "engine: store does not remove expired tasks", parent: ErrInternal}

// RetainForwarder is implemented by decorators (engine/authz,
// engine/storemetrics) that have RemoveExpired whatever they wrap:
// CanRetain reports whether the store under them is a Retainer.
type RetainForwarder interface {
	CanRetain() bool
}

// AsRetainer returns s as a Retainer when it can remove expired tasks: it
// implements Retainer and, if it is a decorator (RetainForwarder), the
// store it wraps can too. Use it instead of a type assertion.
func AsRetainer(s Store) (Retainer, bool) {
	r, ok := s.(Retainer)
	if !ok {
		return nil, false
	}
	if f, ok := s.(RetainForwarder); ok && !f.CanRetain() {
		return nil, false
	}
	return r, true
}
