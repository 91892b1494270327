// Package pebblestore is the a2astore engine.Store on a Pebble LSM
// (github.com/cockroachdb/pebble/v2).
//
// # Keyspace
//
// A task lives under four keys, always written together in one batch:
//
//	r ‖ id                        record: revision, UpdatedAt, light fields
//	g ‖ cursor                    global ordering index → light fields
//	c ‖ asc(contextID) ‖ cursor   per-context ordering index → light fields
//	b ‖ cursor                    task body (taskcodec binary form)
//
// plus merge-operator counters (n ‖ …) for the total, each state, each
// context and each context+state. cursor is the desckey encoding of
// (UpdatedAt, ID), whose byte order is list order (S6): UpdatedAt
// descending, then ID descending, with IDs of any bytes (NUL, 0xFF,
// invalid UTF-8 — S8) ordered exactly.
//
// # Guarantees
//
//   - Atomicity: a mutation deletes the old index, body and counter entries
//     and writes the new ones in one batch; a crash never leaves the indexes
//     and the records disagreeing.
//   - Durability: by default each mutation is fsynced before it returns
//     (Options.NoSync trades that for speed: a crash may lose the latest
//     acknowledged mutations, never tear one). Mutations of different tasks
//     run concurrently and share fsyncs.
//   - Time (S4, S5): a mutation sets UpdatedAt = max(clock(), old+1) from
//     the stored old time, so per-task time keeps advancing across restarts
//     even when the clock is behind.
//   - Lists (L8, C2): the page and its total come from one iterator view.
//     An unfiltered or context-only page is one seek and PageSize+1 steps;
//     light pages decode only index values; full pages read bodies from a
//     clone of the same view. Totals come from counters, except with
//     StatusTimestampAfter, which scans the matching index. A status filter
//     without a context skips non-matching entries of the global index.
//
// Store implements engine.Checker: CheckInvariants verifies the keyspace
// against the records.
package pebblestore
