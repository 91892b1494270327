package listpage

import (
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// Matches reports whether a task with these fields passes q's filters (L2,
// O3): the owner, the context ID and the state when q sets them, and a
// status timestamp at or after q.StatusAfter when q sets it (a task without
// a status timestamp then never matches). owner is the task's recorded
// owner ("" = none): a task without one never passes an owner filter. It
// does not look at the boundary. statusTime is read only when q.StatusAfter
// is set, so a caller may skip decoding it otherwise.
func Matches(q *engine.Query, owner, contextID string, state a2a.TaskState, statusTime *time.Time) bool {
	if q.Owner != "" && owner != q.Owner {
		return false
	}
	if q.ContextID != "" && contextID != q.ContextID {
		return false
	}
	if q.Status != a2a.TaskStateUnspecified && state != q.Status {
		return false
	}
	if q.StatusAfter != nil && (statusTime == nil || statusTime.Before(*q.StatusAfter)) {
		return false
	}
	return true
}

// Shape trims a task the caller owns (a fresh copy) for a full-projection
// page (L4): history to q's HistoryLength, artifacts dropped unless q
// includes them.
func Shape(q *engine.Query, t *a2a.Task) {
	if q.HistoryLength >= 0 && len(t.History) > q.HistoryLength {
		t.History = t.History[len(t.History)-q.HistoryLength:]
		if len(t.History) == 0 {
			t.History = nil
		}
	}
	if !q.IncludeArtifacts {
		t.Artifacts = nil
	}
}

// Response assembles a page from its tasks (at most q.PageSize, in list
// order, with their cursors) and whether another matching task follows
// them: then NextPageToken encodes the last returned task's cursor (T6).
// Backends learn "more" by reading one entry past the page, without
// decoding it. An empty page is an empty, non-nil slice with an empty
// token. The caller fills TotalSize and Stats.
func Response(q *engine.Query, tasks []*a2a.Task, cursors []engine.Cursor, more bool) *engine.ListResponse {
	resp := &engine.ListResponse{PageSize: q.PageSize, Tasks: tasks, TaskCursors: cursors}
	if more && len(cursors) > 0 {
		resp.NextPageToken = engine.EncodeToken(cursors[len(cursors)-1])
	}
	if resp.Tasks == nil {
		resp.Tasks, resp.TaskCursors = []*a2a.Task{}, []engine.Cursor{}
	}
	return resp
}
