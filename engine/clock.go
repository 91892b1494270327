package engine

import (
	"fmt"
	"math"
)

// CreateTime is the UpdatedAt of a new task given a clock reading: the
// reading, or 0 if it is negative (S4, S5).
func CreateTime(now int64) int64 { return max(now, 0) }

// NextTime is the UpdatedAt of a task after a mutation (S4, S5):
// max(now, old+1), now clamped at 0. A task already at math.MaxInt64 cannot
// advance: NextTime fails with ErrInternal and the caller must change nothing.
func NextTime(old, now int64) (int64, error) {
	if old == math.MaxInt64 {
		return 0, fmt.Errorf("engine: task time is at its maximum: %w", ErrInternal)
	}
	return max(now, old+1, 0), nil
}

// NextRevision is a task's revision after a mutation (S7): rev+1. A task
// already at math.MaxInt64 (reachable only by importing one there) cannot
// advance: NextRevision fails with ErrInternal and the caller must change
// nothing, as NextTime does for a task at its maximum time.
func NextRevision(rev int64) (int64, error) {
	if rev == math.MaxInt64 {
		return 0, fmt.Errorf("engine: task revision is at its maximum: %w", ErrInternal)
	}
	return rev + 1, nil
}
