// Package pgstore is the PostgreSQL backend of the a2astore contract
// (engine.Store), on github.com/jackc/pgx/v5.
//
// # Schema (P1–P3)
//
// Tasks live in one table, <schema>.a2a_tasks (schema "public" by default):
// the ID, context ID, storage update time updated_at (timestamptz, µs),
// revision, state, status timestamp, and the task body split into columns
// so that a light list (engine.ProjectionLight) reads only the ID, context
// ID, state, status timestamp and metadata, and a full list reads only the
// history messages and artifacts it returns. TableDDL returns the table's
// definition (for creating it in an externally managed schema).
//
// List order (S6, C3) is served by two btree indexes:
//
//	idx_a2a_tasks_updated         (updated_at DESC, id COLLATE "C" DESC)
//	idx_a2a_tasks_context_updated (context_id, updated_at DESC, id COLLATE "C" DESC)
//
// By default the store manages its schema: Open and New create the schema,
// table and both indexes if missing, and install updated_at's DEFAULT
// clock_timestamp() on a table created with another default (older releases
// used now()), idempotently and under a transaction-scoped advisory lock, so
// several processes may start at once. Existing rows keep their updated_at.
// With
// Options.ExternalSchema the store creates nothing; it checks that the table
// exists and that both indexes exist by definition (columns, DESC order,
// "C" collation on id, btree, valid, not partial) whatever their names, and
// otherwise fails naming the migration file
// pgstore/migrations/001_ordering_indexes.sql, which holds exactly the
// statements of P2.
//
// # Time (S1–S5, P1)
//
// The database's clock is the store's clock: Create sets updated_at to
// clock_timestamp() and every advancing mutation sets it to
// GREATEST(clock_timestamp(), updated_at + interval '1 microsecond') in the
// same statement, so several application processes sharing a database keep
// each task's time monotonic. timestamptz has µs resolution, which is the
// resolution of engine.Cursor, so cursors convert exactly. Status
// timestamps are stored exactly (µs in a timestamptz plus the remaining
// nanoseconds), so StatusTimestampAfter compares at full precision.
//
// A cursor's time is 0..math.MaxInt64 µs (1970-01-01 to
// 294247-01-10T04:00:54.775807Z); timestamptz holds more, and ±infinity.
// Rows outside that range (other programs' writes; existing rows keep their
// updated_at, P2) are handled so that a List never fails because of them
// and never hands out a token it would reject:
//
//   - lists and totals leave them out;
//   - Get returns them with the cursor clamped into range (0 below,
//     math.MaxInt64 above);
//   - a mutation moves a row from before 1970 into range; a row at or
//     beyond the maximum is at its maximum time, so mutations fail with
//     engine.ErrInternal and change nothing (S5);
//   - a managed schema refuses them from any writer with the CHECK
//     constraint a2a_tasks_updated_at_range, added NOT VALID so that
//     existing rows keep their times (TimeRangeDDL; for external schemas
//     the optional migration pgstore/migrations/002_updated_at_range.sql);
//   - Open and New, on managed and external schemas alike, fail with
//     ErrSchema while such rows exist, naming some of them and the UPDATE
//     that moves them into range (or delete them); CheckInvariants reports
//     them too.
//
// # Reads (L1–L8, C3)
//
// A page is one query: the filters, then the boundary as one row comparison
// in the index's collation, (updated_at, id COLLATE "C") < ($t, $id),
// ORDER BY updated_at DESC, id COLLATE "C" DESC LIMIT PageSize+1. It never
// uses OFFSET. A context filter is written context_id >= $c AND context_id
// <= $c with context_id leading the ORDER BY, so that only the context index
// yields the order without a sort (with "=", the planner may prefer the
// global index plus a filter on tables whose rows were inserted in time
// order); see listFilters. When IncludeTotalSize is set, count and page run
// in one REPEATABLE READ, READ ONLY transaction; otherwise no count runs at
// all.
//
// # Writes (S2–S9)
//
// Every write is one statement: Replace is conditional on the revision,
// AppendHistory appends only when the message ID is not yet in the history
// (checked in the UPDATE's WHERE clause, so concurrent appends are neither
// lost nor duplicated), and Cancel applies only to a non-terminal state.
// Serialization failures and deadlocks (SQLSTATE 40001, 40P01) are retried a
// few times with jitter; reads are never retried.
//
// # IDs and errors (S8, T4)
//
// PostgreSQL text cannot hold NUL or invalid UTF-8: task and context IDs
// with them are engine.ErrInvalidArgument and a page token whose boundary ID
// has them is engine.ErrInvalidPageToken, both decided before any SQL runs.
// Database errors are translated to engine sentinels once; the returned
// error's message never contains driver text, while the driver error stays
// reachable through errors.As for logging. Context cancellation and
// deadlines are returned as the context's error (errors.Is(err,
// context.DeadlineExceeded)); the running query is cancelled on the server
// and its connection is then closed, not reused, so that a cancel request
// acted on late cannot cancel another caller's query (PoolConfig).
package pgstore
