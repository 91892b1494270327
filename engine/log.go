package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// LogStore is a Store that keeps a log per task: the log part of the
// contract (SPEC K7), an optional interface so that stores written against
// Store keep compiling. The backends of this module implement it when
// their Options.Log is set; servers need it (subscriptions, cluster mode
// and push delivery read the log), embedded users may leave it off.
//
//   - K7 Every revision of a task has exactly one log entry, written in the
//     same transaction (batch, lock) as the revision: Create (revision 1),
//     every Replace, Cancel and AppendHistory that changes the task. No
//     entry exists without its revision, and no committed revision lacks
//     its entry. A rejected write, a conflict and a deduplicated append
//     write none (S3). ReadLog returns the entries of a task in revision
//     order, without gaps, each with the task's state after it; a reader
//     ends at a terminal entry (LogEntry.State.Terminal()).
//   - What an entry records: Create and a Replace without an event record
//     the whole task (LogTask); a Replace whose context carries an event
//     (WithEvent) records that event (LogEvent), or the whole task when the
//     event does not describe the stored result (DescribesTask); Cancel
//     records the status update to canceled (LogCanceled); AppendHistory,
//     and a Replace whose event is a message already at the end of the
//     history, record the message (LogMessage) — a history revision, which
//     readers pass over without delivering anything, unless its state is
//     not the state of the entry before it (a Replace that added a message
//     and moved the task, to input-required say): a reader then delivers
//     the task as it is (tasklog.Tail), since the entry says nothing of
//     the new status.
//   - The log goes with its task: Delete (and retention) removes it in the
//     same transaction, and leaves a mark of the deletion (Deleted) for
//     the log retention; a task created again under the same ID starts a
//     new log at revision 1. Entries of a task whose time has not moved for the
//     store's log retention may be trimmed (Options.LogRetention of each
//     backend); a reader that finds entries missing below the task's
//     revision — some, or all that it had not read — starts again from the
//     task itself. A reader follows one incarnation of its task: it knows
//     the time of the entry it stands on (Time), and a log whose entry at
//     that revision has another time, or a task now below that revision,
//     belongs to a task created again under the ID (tasklog.Tail ends).
type LogStore interface {
	Store
	// ReadLog returns the entries of task id whose revision is above after,
	// oldest first, at most limit of them (1..MaxLogRead). A task without
	// entries there (missing, or no newer revision) returns none and no
	// error. A store whose log is off fails with ErrLogDisabled.
	ReadLog(ctx context.Context, id a2a.TaskID, after int64, limit int) ([]LogEntry, error)
	// WatchLog returns a channel that receives a value (coalesced, never
	// blocking the writer) after each entry of id this store commits, and
	// the function that stops the watch. A reader rereads the log when it
	// fires; it is a hint, never the entry itself.
	WatchLog(id a2a.TaskID) (<-chan struct{}, func())
	// TrimLog drops the logs of tasks whose time is before before (µs):
	// tasks idle since then. It walks the tasks oldest first from the
	// tail of the ordering index, from where its last call on this store
	// value stopped, and examines at most limit of them, so one call's
	// work is bounded; it returns how many logs it examined. A log
	// retention service calls it at an interval.
	//
	// It also forgets the deletions (Deleted) older than before, examining
	// at most as many as the limit leaves after the logs; the count it
	// returns includes them, so that a caller that calls again while a
	// call comes back full reaches both ends.
	TrimLog(ctx context.Context, before int64, limit int) (int, error)
	// Deleted returns the mark of the last deletion of task id (Delete,
	// retention) that the store remembers, or 0 when it remembers none
	// (K7): a time in µs on the store's clock, after the deleted task's
	// last time and after the mark of the deletion of id it remembered
	// before, so that two deletions of id it remembers never share a
	// mark. A deletion is remembered until TrimLog's cutoff passes its
	// mark (the log retention); a task created again under the ID does
	// not erase it. A reader that started before a task existed compares
	// the mark with the one it saw at its start (tasklog.Tail.Start): a
	// new mark, while the task is missing, says the task was created and
	// deleted since — it is gone, not yet to come.
	Deleted(ctx context.Context, id a2a.TaskID) (int64, error)
}

// DeletionMark is the mark of a deletion at clock reading now of a task
// whose last time was updatedAt, when the store remembered an earlier
// deletion of the ID at prev (0: none): after both (see
// LogStore.Deleted).
func DeletionMark(now, updatedAt, prev int64) int64 {
	return max(now, updatedAt+1, prev+1, 1)
}

// LogClock is a LogStore whose log times (LogEntry.Time, the tasks'
// UpdatedAt) come from a clock of its own — a database server's — rather
// than from its caller's: LogNow is that clock's time now (µs). The log
// retention service (tasklog.Trimmer) takes its cutoff from it, so that
// a skew between the two clocks neither trims the logs of tasks written a
// moment ago (a caller ahead by more than the retention would trim every
// log) nor keeps idle ones past the retention.
type LogClock interface {
	LogNow(ctx context.Context) (int64, error)
}

// ValidateLogRead checks ReadLog's arguments: a valid ID, a revision not
// below 0, a limit in 1..MaxLogRead (ErrInvalidArgument otherwise).
func ValidateLogRead(id a2a.TaskID, after int64, limit int) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if after < 0 || limit < 1 || limit > MaxLogRead {
		return fmt.Errorf("engine: read log after %d, limit %d: %w", after, limit, ErrInvalidArgument)
	}
	return nil
}

// Final reports whether a task in state st is where a stream of its
// events closes (A2A: the task is terminal, or interrupted waiting for
// input or authentication) and an execution's answer to a message ends.
func Final(st a2a.TaskState) bool {
	return st.Terminal() || st == a2a.TaskStateInputRequired || st == a2a.TaskStateAuthRequired
}

// MaxLogRead bounds ReadLog's limit.
const MaxLogRead = 1000

// ErrLogDisabled is ReadLog's error on a store whose log is off: a
// deployment fault, so errors.Is(ErrLogDisabled, ErrInternal) holds.
var ErrLogDisabled error = &childError{msg: "engine: the store keeps no task log", parent: ErrInternal}

// LogKind is what a log entry records.
type LogKind uint8

// Log entry kinds.
const (
	// LogTask: Body is the A2A JSON of a StreamResponse holding the whole
	// task after the revision.
	LogTask LogKind = 1
	// LogEvent: Body is the A2A JSON of a StreamResponse holding the status
	// or artifact update event that made the revision.
	LogEvent LogKind = 2
	// LogMessage: Body is the A2A JSON of the message the revision added
	// to the history. Not an event: readers deliver nothing for it.
	LogMessage LogKind = 3
	// LogCanceled: Body is the task's context ID; the event is the status
	// update to canceled at the entry's Time (Cancel, S9).
	LogCanceled LogKind = 4
)

// LogEntry is one entry of a task's log.
type LogEntry struct {
	Revision int64         // the task's revision after the write
	Time     int64         // the task's UpdatedAt after the write (µs)
	Kind     LogKind       // what Body holds
	State    a2a.TaskState // the task's state after the write
	Body     []byte
	// Trace is the W3C traceparent of the write's span when it was made
	// under a sampled span context (TraceParent), else "": the trace a
	// delivery of the entry's event carries on, on whichever instance
	// (SPEC H2). Never task content; a store returns "" for a stored
	// value ParseTraceParent refuses.
	Trace string
}

// Event decodes the entry of task id into the A2A event it records; nil
// for a LogMessage entry. The task ID comes from id (JSON cannot carry
// every byte an ID may hold); the rest from Body.
func (e *LogEntry) Event(id a2a.TaskID) (a2a.Event, error) {
	switch e.Kind {
	case LogMessage:
		return nil, nil
	case LogCanceled:
		ts := time.UnixMicro(e.Time).UTC()
		return &a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: string(e.Body),
			Status: a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: &ts}}, nil
	case LogTask, LogEvent:
		var sr a2a.StreamResponse
		if err := json.Unmarshal(e.Body, &sr); err != nil {
			return nil, fmt.Errorf("engine: log entry %d: %w: %w", e.Revision, ErrInternal, err)
		}
		switch v := sr.Event.(type) {
		case *a2a.Task:
			v.ID = id
		case *a2a.TaskStatusUpdateEvent:
			v.TaskID = id
		case *a2a.TaskArtifactUpdateEvent:
			v.TaskID = id
		}
		return sr.Event, nil
	}
	return nil, fmt.Errorf("engine: log entry %d of unknown kind %d: %w", e.Revision, e.Kind, ErrInternal)
}

// Payload is the A2A JSON of the StreamResponse the entry delivers (push
// notifications send it as is); nil for a LogMessage entry.
func (e *LogEntry) Payload(id a2a.TaskID) ([]byte, error) {
	switch e.Kind {
	case LogMessage:
		return nil, nil
	case LogTask, LogEvent:
		return e.Body, nil
	}
	ev, err := e.Event(id)
	if err != nil {
		return nil, err
	}
	return json.Marshal(a2a.StreamResponse{Event: ev})
}

type eventKey struct{}

// WithEvent returns ctx carrying ev, the event that causes the Replace
// made with it: a LogStore records ev as the revision's entry (K7). The
// adapter to a2a-go passes taskstore.UpdateRequest.Event this way, so that
// decorators forward it without knowing it.
func WithEvent(ctx context.Context, ev a2a.Event) context.Context {
	return context.WithValue(ctx, eventKey{}, ev)
}

// EventFrom returns the event WithEvent put in ctx, or nil.
func EventFrom(ctx context.Context) a2a.Event {
	ev, _ := ctx.Value(eventKey{}).(a2a.Event)
	return ev
}

// NewLogEntry is the entry of a write that leaves task as stored, caused
// by ev (nil: none): Kind, State and Body; the store fills Revision and
// Time. An event that does not describe task (DescribesTask) is recorded
// as the whole task.
func NewLogEntry(task *a2a.Task, ev a2a.Event) (LogEntry, error) {
	e := LogEntry{Kind: LogTask, State: task.Status.State}
	var v any = a2a.StreamResponse{Event: task}
	switch {
	case ev == nil || !DescribesTask(ev, task):
	case isTask(ev): // the task as stored
	case isMessage(ev):
		e.Kind, v = LogMessage, ev
	default:
		e.Kind, v = LogEvent, a2a.StreamResponse{Event: ev}
	}
	body, err := json.Marshal(v)
	if err != nil {
		return LogEntry{}, fmt.Errorf("engine: log entry: %w: %w", ErrInvalidArgument, err)
	}
	e.Body = body
	return e, nil
}

// MessageEntry is the entry of an AppendHistory that adds msg, leaving the
// task in state.
func MessageEntry(msg *a2a.Message, state a2a.TaskState) (LogEntry, error) {
	body, err := json.Marshal(msg)
	if err != nil {
		return LogEntry{}, fmt.Errorf("engine: log entry: %w: %w", ErrInvalidArgument, err)
	}
	return LogEntry{Kind: LogMessage, State: state, Body: body}, nil
}

// CanceledEntry is the entry of a Cancel of a task in context contextID.
func CanceledEntry(contextID string) LogEntry {
	return LogEntry{Kind: LogCanceled, State: a2a.TaskStateCanceled, Body: []byte(contextID)}
}

func isTask(ev a2a.Event) bool {
	_, ok := ev.(*a2a.Task)
	return ok
}

func isMessage(ev a2a.Event) bool {
	_, ok := ev.(*a2a.Message)
	return ok
}

// DescribesTask reports whether ev, the event a write was made for, says
// what the write left stored as task, so that a reader who applies it
// learns the task's new state: a task (the write stored it), a status
// update of this task whose status is the stored one, an artifact update
// of this task while it is not terminal, or a message of this task that
// ends its history. a2a-go writes a failed task for an event it could not
// apply (the event then does not describe it): the log records the task.
func DescribesTask(ev a2a.Event, task *a2a.Task) bool {
	switch v := ev.(type) {
	case *a2a.Task:
		return v.ID == task.ID
	case *a2a.TaskStatusUpdateEvent:
		return v.TaskID == task.ID && v.ContextID == task.ContextID && sameStatus(v.Status, task.Status)
	case *a2a.TaskArtifactUpdateEvent:
		return v.TaskID == task.ID && v.ContextID == task.ContextID && !task.Status.State.Terminal()
	case *a2a.Message:
		n := len(task.History)
		return (v.TaskID == "" || v.TaskID == task.ID) && n > 0 && task.History[n-1] != nil &&
			task.History[n-1].ID == v.ID && !task.Status.State.Terminal()
	}
	return false
}

func sameStatus(a, b a2a.TaskStatus) bool {
	if a.State != b.State || (a.Timestamp == nil) != (b.Timestamp == nil) || (a.Message == nil) != (b.Message == nil) {
		return false
	}
	if a.Timestamp != nil && !a.Timestamp.Equal(*b.Timestamp) {
		return false
	}
	return a.Message == nil || a.Message.ID == b.Message.ID
}
