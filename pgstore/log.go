package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/engine"
)

// The task log (engine.LogStore, K7): with Options.Log, a2a_task_log holds
// one row per revision, inserted by the very statement that makes the
// revision (a data-modifying WITH around the task's INSERT or UPDATE), so
// the two commit together or not at all. Its foreign key deletes a task's
// rows with the task (Delete, retention, or any other SQL), and a task
// created again starts a new log. With Options.LogNotify the statement
// also NOTIFYs the channel ('e' and the task ID), in the same
// transaction: other servers' readers (pgcluster) wake on commit.
var _ engine.LogStore = (*Store)(nil)

// LogMigrationFile creates the log table for an externally managed schema
// whose store runs with Options.Log.
const LogMigrationFile = "pgstore/migrations/005_task_log.sql"

// LogTraceMigrationFile adds the trace column to the log table
// (engine.LogEntry.Trace, H2) for an externally managed schema whose
// store runs with Options.Log.
const LogTraceMigrationFile = "pgstore/migrations/010_task_log_trace.sql"

// DeletionsMigrationFile creates the table of the deletions the log
// remembers (engine.LogStore.Deleted) for an externally managed schema
// whose store runs with Options.Log.
const DeletionsMigrationFile = "pgstore/migrations/008_task_deletions.sql"

// deletionsTableSQL defines the deletions table and the index TrimLog
// reads it by; %[1]s is the quoted schema. One row per task ID deleted
// (Delete, retention) within the log retention: the mark of its last
// deletion.
const deletionsTableSQL = `CREATE TABLE IF NOT EXISTS %[1]s.a2a_task_deletions (
	task_id text        NOT NULL PRIMARY KEY,
	at      timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS a2a_task_deletions_at ON %[1]s.a2a_task_deletions (at)`

// remembered wraps a DELETE of task rows so that it also marks each
// deletion in the deletions table, in the same statement (K7,
// engine.DeletionMark: after the task's last time and the ID's earlier
// mark); the statement returns how many tasks it deleted.
func remembered(del, table string) string {
	deletions := strings.TrimSuffix(table, `"a2a_tasks"`) + `"a2a_task_deletions"`
	return `WITH d AS (` + del + ` RETURNING id, updated_at),
m AS (INSERT INTO ` + deletions + ` AS k (task_id, at)
  SELECT id, greatest(clock_timestamp(), updated_at + interval '1 microsecond') FROM d
  ON CONFLICT (task_id) DO UPDATE SET at = greatest(EXCLUDED.at, k.at + interval '1 microsecond'))
SELECT count(*) FROM d`
}

// logTableSQL defines the log table; %[1]s is the quoted schema.
const logTableSQL = `CREATE TABLE IF NOT EXISTS %[1]s.a2a_task_log (
	task_id  text        NOT NULL REFERENCES %[1]s.a2a_tasks (id) ON DELETE CASCADE,
	revision bigint      NOT NULL,
	at       timestamptz NOT NULL,
	kind     smallint    NOT NULL,
	state    text        NOT NULL,
	body     bytea       NOT NULL,
	PRIMARY KEY (task_id, revision)
)`

// logTraceSQL adds the log table's trace column (LogTraceMigrationFile);
// %[1]s is the quoted schema. The column holds the traceparent of the
// write that made the entry (engine.TraceParent), NULL when it had none.
const logTraceSQL = `ALTER TABLE %[1]s.a2a_task_log ADD COLUMN IF NOT EXISTS trace text`

// logged wraps a statement that returns the written task row (at least
// writtenColumns' names) so that it also inserts the revision's log row, with kind,
// body and trace the SQL of its kind, body and trace (H2), and, when
// notify is not "", runs it (a pg_notify call) once the row is in.
func logged(stmt, table, kind, body, trace, notify string) string {
	logTable := strings.TrimSuffix(table, `"a2a_tasks"`) + `"a2a_task_log"`
	q := `WITH t AS (` + stmt + `),
l AS (INSERT INTO ` + logTable + ` (task_id, revision, at, kind, state, body, trace)
  SELECT id, revision, updated_at, ` + kind + `, state, ` + body + `, ` + trace + ` FROM t RETURNING 1)
SELECT t.* FROM t`
	if notify != "" {
		q += `, (SELECT ` + notify + ` FROM l) n`
	}
	return q
}

// param is placeholder n.
func param(n int) string { return "$" + strconv.Itoa(n) }

// logStatements turns the write statements into their logged forms. The
// placeholders after a statement's own: kind and body (create and
// replace), body (append), then the trace, then the notification's
// channel and payload.
func (sql *statements) logStatements(notify bool) {
	note := func(n int) string {
		if !notify {
			return ""
		}
		return "pg_notify(" + param(n) + ", " + param(n+1) + ")"
	}
	sql.create = logged(sql.create, sql.table, "$12::smallint", "$13::bytea", "$14::text", note(15))
	sql.replace = logged(sql.replace, sql.table, "$12::smallint", "$13::bytea", "$14::text", note(15))
	sql.cancel = logged(sql.cancel, sql.table, strconv.Itoa(int(engine.LogCanceled)), "convert_to(context_id, 'UTF8')", "$3::text", note(4))
	sql.appendHistory = logged(sql.appendHistory, sql.table, strconv.Itoa(int(engine.LogMessage)), "$5::bytea", "$6::text", note(7))
	logTable := strings.TrimSuffix(sql.table, `"a2a_tasks"`) + `"a2a_task_log"`
	deletions := strings.TrimSuffix(sql.table, `"a2a_tasks"`) + `"a2a_task_deletions"`
	sql.delete = remembered(sql.delete, sql.table)
	sql.deleted = `SELECT at FROM ` + deletions + ` WHERE task_id = $1`
	// forgetDeletions forgets up to $2 deletions marked before $1,
	// oldest first; the outer condition, checked again on a row that a
	// concurrent deletion marked anew, keeps that one.
	sql.forgetDeletions = `WITH f AS (DELETE FROM ` + deletions + ` WHERE at < $1 AND task_id IN (
  SELECT task_id FROM ` + deletions + ` WHERE at < $1 ORDER BY at LIMIT $2) RETURNING 1)
SELECT count(*) FROM f`
	sql.readLog = `SELECT revision, at, kind, state, body, trace FROM ` + logTable + `
WHERE task_id = $1 AND revision > $2 ORDER BY revision LIMIT $3`
	// trimLog drops the logs of up to $4 tasks idle since $1, oldest
	// first after the cursor ($2, $3), and returns the last one it
	// examined with their number.
	sql.trimLog = `WITH v AS (SELECT id, updated_at FROM ` + sql.table + `
  WHERE updated_at < $1 AND (updated_at, id COLLATE "C") > ($2, $3)
  ORDER BY updated_at, id COLLATE "C" LIMIT $4),
d AS (DELETE FROM ` + logTable + ` WHERE task_id IN (SELECT id FROM v) AND at < $1)
SELECT count(*) OVER (), id, updated_at FROM v ORDER BY updated_at DESC, id COLLATE "C" DESC LIMIT 1`
}

// logArgs are the placeholders a logged statement takes after its own:
// the entry's kind and body when withEntry (its body alone when it has
// one otherwise), the traceparent of ctx's span (NULL without a sampled
// one: engine.TraceParent, H2), then the notification's.
func (s *Store) logArgs(ctx context.Context, id a2a.TaskID, l engine.LogEntry, withEntry bool) []any {
	if !s.log {
		return nil
	}
	var args []any
	if withEntry {
		args = append(args, int16(l.Kind), l.Body)
	} else if l.Body != nil {
		args = append(args, l.Body)
	}
	if tp := engine.TraceParent(ctx); tp != "" {
		args = append(args, tp)
	} else {
		args = append(args, nil)
	}
	if s.logNotify != "" {
		args = append(args, s.logNotify, NotifyPayload('e', id))
	}
	return args
}

// NotifyPayload is the payload of a notification about taskID: kind then
// the task ID, or the kind alone when the ID would not fit a notification
// (8000 bytes), which wakes every reader.
func NotifyPayload(kind byte, taskID a2a.TaskID) string {
	if len(taskID) > 4000 {
		return string(kind)
	}
	return string(kind) + string(taskID)
}

// newLogEntry is the entry of a write storing task because of ev; nothing
// without the log.
func (s *Store) newLogEntry(task *a2a.Task, ev a2a.Event) (engine.LogEntry, error) {
	if !s.log {
		return engine.LogEntry{}, nil
	}
	return engine.NewLogEntry(task, ev)
}

// wake wakes this process's readers of id after a logged write.
func (s *Store) wake(id a2a.TaskID) {
	if s.log {
		s.hub.Wake(id)
	}
}

// WakeLog wakes this process's log readers of id: a notification from
// another server (pgcluster's listener) says it wrote an entry.
func (s *Store) WakeLog(id a2a.TaskID) { s.hub.Wake(id) }

// LogNotifyChannel is Options.LogNotify ("" without the log).
func (s *Store) LogNotifyChannel() string {
	if !s.log {
		return ""
	}
	return s.logNotify
}

// WakeAllLogs wakes every log reader of this process (after notifications
// may have been lost).
func (s *Store) WakeAllLogs() { s.hub.WakeAll() }

// ReadLog implements engine.LogStore.
func (s *Store) ReadLog(ctx context.Context, id a2a.TaskID, after int64, limit int) ([]engine.LogEntry, error) {
	if err := engine.ValidateLogRead(id, after, limit); err != nil {
		return nil, err
	}
	if !s.log {
		return nil, engine.ErrLogDisabled
	}
	if err := validateID(id); err != nil {
		return nil, err
	}
	var out []engine.LogEntry
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		out = out[:0]
		rows, err := c.Query(ctx, s.sql.readLog, string(id), after, limit)
		if err != nil {
			return err
		}
		var l engine.LogEntry
		var at time.Time
		var kind int16
		var state string
		var tp *string
		_, err = pgx.ForEachRow(rows, []any{&l.Revision, &at, &kind, &state, &l.Body, &tp}, func() error {
			l.Time, l.Kind, l.State, l.Trace = at.UnixMicro(), engine.LogKind(kind), a2a.TaskState(state), storedTrace(tp)
			out = append(out, l)
			l.Body = nil
			return nil
		})
		return err
	})
	if err != nil {
		return nil, translate(ctx, "read log", err)
	}
	return out, nil
}

// storedTrace is a log row's trace column as LogEntry.Trace: "" for
// NULL and for a value that is no traceparent engine.ParseTraceParent
// accepts (written by hand, or damaged), which is never trusted (H2).
func storedTrace(tp *string) string {
	if tp == nil || !engine.ValidTraceParent(*tp) {
		return ""
	}
	return *tp
}

// WatchLog implements engine.LogStore: this process's writes wake it, and
// other servers' when pgcluster relays their notifications (WakeLog).
func (s *Store) WatchLog(id a2a.TaskID) (<-chan struct{}, func()) { return s.hub.Watch(id) }

var _ engine.LogClock = (*Store)(nil)

// LogNow implements engine.LogClock: the database server's time, which
// stamps every write (clock_timestamp()), so that a log retention
// service on a server whose clock is off trims by the database's.
func (s *Store) LogNow(ctx context.Context) (int64, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return 0, translate(ctx, "log clock", err)
	}
	return now.UnixMicro(), nil
}

// TrimLog implements engine.LogStore. The cursor it goes on from is this
// store value's; several servers trimming the same database each walk
// the tail, deleting what is already gone at worst. Then it forgets the
// deletions marked before before, oldest first by the deletions' index.
func (s *Store) TrimLog(ctx context.Context, before int64, limit int) (int, error) {
	if limit < 1 || limit > engine.MaxRetainLimit || before < 0 {
		return 0, fmt.Errorf("pgstore: trim log: limit %d, before %d: %w", limit, before, engine.ErrInvalidArgument)
	}
	if !s.log {
		return 0, engine.ErrLogDisabled
	}
	s.trim.Lock()
	defer s.trim.Unlock()
	from, fromID := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, ""
	if c := s.trim.cursor; c != nil {
		from, fromID = pgtype.Timestamptz{Time: time.UnixMicro(c.UpdatedAt), Valid: true}, string(c.ID)
	}
	var n int
	var id string
	var at time.Time
	err := s.pool.QueryRow(ctx, s.sql.trimLog, time.UnixMicro(before), from, fromID, limit).Scan(&n, &id, &at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return 0, translate(ctx, "trim log", err)
	default:
		s.trim.cursor = &engine.Cursor{UpdatedAt: at.UnixMicro(), ID: a2a.TaskID(id)}
	}
	if n == limit {
		return n, nil
	}
	var forgot int
	if err := s.pool.QueryRow(ctx, s.sql.forgetDeletions, time.UnixMicro(before), limit-n).Scan(&forgot); err != nil {
		return n, translate(ctx, "trim log", err)
	}
	return n + forgot, nil
}

// Deleted implements engine.LogStore.
func (s *Store) Deleted(ctx context.Context, id a2a.TaskID) (int64, error) {
	if err := engine.ValidateID(id); err != nil {
		return 0, err
	}
	if !s.log {
		return 0, engine.ErrLogDisabled
	}
	if err := validateID(id); err != nil {
		return 0, err
	}
	var mark int64
	err := s.read(ctx, func(c *pgxpool.Conn) error {
		var at time.Time
		err := c.QueryRow(ctx, s.sql.deleted, string(id)).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			mark = 0
			return nil
		}
		mark = at.UnixMicro()
		return err
	})
	if err != nil {
		return 0, translate(ctx, "deleted", err)
	}
	return mark, nil
}

// ensureLog creates the log table (managed schema).
func (s *Store) ensureLog(ctx context.Context) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := advisoryLock(ctx, tx, s.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(logTableSQL, pgx.Identifier{s.schema}.Sanitize())); err != nil {
			return err
		}
		// Only when missing: the ALTER locks the table (ACCESS
		// EXCLUSIVE) even when the column exists.
		switch ok, err := s.hasLogTrace(ctx, tx); {
		case err != nil:
			return err
		case !ok:
			if _, err := tx.Exec(ctx, fmt.Sprintf(logTraceSQL, pgx.Identifier{s.schema}.Sanitize())); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, fmt.Sprintf(deletionsTableSQL, pgx.Identifier{s.schema}.Sanitize()))
		return err
	})
}

// checkLog fails with ErrSchema, naming LogMigrationFile, when the log
// table is missing.
func (s *Store) checkLog(ctx context.Context) error {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{s.schema, "a2a_task_log"}.Sanitize()).Scan(&ok)
	if err != nil {
		return fmt.Errorf("pgstore: check schema: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s.a2a_task_log is missing (Options.Log); run %s", ErrSchema, s.schema, LogMigrationFile)
	}
	return nil
}

// checkLogTrace fails with ErrSchema, naming LogTraceMigrationFile, when
// the log table lacks its trace column (H2).
// REQUIRES: the log table exists (checkLog).
func (s *Store) checkLogTrace(ctx context.Context) error {
	ok, err := s.hasLogTrace(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("pgstore: check schema: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s.a2a_task_log has no trace column (Options.Log); run %s", ErrSchema, s.schema, LogTraceMigrationFile)
	}
	return nil
}

// hasLogTrace reports whether the log table has its trace column, of
// type text.
func (s *Store) hasLogTrace(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attname = 'trace' AND NOT attisdropped AND atttypid = 'text'::regtype)`,
		pgx.Identifier{s.schema, "a2a_task_log"}.Sanitize()).Scan(&ok)
	return ok, err
}

// checkDeletions fails with ErrSchema, naming DeletionsMigrationFile,
// when the deletions table or its index is missing.
func (s *Store) checkDeletions(ctx context.Context) error {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL`,
		pgx.Identifier{s.schema, "a2a_task_deletions"}.Sanitize(), pgx.Identifier{s.schema, "a2a_task_deletions_at"}.Sanitize()).Scan(&ok)
	if err != nil {
		return fmt.Errorf("pgstore: check schema: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s.a2a_task_deletions or its index is missing (Options.Log); run %s", ErrSchema, s.schema, DeletionsMigrationFile)
	}
	return nil
}

// checkLogRows verifies K7 on the stored rows: every task's log holds
// consecutive revisions ending at the task's, the last at its time and
// state (a trimmed log may start anywhere, or be empty).
func (s *Store) checkLogRows(ctx context.Context) error {
	logTable := pgx.Identifier{s.schema, "a2a_task_log"}.Sanitize()
	var bad int
	var example *string
	err := s.pool.QueryRow(ctx, `SELECT count(*), min(task_id) FROM (
  SELECT l.task_id FROM `+logTable+` l JOIN `+s.sql.table+` t ON t.id = l.task_id
  GROUP BY l.task_id, t.revision
  HAVING max(l.revision) <> t.revision OR count(*) <> max(l.revision) - min(l.revision) + 1
     OR NOT bool_or(l.revision = t.revision AND l.state = t.state AND l.at = t.updated_at)) x`).Scan(&bad, &example)
	if err != nil {
		return fmt.Errorf("pgstore: check log: %w", err)
	}
	if bad > 0 {
		return fmt.Errorf("pgstore: the logs of %d tasks (%q first) do not match their revisions (K7)", bad, *example)
	}
	return nil
}
