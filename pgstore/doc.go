// Package pgstore is the PostgreSQL backend of the a2astore contract
// (engine.Store, and engine.OwnerStore for task owners), on
// github.com/jackc/pgx/v5.
//
// # Schema (P1–P3)
//
// Tasks live in one table, <schema>.a2a_tasks (schema "public" by default):
// the ID, context ID, storage update time updated_at (timestamptz, µs),
// revision, state, status timestamp, and the task body split into columns
// so that a light list (engine.ProjectionLight) reads only the ID, context
// ID, state, status timestamp and metadata, and a full list reads only the
// history messages and artifacts it returns; and the task's owner (see
// Owners). TableDDL returns the table's definition as P1 and P2 know it
// (for creating it in an externally managed schema).
//
// List order (S6, C3) is served by two btree indexes, owner-filtered
// lists by two more, and lists filtered by status, alone or with an
// owner, by the status indexes (C7; StatusIndexesMigrationFile):
//
//	idx_a2a_tasks_updated               (updated_at DESC, id COLLATE "C" DESC)
//	idx_a2a_tasks_context_updated       (context_id, updated_at DESC, id COLLATE "C" DESC)
//	idx_a2a_tasks_owner_updated         (owner, updated_at DESC, id COLLATE "C" DESC)
//	idx_a2a_tasks_owner_context_updated (owner, context_id, updated_at DESC, id COLLATE "C" DESC)
//	idx_a2a_tasks_state_updated         (state, updated_at DESC, id COLLATE "C" DESC)
//	idx_a2a_tasks_owner_state_updated   (owner, state, updated_at DESC, id COLLATE "C" DESC)
//
// A filtered page runs in a read-only transaction that first turns sorts,
// sequential and bitmap scans off for that transaction alone (one round
// trip still), so that its plan is the ordered scan of its index whatever
// the statistics (C7).
//
// Totals come from the counter table a2a_task_counts and the count
// ledgers a2a_task_count_deltas and a2a_task_count_moves, kept by
// triggers on a2a_tasks (see Totals).
//
// By default the store manages its schema: Open and New create the schema,
// table and both ordering indexes if missing, and install updated_at's
// DEFAULT clock_timestamp() on a table created with another default (older
// releases used now()), idempotently and under a transaction-scoped
// advisory lock, so several processes may start at once (existing rows
// keep their updated_at); then, in three more steps under the same lock, each skipped when
// the catalog shows it done, the owner column (with the one-time owner
// backfill), the owner indexes, and the counters with their triggers and a
// recount. Locks on a2a_tasks while a step runs: ACCESS EXCLUSIVE for the
// owner column and its backfill (instant when no row has an owner in its
// metadata); SHARE (writes wait, reads go on) while an owner index is
// built; SHARE ROW EXCLUSIVE (writes wait, reads go on) while the counters
// are installed and recounted, so that no write is missed or counted
// twice: one scan of the table, about a second per million rows. With
// Options.ExternalSchema the store creates nothing; it checks that the
// table exists and that the four indexes exist by definition (columns, DESC
// order, "C" collation on id, btree, valid, not partial) whatever their
// names, that the owner column is text NOT NULL, and that the counter
// table, its trigger functions (their bodies as this release writes them)
// and triggers are in place — each trigger of its type, without a WHEN
// condition but the update trigger's own (issue 53), enabled as CREATE TRIGGER enables it or ENABLE ALWAYS (not
// disabled, not ENABLE REPLICA) — and otherwise fails naming the
// migration file to run: pgstore/migrations/001_ordering_indexes.sql,
// which holds exactly the statements of P2, then
// pgstore/migrations/003_owner_and_counts.sql, which holds the statements
// of the three steps above for schema public, its locking written at its
// top, then pgstore/migrations/009_count_triggers.sql, which holds every
// counter statement this release runs (the ledger of issue 20,
// pgstore/migrations/004_count_ledger.sql, read by index above the folds'
// watermark of pgstore/migrations/007_count_watermark.sql, with the
// cheaper triggers of issue 53).
//
// # Totals (L5, L8, C4, C5)
//
// Every total of the shapes none, context, owner and owner+context, each
// with or without a state, is read from the counters, not counted: the
// base table a2a_task_counts (at most a row per state: one shard) plus the
// pending deltas of the ledger a2a_task_count_deltas — and, for a total
// by state, of a2a_task_count_moves, the ledger of pure state changes —
// all in the page's REPEATABLE READ snapshot, so the total is exact for
// the page. The ledgers are read by their xact index (the writing
// transaction's ID) above the latest fold's watermark
// (a2a_task_count_folds: every row of a transaction that had ended when
// that fold took its snapshot is folded), so a total never visits the
// dead rows folds leave behind, however many a snapshot held open
// elsewhere keeps (C5; List sets enable_seqscan off for the total's
// transaction so that no plan scans a ledger). A total
// with StatusTimestampAfter counts the matching rows and may scan (C4).
// ListStats.Counted is 0 when the counters answered.
//
// Triggers on a2a_tasks append signed deltas to the ledger inside every
// writing transaction, so the totals are exact for any writer — this
// store, other processes, older releases' writes, hand-written SQL, COPY,
// MERGE, DELETE, TRUNCATE — and roll back with it. Appending locks no
// counter row, so writers never queue on a count. INSERT and DELETE
// triggers run once per statement on its transition table (one grouped
// multi-row INSERT); the UPDATE trigger runs per row and only for updates
// that set id, state, context_id or owner (AppendHistory fires nothing),
// returning at once when they are unchanged; a change of state alone (the
// moves of a lifecycle, which no total but one by state reads) appends
// one row (old and new state) to a2a_task_count_moves, any other change
// two rows (-1 old, +1 new) to a2a_task_count_deltas. The
// store's roll-up service (started by Open and New, stopped by Close;
// Options.CountRollupInterval) folds the ledger into the base every
// second, after every thousand of the store's writes, as soon as a total
// scanned more than 256 pending ledger rows, and at once again after a
// round that folded a full batch, in transactions of about 10,000 rows
// of each ledger (whole writer transactions) that delete the rows and add their deltas to the base
// together (a2a_task_counts_fold), one server at a time (an advisory
// lock); FoldCounts folds on demand. Context and owner base rows that
// reach zero are deleted by the fold. Writes that bypass triggers
// (session_replication_role = replica, ALTER TABLE … DISABLE TRIGGER)
// make the counters wrong: CheckInvariants compares base plus ledger with
// a recount from one snapshot (ErrCountDrift, CountDrifts), and SELECT
// <schema>.a2a_task_counts_rebuild() recounts under the same lock as the
// install. Roles that write a2a_tasks need INSERT on
// a2a_task_count_deltas and a2a_task_count_moves (and, to TRUNCATE,
// DELETE on the three tables; for statements of 64 rows or more, whose
// counts go to the base at once, SELECT, INSERT, UPDATE and DELETE on
// a2a_task_counts); the store's own role reads all four counter tables
// (SELECT) and, to fold, deletes from both ledgers and writes
// a2a_task_counts and a2a_task_count_folds.
//
// # Owners (O1–O6)
//
// The owner is a column, owner text NOT NULL DEFAULT the empty string,
// which is no owner: rows written by code that does not know the column
// are ownerless. CreateOwned records it, Create records the empty owner,
// no other write sets it, and
// every record and page reports it (Record.Owner,
// ListResponse.TaskOwners). Owners, like IDs, must be valid UTF-8 without
// NUL: others are engine.ErrInvalidArgument before any SQL runs. An owner
// filter seeks idx_a2a_tasks_owner_updated, and with a context
// idx_a2a_tasks_owner_context_updated, without a sort (O6). One entry of
// the latter holds owner, context ID and task ID: when all three are near
// their 1,024-byte limits and do not compress, the entry exceeds what a
// btree page holds and the create is refused with
// engine.ErrInvalidArgument.
//
// Before owners had a column, engine/authz's OwnerPolicy recorded them in
// task metadata, under "a2astore.owner" unless its former MetadataKey
// option named another key. When the column is added, the same
// transaction copies such owners into it (valid owners only), once: the
// metadata is left as it is, and after the upgrade it is only the
// client's. The copy reads Options.UpgradeOwnerKey (default
// "a2astore.owner"); Options.UpgradeWithoutOwners turns it off. Only the
// key OwnerPolicy wrote may be trusted — any other was metadata a client
// could set — so a deployment that stamped another key must name it, and
// one that kept no owners in metadata must turn the copy off. The
// migration file takes the key from the setting a2astore.upgrade_owner_key
// (PGOPTIONS, or an edit of its set_config line). The copy reads
// taskcodec's binary metadata in PL/pgSQL (a2a_taskcodec_metadata_string).
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
//   - lists leave them out, and so do totals that count rows (with
//     StatusTimestampAfter, or by owner and context); totals read from
//     the counters still count them, since the triggers count every row;
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
// order); an owner filter likewise, leading the context; see listFilters.
// When IncludeTotalSize is set, count and page run in one REPEATABLE READ,
// READ ONLY transaction, sent as one pipelined batch (BEGIN, count, page,
// COMMIT: one round trip); otherwise no count runs at all.
//
// # Reads from standbys (L10)
//
// With Options.Replicas (DSNs of hot standbys streaming from the primary),
// Get and List run on a standby that has replayed the primary's WAL up to
// its insert position at the read's start — checked by a gate statement
// pipelined before the read's own transaction, so the read's snapshot is
// taken after it; a read that waits over 10 ms has the primary flush its
// WAL, which is all a standby receives — and otherwise, after waiting up
// to Options.ReplicaWait, on the primary, behind a gate that waits out
// commits already in the WAL but not yet visible there. Every read thus
// sees everything committed before it began: L7 over pages from any mix
// of standbys and the primary, L8 within a page, read-your-writes across
// store instances. A health monitor (one goroutine per store) skips
// standbys that are down, paused, lagging beyond Options.ReplicaMaxLag or
// promoted, and uses them again once healthy. Writes, conditional
// operations' follow-up reads, retention, the roll-up and ReadLog stay on
// the primary. ReplicaStats reports reads by target, fallbacks by reason,
// lag and catch-up waits. See replica.go for the argument.
//
// # Several processes on one database
//
// Any number of processes may run stores on one database, as servers
// behind a load balancer do: time advances in SQL (P1), totals are kept by
// triggers, page tokens carry everything a page needs (a token from one
// process continues on another, T2), and startup is safe when processes
// start at once. Nothing is cached between calls.
//
// # Writes (S2–S9)
//
// Every write is one statement: Replace is conditional on the revision,
// AppendHistory appends only when the message ID is not yet in the history
// (checked in the UPDATE's WHERE clause, so concurrent appends are neither
// lost nor duplicated), and Cancel applies only to a non-terminal state.
// Serialization failures and deadlocks (SQLSTATE 40001, 40P01) are retried a
// few times with jitter; reads are not, but a read whose connection was
// found gone runs once more on a live one (reconnect.go).
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
// and its connection is closed as the call ends, never reused, so that a
// cancel request acted on late cannot cancel another caller's query
// (PoolConfig).
package pgstore
