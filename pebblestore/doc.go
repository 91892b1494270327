// Package pebblestore is the a2astore engine.Store on a Pebble LSM
// (github.com/cockroachdb/pebble/v2). Store is an engine.OwnerStore:
// CreateOwned records a task's owner beside the task (never in its
// metadata), Record.Owner and ListResponse.TaskOwners return it, and
// ListRequest.Owner filters by it (O1–O6).
//
// # Keyspace
//
// A task lives under four keys, six with an owner, always written together
// in one batch:
//
//	r ‖ id                                   record: revision, UpdatedAt, light fields, owner
//	g ‖ cursor                               global ordering index → light fields
//	c ‖ asc(contextID) ‖ cursor              per-context ordering index → light fields
//	o ‖ asc(owner) ‖ cursor                  per-owner ordering index → light fields (owned tasks)
//	p ‖ asc(owner) ‖ asc(contextID) ‖ cursor per-(owner, context) ordering index → light fields (owned tasks)
//	b ‖ cursor                               task body (taskcodec binary form)
//
// plus merge-operator counters (n ‖ …) for the total, each state, each
// context and each context+state, and for each owner, owner+state,
// owner+context and owner+context+state; and the format version (m ‖
// "format"). A counter that reaches zero is deleted (but the total's and
// the states'), so storage stays bounded by the live tasks: an emptied
// store, compacted, holds a handful of keys whatever it once held
// (counters.go; m ‖ "zerofree" and z ‖ seq markers serve that). Expired
// tasks are removed oldest first from the tail of the global index by
// RemoveExpired (engine.Retainer, retain.go). cursor is the desckey encoding of (UpdatedAt, ID), whose byte
// order is list order (S6): UpdatedAt descending, then ID descending, with
// IDs of any bytes (NUL, 0xFF, invalid UTF-8 — S8) ordered exactly. asc is
// desckey's prefix-free ascending encoding, so owners and contexts of any
// bytes (prefixes of each other included) never share a key range.
//
// # Format versions and the upgrade
//
// The database records its format version; this build reads and writes
// format 3. Open creates a new database in format 3. A database of format
// 2 (before the status indexes, C7) is upgraded in place by Open: every
// status key is deleted, then each record's state key and (with an owner)
// (owner, state) key are written, in synced batches, and the format key
// last; an interrupted upgrade starts over (format-1 records found on the
// way are upgraded as below). With Options.NoUpgrade, Open refuses it with
// ErrOldFormat. A database of format
// 1 (written before stores recorded owners: no format key, no owner
// indexes, owners kept by engine/authz's OwnerPolicy in task metadata under
// "a2astore.owner" or the key its former MetadataKey option named) is
// upgraded in place by Open before it returns: every record and index
// value is rewritten with the owner found in that metadata key
// (Options.UpgradeOwnerKey, which a deployment that stamped another key
// must set, since "a2astore.owner" was then client metadata;
// Options.UpgradeWithoutOwners records none; a value that is no string, or
// an owner over engine.MaxOwnerBytes, which no list could name, leaves the
// task without owner), the owner indexes and counters are built, and the
// format key is written last. Metadata is left as it is. The upgrade runs
// in synced batches, each atomic: a crash leaves every task either not yet
// upgraded or upgraded with all of its keys, never a mix, and the next Open
// finishes the upgrade (skipping upgraded tasks) before anything is served.
// With Options.NoUpgrade, Open refuses a format-1 database with
// ErrOldFormat and changes nothing. A database of a newer format fails
// Open with ErrNewFormat. Both errors say what to do.
//
// # The rollback guard
//
// Releases before format 2 must not open a format-2 database: they would
// create tasks in format 1 in it, which this build cannot read. This build
// keeps the database's write-ahead log in the subdirectory wal of dir, and
// Pebble records that in the database's OPTIONS file; a release before
// the guard opens the database with the log in dir itself, and Pebble
// refuses to open it ("directory .../wal may contain relevant WALs but is
// not in WALRecoveryDirs") before reading or writing anything. (Renaming
// the merge operator would not do: Pebble records its name in every
// sstable and reads sstables only under the configured name.) A new
// database is guarded from its first Open. A database last opened without
// the guard — a format-1 database, or a format-2 one that the format-2
// build before the guard upgraded, which the format-1 release may have
// opened since and written tasks into — is scanned by Open for format-1
// tasks, which are upgraded as the upgrade would (owners from
// Options.UpgradeOwnerKey), and then guarded; an interrupted scan is
// finished by the next Open (the file A2ASTORE-SCAN-PENDING in dir says
// one is due). Rolling back to an older release therefore means restoring
// a backup taken before the upgrade: back up before upgrading if you may
// go back. A value in format 1 met anyway is reported as such (an
// engine.ErrInternal naming Options.RepairFormat1, which makes Open scan
// and upgrade it). Open holds Pebble's directory lock from before it
// reads the OPTIONS file until Close.
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
//   - Lists (L8, C2, O6): the page and its total come from one iterator
//     view. A page reads the one index that holds only candidates — the
//     (owner, context) index, the context's, the (owner, state) index, the
//     owner's, the state's or the global one — so an unfiltered,
//     context-only, owner-only, owner+context, status-only or owner+status
//     page is one seek and PageSize+1 steps (C7), and an owner's pages never read
//     another owner's entries. Light pages decode only index values
//     (TaskOwners come from them too); full pages read bodies from a clone
//     of the same view. Totals come from counters, except with
//     StatusTimestampAfter, which scans the matching index. A status filter
//     with a context skips non-matching entries of the context's (or the
//     owner's in the context) index: at most that range.
//
// Store implements engine.Checker: CheckInvariants verifies the keyspace
// against the records.
package pebblestore
