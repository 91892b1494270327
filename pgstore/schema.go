package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// MigrationFile is the migration an externally managed schema runs to get
// the ordering indexes (P2); startup errors name it (P3).
const MigrationFile = "pgstore/migrations/001_ordering_indexes.sql"

// ErrSchema is returned by Open and New when an externally managed schema
// lacks the table, the ordering indexes, or what OwnerCountsMigrationFile
// installs, or when rows of any schema have an updated_at no cursor can
// represent (see the package doc).
var ErrSchema = errors.New("pgstore: schema not ready")

// createTableSQL defines the table. %[1]s is the quoted schema.
//
// Columns beyond P1's: revision (S7); state and the status timestamp, split
// into µs (status_ts) and the nanoseconds below them (status_ns, 0..999),
// for the filters (L2); metadata in its binary stored form
// (taskcodec.EncodeMetadata) for light reads; the rest of the body in
// separate columns so that light and trimmed reads fetch only what they
// return, each part in its binary stored form (taskcodec: the stored task
// holding only that part): status_msg, artifacts, and history with one
// element per message; msg_ids holds the history's message IDs for
// deduplicated appends. bytea throughout, since PostgreSQL text and jsonb
// cannot hold NUL.
const createTableSQL = `CREATE TABLE IF NOT EXISTS %[1]s.a2a_tasks (
	id         text        PRIMARY KEY,
	context_id text        NOT NULL DEFAULT '',
	updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
	revision   bigint      NOT NULL,
	state      text        NOT NULL,
	status_ts  timestamptz,
	status_ns  integer     NOT NULL DEFAULT 0,
	status_msg bytea,
	metadata   bytea,
	artifacts  bytea,
	history    bytea[]     NOT NULL DEFAULT '{}',
	msg_ids    bytea[]     NOT NULL DEFAULT '{}'
)`

// createIndexesSQL are P2's index statements for schema %[1]s.
var createIndexesSQL = []string{
	`CREATE INDEX IF NOT EXISTS idx_a2a_tasks_updated
  ON %[1]s.a2a_tasks (updated_at DESC, id COLLATE "C" DESC)`,
	`CREATE INDEX IF NOT EXISTS idx_a2a_tasks_context_updated
  ON %[1]s.a2a_tasks (context_id, updated_at DESC, id COLLATE "C" DESC)`,
}

// requiredColumns are the columns the store reads and writes.
var requiredColumns = []string{
	"id", "context_id", "updated_at", "revision", "state", "status_ts",
	"status_ns", "status_msg", "metadata", "artifacts", "history", "msg_ids",
}

// ensureSchema creates the schema, table and indexes if missing. The DDL
// runs in one transaction under an advisory lock keyed by the schema name:
// concurrent CREATE ... IF NOT EXISTS of the same object can otherwise fail
// with a unique violation on the catalogs.
func (s *Store) ensureSchema(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('a2astore.pgstore:' || $1, 0))`, s.schema); err != nil {
		return err
	}
	q := pgx.Identifier{s.schema}.Sanitize()
	// A start on a ready table runs no CREATE INDEX: that statement locks
	// the table (SHARE) even when the index exists, and would wait, holding
	// a snapshot, for another process's CREATE INDEX CONCURRENTLY, which
	// waits for that snapshot (ensureStatusIndexes). A new table gets the
	// state index (C7) here, at once, as it is empty.
	var table string
	if err := tx.QueryRow(ctx, `SELECT coalesce(to_regclass($1)::text, '')`, s.sql.table).Scan(&table); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE SCHEMA IF NOT EXISTS %[1]s", q)); err != nil {
		return err
	}
	stmts := []string{fmt.Sprintf(createTableSQL, q)}
	if table == "" {
		for _, stmt := range createIndexesSQL {
			stmts = append(stmts, fmt.Sprintf(stmt, q))
		}
		stmts = append(stmts, statusIndexes[0].inTx(q))
	} else {
		defs, err := s.indexDefs(ctx, tx, "a2a_tasks")
		if err != nil {
			return err
		}
		for i, ok := range []func(indexDef) bool{isUpdatedIndex, isContextIndex} {
			if !slices.ContainsFunc(defs, ok) {
				stmts = append(stmts, fmt.Sprintf(createIndexesSQL[i], q))
			}
		}
	}
	for _, stmt := range stmts {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	if err := s.ensureUpdatedAtDefault(ctx, tx); err != nil {
		return err
	}
	if err := s.ensureTimeRange(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// ensureUpdatedAtDefault installs P1's DEFAULT clock_timestamp() on
// updated_at when the table has another default (an older release created
// it with DEFAULT now()), as the migration does for external schemas (P2).
// Existing rows keep their times. It runs only when needed, so a start on a
// ready table takes no ACCESS EXCLUSIVE lock.
// REQUIRES: tx holds the schema's advisory lock.
func (s *Store) ensureUpdatedAtDefault(ctx context.Context, tx pgx.Tx) error {
	var def *string
	err := tx.QueryRow(ctx, `SELECT pg_get_expr(d.adbin, d.adrelid)
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = $1::regclass AND a.attname = 'updated_at'`, s.sql.table).Scan(&def)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil // no such column: checkSchema reports it
	case err != nil || (def != nil && *def == updatedAtDefault):
		return err
	}
	_, err = tx.Exec(ctx, `ALTER TABLE `+s.sql.table+` ALTER COLUMN updated_at SET DEFAULT `+updatedAtDefault)
	return err
}

// updatedAtDefault is updated_at's default (P1), as pg_get_expr spells it.
const updatedAtDefault = "clock_timestamp()"

// ensureTimeRange adds the CHECK constraint that keeps updated_at within
// what a cursor can represent (timerange.go) when the table has no
// constraint of that name. It is added NOT VALID: rows already outside
// keep their times (P2) until fixed, and checkTimeRange names them.
// REQUIRES: tx holds the schema's advisory lock.
func (s *Store) ensureTimeRange(ctx context.Context, tx pgx.Tx) error {
	var exists bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = $1::regclass AND conname = $2)`,
		s.sql.table, timeRangeConstraint).Scan(&exists)
	if err != nil || exists {
		return err
	}
	_, err = tx.Exec(ctx, TimeRangeDDL(s.schema))
	return err
}

// indexDef is one index of the table as the catalog describes it.
type indexDef struct {
	name       string
	columns    []string // key columns only (INCLUDE columns are ignored)
	desc       []bool
	collations []string // "" for none
	usable     bool     // btree, valid, ready, not partial, no expressions
	unique     bool
}

// checkSchema verifies that the table has the store's columns and that
// both ordering indexes exist by definition, whatever their names (P3),
// and that no row is outside the cursor range.
func (s *Store) checkSchema(ctx context.Context) error {
	if err := s.checkTable(ctx); err != nil {
		return err
	}
	return s.checkTimeRange(ctx)
}

// checkTable is checkSchema's part for the table's columns and ordering
// indexes: it reads only the catalog.
func (s *Store) checkTable(ctx context.Context) error {
	var cols []string
	err := s.pool.QueryRow(ctx, `
SELECT coalesce(array_agg(a.attname::text), '{}')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = 'a2a_tasks' AND a.attnum > 0 AND NOT a.attisdropped`, s.schema).Scan(&cols)
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return fmt.Errorf("%w: table %s.a2a_tasks does not exist (create it, then run %s)", ErrSchema, s.schema, MigrationFile)
	}
	for _, c := range requiredColumns {
		if !slices.Contains(cols, c) {
			return fmt.Errorf("%w: table %s.a2a_tasks lacks column %q", ErrSchema, s.schema, c)
		}
	}

	defs, err := s.indexDefs(ctx, s.pool, "a2a_tasks")
	if err != nil {
		return err
	}
	var missing []string
	if !slices.ContainsFunc(defs, isUpdatedIndex) {
		missing = append(missing, `(updated_at DESC, id COLLATE "C" DESC)`)
	}
	if !slices.ContainsFunc(defs, isContextIndex) {
		missing = append(missing, `(context_id, updated_at DESC, id COLLATE "C" DESC)`)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s.a2a_tasks lacks the ordering index %v; run %s", ErrSchema, s.schema, missing, MigrationFile)
	}
	return nil
}

// checkTimeRange fails with ErrSchema while rows have an updated_at that no
// cursor can represent (timerange.go), naming some of them and the fix.
// Both ordering indexes exist by now, so the search is two index ranges.
func (s *Store) checkTimeRange(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT count(*) OVER (), id FROM `+s.sql.table+`
WHERE `+outOfRangeSQL+` ORDER BY id LIMIT 5`)
	if err != nil {
		return err
	}
	var n int64
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (id string, err error) {
		return id, r.Scan(&n, &id)
	})
	if err != nil || len(ids) == 0 {
		return err
	}
	return fmt.Errorf("%w: %d rows of %s have an updated_at no cursor can represent (before %s or after %s), for example %q; "+
		"lists leave them out. Move them into range, for example with UPDATE %s SET updated_at = clock_timestamp() WHERE %s, or delete them",
		ErrSchema, n, s.sql.table, minUpdatedAtSQL, maxUpdatedAtSQL, ids, s.sql.table, outOfRangeSQL)
}

// isUpdatedIndex matches (updated_at DESC, id COLLATE "C" DESC).
func isUpdatedIndex(d indexDef) bool {
	return d.usable && len(d.columns) == 2 &&
		d.columns[0] == "updated_at" && d.desc[0] &&
		d.columns[1] == "id" && d.desc[1] && d.collations[1] == "C"
}

// isContextIndex matches (context_id, updated_at DESC, id COLLATE "C"
// DESC); context_id is matched by equality, so its direction and
// (deterministic) collation do not matter.
func isContextIndex(d indexDef) bool {
	return d.usable && len(d.columns) == 3 &&
		d.columns[0] == "context_id" &&
		d.columns[1] == "updated_at" && d.desc[1] &&
		d.columns[2] == "id" && d.desc[2] && d.collations[2] == "C"
}

// TableDDL returns the CREATE TABLE IF NOT EXISTS statement of the store's
// table in schema, for externally managed schemas: create the table with
// it, then run MigrationFile for the ordering indexes and
// OwnerCountsMigrationFile for the owner column and the task counters.
func TableDDL(schema string) string {
	return fmt.Sprintf(createTableSQL, pgx.Identifier{schema}.Sanitize())
}
