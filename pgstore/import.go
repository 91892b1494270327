package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/a2astore/a2astore/engine"
)

// Bulk export and import (SPEC X1): a copy between backends reads tasks
// with Export and writes them with Import exactly as they were stored.
//
// Import writes with COPY (pgx CopyFrom) in one transaction: the tasks,
// then their log rows. COPY fires the counters' statement triggers like
// any INSERT, so a2a_task_counts and its ledgers count the imported tasks
// exactly (the roll-up folds them later, as after any write); the status
// and ordering indexes are maintained by PostgreSQL.
var (
	_ engine.Exporter = (*Store)(nil)
	_ engine.Importer = (*Store)(nil)
)

// importColumns are the columns Import writes, in the order of importRow.
var importColumns = []string{"id", "context_id", "updated_at", "revision", "state", "status_ts", "status_ns",
	"status_msg", "metadata", "artifacts", "history", "msg_ids", "owner"}

// logColumns are the log table's columns, in the order of Import's rows.
var logColumns = []string{"task_id", "revision", "at", "kind", "state", "body", "trace"}

// Export implements engine.Exporter: one page of the ordering index and
// the log rows of its tasks, read in one REPEATABLE READ transaction.
// Rows whose updated_at no cursor can represent are left out, as lists
// leave them out (timerange.go).
func (s *Store) Export(ctx context.Context, after *engine.Cursor, limit int) ([]engine.StoredTask, error) {
	if err := engine.ValidateExport(limit); err != nil {
		return nil, err
	}
	q := `SELECT ` + fullColumns + ` FROM ` + s.sql.table + ` WHERE ` + inTimeRangeSQL
	args := []any{limit}
	if after != nil {
		if !storable(string(after.ID)) {
			return nil, fmt.Errorf("pgstore: export after a task ID with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
		}
		q += ` AND (updated_at, id COLLATE "C") < ($2::timestamptz, $3::text)`
		args = append(args, time.UnixMicro(after.UpdatedAt), string(after.ID))
	}
	q += ` ORDER BY updated_at DESC, id COLLATE "C" DESC LIMIT $1`
	var out []engine.StoredTask
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		xs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) { return scanRow(r) })
		if err != nil {
			return err
		}
		ids := make([]string, len(xs))
		at := make(map[string]int, len(xs))
		for i := range xs {
			rec, err := xs[i].record()
			if err != nil {
				return err
			}
			out = append(out, engine.StoredTask{Record: rec})
			ids[i], at[xs[i].id] = xs[i].id, i
		}
		if !s.log || len(ids) == 0 {
			return nil
		}
		return s.exportLogs(ctx, tx, ids, func(id string, l engine.LogEntry) {
			out[at[id]].Log = append(out[at[id]].Log, l)
		})
	})
	if err != nil {
		return nil, translate(ctx, "export", err)
	}
	return out, nil
}

// exportLogs reads the log rows of the tasks ids, each task's oldest
// first, passing each to add.
func (s *Store) exportLogs(ctx context.Context, tx pgx.Tx, ids []string, add func(id string, l engine.LogEntry)) error {
	rows, err := tx.Query(ctx, `SELECT task_id, revision, at, kind, state, body, trace FROM `+s.logTable()+`
WHERE task_id = ANY($1::text[]) ORDER BY task_id, revision`, ids)
	if err != nil {
		return err
	}
	var id, state string
	var l engine.LogEntry
	var at time.Time
	var kind int16
	var tp *string
	_, err = pgx.ForEachRow(rows, []any{&id, &l.Revision, &at, &kind, &state, &l.Body, &tp}, func() error {
		l.Time, l.Kind, l.State, l.Trace = at.UnixMicro(), engine.LogKind(kind), a2a.TaskState(state), storedTrace(tp)
		add(id, l)
		l.Body = nil
		return nil
	})
	return err
}

// logTable is the quoted name of the log table.
func (s *Store) logTable() string { return pgx.Identifier{s.schema, "a2a_task_log"}.Sanitize() }

// Import implements engine.Importer: COPY of the tasks and their log rows
// in one transaction. An ID the table holds already fails the COPY
// (unique violation: ErrAlreadyExists) and the transaction writes nothing.
func (s *Store) Import(ctx context.Context, tasks []engine.StoredTask) error {
	rows := make([][]any, 0, len(tasks))
	var logRows [][]any
	seen := make(map[a2a.TaskID]struct{}, len(tasks))
	for i := range tasks {
		st := &tasks[i]
		if st.Task == nil {
			return fmt.Errorf("pgstore: import: nil task: %w", engine.ErrInvalidArgument)
		}
		if err := engine.ValidateStoredTask(st, s.limits); err != nil {
			return err
		}
		if err := validateOwner(st.Owner); err != nil {
			return err
		}
		if _, dup := seen[st.Task.ID]; dup {
			return fmt.Errorf("pgstore: import: task %q twice: %w", st.Task.ID, engine.ErrAlreadyExists)
		}
		seen[st.Task.ID] = struct{}{}
		f, err := encode(st.Task, s.limits)
		if err != nil {
			return fmt.Errorf("pgstore: import %q: %w", st.Task.ID, err)
		}
		rows = append(rows, []any{string(st.Task.ID), f.contextID, time.UnixMicro(st.Cursor.UpdatedAt).UTC(), st.Revision,
			f.state, f.statusTS, f.statusNS, f.statusMsg, f.metadata, f.artifacts, f.history, f.msgIDs, st.Owner})
		if !s.log {
			continue
		}
		for _, l := range st.Log {
			var tp any // NULL for ""; ValidateStoredTask checked the rest
			if l.Trace != "" {
				tp = l.Trace
			}
			logRows = append(logRows, []any{string(st.Task.ID), l.Revision, time.UnixMicro(l.Time).UTC(), int16(l.Kind), string(l.State), l.Body, tp})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, "a2a_tasks"}, importColumns, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		if len(logRows) == 0 {
			return nil
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{s.schema, "a2a_task_log"}, logColumns, pgx.CopyFromRows(logRows))
		return err
	})
	if err != nil {
		return translate(ctx, "import", err)
	}
	s.rollup.wrote(int64(len(rows)))
	// This store value's TrimLog walk only (another process's goes on
	// past these tasks until it restarts: docs/postgres.md).
	s.trim.Lock()
	s.trim.cursor = engine.TrimFrom(s.trim.cursor, tasks)
	s.trim.Unlock()
	for i := range tasks {
		s.wake(tasks[i].Task.ID)
	}
	return nil
}

// Tail implements engine.Importer: the ordering index read from its end.
func (s *Store) Tail(ctx context.Context, n int) ([]engine.Cursor, error) {
	if err := engine.ValidateExport(n); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT updated_at, id FROM `+s.sql.table+` WHERE `+inTimeRangeSQL+`
ORDER BY updated_at, id COLLATE "C" LIMIT $1`, n)
	if err != nil {
		return nil, translate(ctx, "tail", err)
	}
	var out []engine.Cursor
	var at time.Time
	var id string
	_, err = pgx.ForEachRow(rows, []any{&at, &id}, func() error {
		out = append(out, engine.Cursor{UpdatedAt: at.UnixMicro(), ID: a2a.TaskID(id)})
		return nil
	})
	if err != nil {
		return nil, translate(ctx, "tail", err)
	}
	slices.Reverse(out)
	return out, nil
}
