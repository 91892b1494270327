package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Ready reports whether the store can serve now, reading no task (SPEC
// H1, a readiness probe): the database answers, and the schema is what
// this build expects — the table with its columns and ordering indexes,
// no row outside the cursor range, the owner column with its indexes and
// the counters with their triggers, and the log table when the store keeps
// the log. It is what Open checks, run again: an error wrapping ErrSchema
// means the schema changed under the store. Bound it with ctx's deadline.
func (s *Store) Ready(ctx context.Context) error {
	var one int
	if err := s.pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("pgstore: ready: %w", err)
	}
	if err := s.checkSchema(ctx); err != nil {
		if errors.Is(err, ErrSchema) {
			return err
		}
		return fmt.Errorf("pgstore: ready: %w", err)
	}
	if err := s.checkExtras(ctx); err != nil {
		return err
	}
	if s.log {
		if err := s.checkLog(ctx); err != nil {
			return err
		}
		if err := s.checkLogTrace(ctx); err != nil {
			return err
		}
		return s.checkDeletions(ctx)
	}
	return nil
}

// RebuildCounts recounts every task counter from a2a_tasks and empties the
// count ledgers, in one transaction that writes wait for (reads go on): the
// repair ErrCountDrift names. It is what installing the counters ends with.
func (s *Store) RebuildCounts(ctx context.Context) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT `+s.qschema+`.a2a_task_counts_rebuild()`)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: rebuild counters: %w", err)
	}
	return nil
}

// Migration is what the catalog says about one migration file of an
// externally managed schema (InspectSchema).
type Migration struct {
	File    string // the migration, relative to the module's top directory
	Applied bool   // the catalog shows everything it installs
	// Need says which stores refuse to start (Open) and report not ready
	// (Ready) without it; Required tells for one store.
	Need Need
	// Missing says what the catalog lacks when Applied is false.
	Missing string
}

// Need is which stores a migration is required by (SPEC H1: a store is
// ready only on the schema it expects).
type Need int

const (
	// NeedAlways: every store.
	NeedAlways Need = iota
	// NeedLog: a store with Options.Log — every a2astore-server opens
	// its store so — and no other: the task log's migrations.
	NeedLog
	// NeedNone: no store; a managed store adds it (the CHECK constraint
	// of 002, which Open does not look for).
	NeedNone
)

// Required reports whether a store with Options.Log = log refuses to
// start without m (Open fails with ErrSchema naming m.File).
func (m Migration) Required(log bool) bool {
	return m.Need == NeedAlways || m.Need == NeedLog && log
}

// InspectSchema reads, from the catalog only (it changes nothing and reads
// no task), which of the store's migrations schema ("" = "public") holds,
// in order, and which stores need each (Migration.Required). A managed
// store (Options.ExternalSchema false) applies every one on Open, the
// log's only with Options.Log.
func InspectSchema(ctx context.Context, pool *pgxpool.Pool, schema string) ([]Migration, error) {
	if schema == "" {
		schema = "public"
	}
	s := &Store{pool: pool, schema: schema, sql: newStatements(schema)}
	var err error
	if s.qschema, err = quoteSchema(ctx, pool, schema); err != nil {
		return nil, fmt.Errorf("pgstore: inspect schema: %w", err)
	}
	out := []Migration{{File: MigrationFile}, {File: timeRangeMigrationFile, Need: NeedNone},
		{File: OwnerCountsMigrationFile + " + " + CountTriggersMigrationFile}, {File: LogMigrationFile, Need: NeedLog},
		{File: StatusIndexesMigrationFile}, {File: DeletionsMigrationFile, Need: NeedLog}, {File: LogTraceMigrationFile, Need: NeedLog}}

	switch err := s.checkTable(ctx); {
	case errors.Is(err, ErrSchema):
		out[0].Missing = err.Error()
	case err != nil:
		return nil, fmt.Errorf("pgstore: inspect schema: %w", err)
	default:
		out[0].Applied = true
	}
	if out[0].Applied {
		var exists bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = $1::regclass AND conname = $2)`,
			s.sql.table, timeRangeConstraint).Scan(&exists); err != nil {
			return nil, fmt.Errorf("pgstore: inspect schema: %w", err)
		}
		out[1].Applied = exists
		if !exists {
			out[1].Missing = "constraint " + timeRangeConstraint
		}
		st, err := s.inspectExtras(ctx, pool)
		if err != nil {
			return nil, fmt.Errorf("pgstore: inspect schema: %w", err)
		}
		out[2].Applied = st.complete()
		if !out[2].Applied {
			out[2].Missing = st.problems()
		}
	} else {
		out[1].Missing, out[2].Missing = "table a2a_tasks", "table a2a_tasks"
	}
	switch err := s.checkLog(ctx); {
	case errors.Is(err, ErrSchema):
		out[3].Missing = "table a2a_task_log"
		out[6].Missing = "table a2a_task_log"
	case err != nil:
		return nil, fmt.Errorf("pgstore: inspect schema: %w", err)
	default:
		out[3].Applied = true
		switch err := s.checkLogTrace(ctx); {
		case errors.Is(err, ErrSchema):
			out[6].Missing = "column a2a_task_log.trace"
		case err != nil:
			return nil, fmt.Errorf("pgstore: inspect schema: %w", err)
		default:
			out[6].Applied = true
		}
	}
	switch err := s.checkDeletions(ctx); {
	case errors.Is(err, ErrSchema):
		out[5].Missing = "table a2a_task_deletions or its index"
	case err != nil:
		return nil, fmt.Errorf("pgstore: inspect schema: %w", err)
	default:
		out[5].Applied = true
	}
	if !out[0].Applied || !out[2].Applied {
		out[4].Missing = "table a2a_tasks with its owner column"
		return out, nil
	}
	switch err := s.checkStatusIndexes(ctx); {
	case errors.Is(err, ErrSchema):
		out[4].Missing = err.Error()
	case err != nil:
		return nil, fmt.Errorf("pgstore: inspect schema: %w", err)
	default:
		out[4].Applied = true
	}
	return out, nil
}

// timeRangeMigrationFile is the optional migration of the CHECK constraint
// on updated_at (TimeRangeDDL).
const timeRangeMigrationFile = "pgstore/migrations/002_updated_at_range.sql"
