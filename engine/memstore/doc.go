// Package memstore is the in-memory a2astore backend: every task is one
// entry, found by a map by ID and by ordered indexes on
// github.com/tidwall/btree — one global index in list order, and keyed
// indexes in (key, list order): by context ID and by state, and for tasks
// with an owner by owner, by (owner, context ID) and by (owner, state).
//
// Store is an engine.OwnerStore: CreateOwned records a task's owner beside
// the task (never in its metadata), Record.Owner and ListResponse.TaskOwners
// return it, and ListRequest.Owner filters by it (O1–O6). Tasks without an
// owner (Create, or CreateOwned with "") are in no owner index.
//
// Guarantees beyond the engine contract:
//   - Writes maintain the indexes in O(log n) (C1).
//   - An unfiltered, context-filtered, owner-filtered or owner-and-context
//     filtered page seeks once in O(log n) into the one index range that
//     holds only candidates and visits exactly PageSize+1 index entries
//     when the page is full (C2, O6); ListResponse.Stats reports the
//     count. An owner's pages and totals never read another owner's tasks,
//     whatever their number.
//   - A page filtered by state, alone or with an owner, does the same in
//     the state or (owner, state) index (C7). With a context as well it
//     visits the context's (or the owner's in the context) entries until
//     the page is full: at most that range.
//   - Each index costs every write of a task a delete and an insert in
//     it (O(log n)); the state and (owner, state) indexes add two of each
//     to a Replace (one for a task without an owner) and 24 bytes per
//     task per index to the index items.
//   - Totals are O(1) for every filter shape except StatusTimestampAfter
//     (counts per state, per context and context+state, per owner and
//     owner+state, per owner+context), which scans the matching index
//     range, and owner+context+state, which scans that owner's tasks in the
//     context.
//   - Count and page are read under one shared lock (L8).
//   - Store is an engine.Exporter and engine.Importer (X1): Import checks
//     and encodes a batch before it takes the write lock, then writes it
//     whole or not at all, O(log n) per task and index; it also refuses a
//     log the store could not have kept (not consecutive revisions ending
//     at the task's revision, time and state).
//   - Tasks are stored encoded (taskcodec's binary form), so the garbage
//     collector scans no task internals, a task passed in is never retained,
//     and every returned task is a fresh copy (L9).
//
// # Representation
//
// An entry (112 bytes, no pointer) holds the task's time, revision,
// state number, status time (a pointer-free 16-byte stamp), its context
// and owner as interned numbers (syms): each context ID and owner is
// stored once, with the counts of its tasks per state; its ID (the
// store's own copy) when it has at most 40 bytes; and the place of its
// record in the slab (slab.go): a longer ID, then its body: the metadata's encoded form, then the rest of the task
// without its light fields (empty for a light task without metadata).
// The slab is chunks of 256 KiB, append-only, a record written once and
// never changed; a chunk whose live records fall under half of it is
// compacted into the open chunk, one with none is
// dropped. Entries live in slots, chunks of 1,024 that never move and are
// reused once freed; the ID map (by the ID's seeded hash) and the indexes
// name an entry by its slot number. So the collector follows no pointer
// per task: the slots' chunks, the slab's and the index nodes are all it
// sees (slots.go, slab.go, idmap.go). What the store hands out (IDs,
// cursors, decoded strings) or keeps beside an entry is copied out of
// the entry or the slab first (a page's in one allocation), so that no
// caller holds a chunk or sees a reused slot. The slots' chunks are not
// given back when tasks go: they hold 112 bytes per task at the store's
// peak. Index items are a time and a slot
// (12 bytes; keyed ones add the key: 24), so each task's light
// fields are stored once. A full page decodes its bodies page-wide
// (taskcodec.Decoder: a few allocations per page, not several per task);
// decoded strings share the page's copy of its bodies. A full page that returns no history and no artifacts (historyLength 0,
// the default of most clients' lists) decodes each body's metadata and
// status message only, and does not walk the rest: this process wrote
// it (taskcodec.Decoder.Head; CheckInvariants decodes bodies whole).
// At 1e5 light tasks the store holds about 250 bytes per task, and about
// 850 per realistic one (BenchmarkFootprint).
//
// With Options.Log, the task logs (K7) live in a second slab of the same
// chunks (logslab.go): each task's log one region of encoded entries with
// room to grow, named from a map by slot that holds no pointer either. A
// realistic task's Create entry costs about 1,100 bytes of it and no
// object of its own (BenchmarkMemHeap's log=on row), a log written
// since up to twice its entries' bytes until a compaction moves it (a log
// over 32 KiB has a chunk of its own, which none compacts); what ReadLog
// and Export hand out is copied, Export's under the read lock. A write
// that would take its task's log past 1 GiB is refused
// (ErrInvalidArgument, nothing changed).
//
// IDs and owners may hold any bytes, NUL and invalid UTF-8 included (S8,
// O1).
package memstore
