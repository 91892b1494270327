package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// StoredTask is a task exactly as a store holds it: the record (task,
// revision, cursor, owner) and the task's log. An Exporter reads it, an
// Importer writes it back unchanged (SPEC X1).
type StoredTask struct {
	Record
	// Log is the task's log (K7), oldest first: nil when the store keeps
	// none, or when its entries were trimmed (LogStore.TrimLog).
	Log []LogEntry
}

// Exporter is a store that reads its tasks in bulk, as stored: the source
// side of a copy between backends (SPEC X1; a2astore-admin copy).
type Exporter interface {
	// Export returns up to limit (1..MaxExport) tasks in list order (S6)
	// after the cursor after (nil: from the newest), each with its
	// revision, cursor, owner and log, read from one consistent view of
	// the store. Fewer than limit: the end was reached.
	Export(ctx context.Context, after *Cursor, limit int) ([]StoredTask, error)
}

// Importer is a store that writes tasks in bulk exactly as another store
// held them: the target side of a copy between backends and the bulk
// loader of benchmarks (SPEC X1). What it writes is what Create and the
// mutations would have left — the record, every index and counter, the
// log — without going through them: the tasks keep their IDs, storage
// update times (so their list order), revisions, owners and logs.
type Importer interface {
	// Import writes tasks, all of them or none (one batch, one
	// transaction). A task whose ID the store holds already, or that
	// appears twice, fails the call with ErrAlreadyExists; a task that
	// is not valid stored state (ValidateStoredTask) or that the store
	// cannot hold fails it with ErrInvalidArgument. Log entries are
	// written when the store keeps a log, dropped otherwise.
	Import(ctx context.Context, tasks []StoredTask) error
	// Tail returns the cursors of the last n (1..MaxExport) tasks in list
	// order — the oldest — the last one last; fewer when the store holds
	// fewer. A copy that stopped resumes after the last one.
	Tail(ctx context.Context, n int) ([]Cursor, error)
}

// MaxExport bounds Export's limit and Tail's n.
const MaxExport = 10000

// ValidateExport checks Export's limit (and Tail's n).
func ValidateExport(limit int) error {
	if limit < 1 || limit > MaxExport {
		return fmt.Errorf("engine: export limit %d (want 1..%d): %w", limit, MaxExport, ErrInvalidArgument)
	}
	return nil
}

// ValidateStoredTask checks a task to import against the rules every
// stored task meets, with lim bounding its content: a valid task (S8)
// under an owner that is valid (O1), its cursor's ID the task's, a time
// in 0..math.MaxInt64 (S5), a revision of at least 1 (S7), and log entries
// of known kinds and states in consecutive revisions ending at the
// task's, none later than the task's time, the last at the task's time
// and state (K7: what every backend's invariant check requires; a
// trimmed log may start anywhere), each with a trace that is a
// traceparent or nothing (H2, ValidTraceParent).
func ValidateStoredTask(st *StoredTask, lim Limits) error {
	t := st.Task
	if err := lim.ValidateTask(t); err != nil {
		return err
	}
	if err := ValidateOwner(st.Owner); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("engine: import task %q: "+format+": %w", append([]any{t.ID}, append(args, ErrInvalidArgument)...)...)
	}
	switch {
	case st.Cursor.ID != t.ID:
		return bad("cursor of task %q", st.Cursor.ID)
	case st.Cursor.UpdatedAt < 0:
		return bad("time %d", st.Cursor.UpdatedAt)
	case st.Revision < 1:
		return bad("revision %d", st.Revision)
	}
	prev := int64(0)
	for i := range st.Log {
		l := &st.Log[i]
		switch {
		case l.Revision <= prev || l.Revision > st.Revision:
			return bad("log entry at revision %d after %d (task at %d)", l.Revision, prev, st.Revision)
		case l.Time < 0 || l.Time > st.Cursor.UpdatedAt:
			return bad("log entry %d at time %d (task at %d)", l.Revision, l.Time, st.Cursor.UpdatedAt)
		case l.Kind < LogTask || l.Kind > LogCanceled:
			return bad("log entry %d of kind %d", l.Revision, l.Kind)
		case !KnownState(l.State):
			return bad("log entry %d in state %q", l.Revision, l.State)
		case !ValidTraceParent(l.Trace): // H2: a traceparent or nothing
			return bad("log entry %d with a malformed trace", l.Revision)
		case i > 0 && l.Revision != prev+1: // K7: a trimmed log loses its oldest entries only
			return bad("log entries at revisions %d then %d", prev, l.Revision)
		case !entryOfTask(l, t.ID):
			return bad("log entry %d is not an event of the task", l.Revision)
		}
		prev = l.Revision
	}
	if n := len(st.Log); n > 0 {
		// K7: the last entry is the task's revision, at its time and state.
		if l := &st.Log[n-1]; l.Revision != st.Revision || l.Time != st.Cursor.UpdatedAt || l.State != t.Status.State {
			return bad("last log entry at revision %d, time %d, state %s; task at %d, %d, %s",
				l.Revision, l.Time, l.State, st.Revision, st.Cursor.UpdatedAt, t.Status.State)
		}
	}
	return nil
}

// entryOfTask reports whether l's body is what a store writes for task
// id (NewLogEntry, MessageEntry: DescribesTask): for a task or event
// entry a StreamResponse of the task (push delivery sends that body as
// is: LogEntry.Payload), for a message entry a message of the task or of
// none. An ID that is not valid UTF-8 does not survive JSON: only the
// shape is checked then.
func entryOfTask(l *LogEntry, id a2a.TaskID) bool {
	same := func(got a2a.TaskID) bool { return got == id || !utf8.ValidString(string(id)) }
	switch l.Kind {
	case LogTask, LogEvent:
		var sr a2a.StreamResponse
		if err := json.Unmarshal(l.Body, &sr); err != nil {
			return false
		}
		switch v := sr.Event.(type) {
		case *a2a.Task:
			return same(v.ID)
		case *a2a.TaskStatusUpdateEvent:
			return l.Kind == LogEvent && same(v.TaskID)
		case *a2a.TaskArtifactUpdateEvent:
			return l.Kind == LogEvent && same(v.TaskID)
		}
		return false
	case LogMessage:
		var m a2a.Message
		if err := json.Unmarshal(l.Body, &m); err != nil {
			return false
		}
		return m.TaskID == "" || same(m.TaskID)
	}
	return true // LogCanceled: its body is the context ID, any bytes
}

// TrimFrom is where a LogStore's TrimLog walk, which goes on from the
// last task it trimmed (from; nil: the oldest task) towards newer ones,
// goes on after tasks were imported: nil when one of them is older than
// from, whose log it would pass over for good otherwise (K7, X1).
func TrimFrom(from *Cursor, tasks []StoredTask) *Cursor {
	for i := range tasks {
		if from != nil && tasks[i].Cursor.Compare(*from) > 0 {
			return nil
		}
	}
	return from
}
