package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// StatusIndexesMigrationFile is the migration an externally managed schema
// runs, after OwnerCountsMigrationFile, to get the status-ordered indexes
// (C7); startup errors about them name it (P3).
const StatusIndexesMigrationFile = "pgstore/migrations/006_status_indexes.sql"

// statusIndex is one status-ordered index: a page filtered by state seeks
// (state, …) and one filtered by owner and state (owner, state, …), in
// list order after them (C7). A page with a context as well reads the
// context's (or the owner's in the context) index and filters by state:
// at most the entries of that context.
type statusIndex struct {
	name  string
	cols  string // the key, for messages
	match func(indexDef) bool
	sql   string // CREATE INDEX CONCURRENTLY ({schema} as in render)
}

// statusIndexes are the status-ordered indexes, in the order they are
// built. The migration file holds their statements verbatim for schema
// public; a test checks it does.
var statusIndexes = []statusIndex{
	{"idx_a2a_tasks_state_updated", `(state, updated_at DESC, id COLLATE "C" DESC)`, isStateIndex,
		`CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_a2a_tasks_state_updated
  ON {schema}.a2a_tasks (state, updated_at DESC, id COLLATE "C" DESC)`},
	{"idx_a2a_tasks_owner_state_updated", `(owner, state, updated_at DESC, id COLLATE "C" DESC)`, isOwnerStateIndex,
		`CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_a2a_tasks_owner_state_updated
  ON {schema}.a2a_tasks (owner, state, updated_at DESC, id COLLATE "C" DESC)`},
}

// inTx is ix's statement for schema qs as it runs in a transaction: on
// a table just created, or whose owner column was just added, and so
// held locked or empty, the index is built at once.
func (ix *statusIndex) inTx(qs string) string {
	return strings.Replace(render(ix.sql, qs), " CONCURRENTLY", "", 1)
}

// isStateIndex matches (state, updated_at DESC, id COLLATE "C" DESC);
// state is matched by equality (a closed range: see listFilters), so its
// direction and (deterministic) collation do not matter.
func isStateIndex(d indexDef) bool {
	return d.usable && len(d.columns) == 3 && d.columns[0] == "state" && orderedTail(d, 1)
}

// isOwnerStateIndex matches (owner, state, updated_at DESC, id COLLATE
// "C" DESC).
func isOwnerStateIndex(d indexDef) bool {
	return d.usable && len(d.columns) == 4 && d.columns[0] == "owner" && d.columns[1] == "state" && orderedTail(d, 2)
}

// orderedTail reports whether d's key from column i on is (updated_at
// DESC, id COLLATE "C" DESC).
func orderedTail(d indexDef, i int) bool {
	return d.columns[i] == "updated_at" && d.desc[i] &&
		d.columns[i+1] == "id" && d.desc[i+1] && d.collations[i+1] == "C"
}

// missingStatusIndexes returns the status indexes the table lacks, by
// definition whatever their names.
func (s *Store) missingStatusIndexes(ctx context.Context) ([]statusIndex, []indexDef, error) {
	defs, err := s.indexDefs(ctx, s.pool, "a2a_tasks")
	if err != nil {
		return nil, nil, err
	}
	var missing []statusIndex
	for _, ix := range statusIndexes {
		if !slices.ContainsFunc(defs, ix.match) {
			missing = append(missing, ix)
		}
	}
	return missing, defs, nil
}

// ensureStatusIndexes builds the status indexes the table lacks — the
// table of a previous release: a new one got them with the table and the
// owner column — with CREATE INDEX CONCURRENTLY: writers go on while an
// index is built (it waits for the transactions running when it starts,
// and reads the table twice). Each statement runs alone, outside any
// transaction, as CONCURRENTLY requires.
//
// One process builds: the one that gets the schema's build lock, a
// session advisory lock taken without waiting (pg_try_advisory_lock). A
// process that does not get it starts without waiting for the build, its
// pages correct but not yet at C7's cost; waiting would be a deadlock, as
// the build waits for every transaction holding a snapshot, a waiter's
// included. (For the same reason ensureSchema and ensureExtras lock
// nothing on a ready table.) A build that was interrupted leaves an
// invalid index of that name, which IF NOT EXISTS would keep: it is
// dropped (DROP INDEX CONCURRENTLY) and built again.
func (s *Store) ensureStatusIndexes(ctx context.Context) error {
	missing, _, err := s.missingStatusIndexes(ctx)
	if err != nil || len(missing) == 0 {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	const key = `hashtextextended('a2astore.pgstore.status-indexes:' || $1, 0)`
	var mine bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+key+`)`, s.schema).Scan(&mine); err != nil || !mine {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+key+`)`, s.schema)
	// Look again under the lock: another process may have built them.
	missing, defs, err := s.missingStatusIndexes(ctx)
	if err != nil {
		return err
	}
	for _, ix := range missing {
		if slices.ContainsFunc(defs, func(d indexDef) bool { return d.name == ix.name }) {
			if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+s.qschema+"."+ix.name); err != nil {
				return fmt.Errorf("drop the invalid index %s: %w", ix.name, err)
			}
		}
		if _, err := conn.Exec(ctx, render(ix.sql, s.qschema)); err != nil {
			return fmt.Errorf("build index %s: %w", ix.name, err)
		}
	}
	return nil
}

// checkStatusIndexes is the startup check (P3) of an externally managed
// schema's status indexes, and part of CheckInvariants: by definition,
// valid, whatever their names.
func (s *Store) checkStatusIndexes(ctx context.Context) error {
	missing, _, err := s.missingStatusIndexes(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: check schema: %w", err)
	}
	if len(missing) == 0 {
		return nil
	}
	var cols []string
	for _, ix := range missing {
		cols = append(cols, ix.cols)
	}
	return fmt.Errorf("%w: %s.a2a_tasks lacks the status index %s (or it is invalid: an interrupted CREATE INDEX CONCURRENTLY); run %s",
		ErrSchema, s.schema, strings.Join(cols, ", "), StatusIndexesMigrationFile)
}

// StatusIndexesDDL returns the statements that build the status indexes
// in schema, for externally managed schemas (StatusIndexesMigrationFile
// holds them for schema public). Run each on its own, outside a
// transaction block.
func StatusIndexesDDL(schema string) []string {
	q := pgx.Identifier{schema}.Sanitize()
	var stmts []string
	for _, ix := range statusIndexes {
		stmts = append(stmts, render(ix.sql, q))
	}
	return stmts
}
