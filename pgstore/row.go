package pgstore

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// fields is a task in column form, ready to be written.
type fields struct {
	contextID string
	state     string
	statusTS  *time.Time // Status.Timestamp truncated to µs; nil = none
	statusNS  int32      // the nanoseconds below statusTS's µs
	statusMsg []byte     // taskcodec.EncodeStatusMessage; nil = none
	metadata  []byte     // taskcodec.EncodeMetadata; nil = none
	artifacts []byte     // taskcodec.EncodeArtifacts; nil = none
	history   [][]byte   // taskcodec.EncodeMessage per message
	msgIDs    [][]byte   // IDs of the history's messages
}

// storable reports whether PostgreSQL text can hold s: valid UTF-8 without
// NUL (S8).
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// validateID checks a task ID (S8): the engine's length rule and what
// PostgreSQL text can hold.
func validateID(id a2a.TaskID) error {
	if err := engine.ValidateID(id); err != nil {
		return err
	}
	if !storable(string(id)) {
		return fmt.Errorf("pgstore: task ID with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
	}
	return nil
}

// encode validates t against S8 and lim and splits it into columns. It
// changes nothing in t.
func encode(t *a2a.Task, lim engine.Limits) (fields, error) {
	if err := lim.ValidateTask(t); err != nil {
		return fields{}, err
	}
	if !storable(string(t.ID)) {
		return fields{}, fmt.Errorf("pgstore: task ID with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
	}
	if !storable(t.ContextID) {
		return fields{}, fmt.Errorf("pgstore: context ID with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
	}
	f := fields{contextID: t.ContextID, state: string(t.Status.State)}
	var err error
	if ts := t.Status.Timestamp; ts != nil {
		if ts.Before(minStatusTime) || !ts.Before(maxStatusTime) {
			return fields{}, fmt.Errorf("pgstore: status timestamp outside PostgreSQL's timestamptz range: %w", engine.ErrInvalidArgument)
		}
		us, ns := splitTime(*ts)
		f.statusTS, f.statusNS = &us, ns
	}
	if t.Status.Message != nil {
		if f.statusMsg, err = taskcodec.EncodeStatusMessage(t.Status.Message); err != nil {
			return fields{}, err
		}
	}
	if f.metadata, err = taskcodec.EncodeMetadata(t.Metadata); err != nil {
		return fields{}, err
	}
	if len(t.Artifacts) > 0 {
		if f.artifacts, err = taskcodec.EncodeArtifacts(t.Artifacts); err != nil {
			return fields{}, err
		}
	}
	f.history = make([][]byte, 0, len(t.History))
	f.msgIDs = make([][]byte, 0, len(t.History))
	for _, m := range t.History {
		b, err := taskcodec.EncodeMessage(m)
		if err != nil {
			return fields{}, err
		}
		f.history = append(f.history, b)
		if m != nil {
			f.msgIDs = append(f.msgIDs, []byte(m.ID))
		}
	}
	return f, nil
}

// The body columns hold the parts of a task stored on their own
// (taskcodec.EncodeStatusMessage, EncodeMessage per history element,
// EncodeArtifacts), so light and trimmed reads fetch and decode only what
// they return.

// Status timestamps PostgreSQL can store: timestamptz spans 4714 BC to
// 294276 AD; these bounds sit inside it on whole years.
var (
	minStatusTime = time.Date(-4712, 1, 1, 0, 0, 0, 0, time.UTC)
	maxStatusTime = time.Date(294276, 1, 1, 0, 0, 0, 0, time.UTC) // exclusive
)

// splitTime splits t into a time on a whole microsecond (what timestamptz
// holds) and the nanoseconds below it, 0..999, so that (µs, ns) pairs order
// exactly like the times.
func splitTime(t time.Time) (time.Time, int32) {
	ns := t.Nanosecond() % 1000
	return t.Add(-time.Duration(ns)), int32(ns)
}

// Column lists, all scanned by scanRow in this order.
const (
	// fullColumns reads everything.
	fullColumns = `id, context_id, updated_at, revision, state, status_ts, status_ns, status_msg, metadata, artifacts, history, owner`
	// returningColumns is fullColumns qualified for UPDATE ... FROM.
	returningColumns = `t.id, t.context_id, t.updated_at, t.revision, t.state, t.status_ts, t.status_ns, t.status_msg, t.metadata, t.artifacts, t.history, t.owner`
	// writtenColumns are what create and replace read back of the row
	// they write (scanWritten): the columns the database sets; the rest
	// are the statement's own arguments. returningWritten is it qualified
	// for UPDATE ... FROM.
	writtenColumns   = `id, updated_at, revision, state, owner`
	returningWritten = `t.id, t.updated_at, t.revision, t.state, t.owner`
	// lightColumns reads the light projection only (A4).
	lightColumns = `id, context_id, updated_at, revision, state, status_ts, status_ns, NULL::bytea, metadata, NULL::bytea, NULL::bytea[], owner`
)

// row is one scanned row.
type row struct {
	id        string
	contextID string
	updatedAt pgtype.Timestamptz // ±infinity too: see cursorTime
	revision  int64
	state     string
	statusTS  *time.Time
	statusNS  int32
	statusMsg []byte
	metadata  []byte
	artifacts []byte
	history   [][]byte
	owner     string
}

func scanRow(r pgx.Row) (row, error) {
	var x row
	err := r.Scan(&x.id, &x.contextID, &x.updatedAt, &x.revision, &x.state,
		&x.statusTS, &x.statusNS, &x.statusMsg, &x.metadata, &x.artifacts, &x.history, &x.owner)
	return x, err
}

// scanWritten scans a row written with f's values (writtenColumns): the
// row as scanRow would read it, without reading back what f holds.
func scanWritten(r pgx.Row, f *fields) (row, error) {
	x := row{contextID: f.contextID, statusTS: f.statusTS, statusNS: f.statusNS, statusMsg: f.statusMsg,
		metadata: f.metadata, artifacts: f.artifacts, history: f.history}
	err := r.Scan(&x.id, &x.updatedAt, &x.revision, &x.state, &x.owner)
	return x, err
}

func (x *row) cursor() engine.Cursor {
	return engine.Cursor{UpdatedAt: cursorTime(x.updatedAt), ID: a2a.TaskID(x.id)}
}

// task decodes the row into a new task. Columns the query did not select
// (NULL) leave their fields empty.
func (x *row) task() (*a2a.Task, error) {
	status := a2a.TaskStatus{State: a2a.TaskState(x.state)}
	if x.statusTS != nil {
		ts := x.statusTS.Add(time.Duration(x.statusNS)).UTC()
		status.Timestamp = &ts
	}
	t, err := taskcodec.LightTask(a2a.TaskID(x.id), x.contextID, status, x.metadata)
	if err != nil {
		return nil, err
	}
	if x.statusMsg != nil {
		if t.Status.Message, err = taskcodec.DecodeStatusMessage(x.statusMsg); err != nil {
			return nil, err
		}
	}
	if x.artifacts != nil {
		if t.Artifacts, err = taskcodec.DecodeArtifacts(x.artifacts); err != nil {
			return nil, err
		}
	}
	if len(x.history) > 0 {
		t.History = make([]*a2a.Message, len(x.history))
		for i, b := range x.history {
			if t.History[i], err = taskcodec.DecodeMessage(b); err != nil {
				return nil, err
			}
		}
	}
	return t, nil
}

func (x *row) record() (engine.Record, error) {
	return x.withTask(true)
}

// withTask is the row's record, with the task decoded if wanted (a
// Create or Replace made under engine.WithoutTask wants none).
func (x *row) withTask(wanted bool) (rec engine.Record, err error) {
	rec = engine.Record{Revision: x.revision, Cursor: x.cursor(), Owner: x.owner}
	if wanted {
		if rec.Task, err = x.task(); err != nil {
			return engine.Record{}, err
		}
	}
	return rec, nil
}
