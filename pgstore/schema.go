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
// installs.
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
	stmts := append([]string{"CREATE SCHEMA IF NOT EXISTS %[1]s", createTableSQL}, createIndexesSQL...)
	for _, stmt := range stmts {
		if _, err := tx.Exec(ctx, fmt.Sprintf(stmt, q)); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
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
// both ordering indexes exist by definition, whatever their names (P3).
func (s *Store) checkSchema(ctx context.Context) error {
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
