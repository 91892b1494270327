// Package memstore is the in-memory a2astore backend: every task lives in a
// map by ID, and ordered indexes on github.com/tidwall/btree keep list
// order — one global, one per context ID, and for tasks with an owner one
// per owner and one per (owner, context ID).
//
// Store is an engine.OwnerStore: CreateOwned records a task's owner beside
// the task (never in its metadata), Record.Owner and ListResponse.TaskOwners
// return it, and ListRequest.Owner filters by it (O1–O6). Tasks without an
// owner (Create, or CreateOwned with "") are in no owner index.
//
// Guarantees beyond the engine contract:
//   - Writes maintain the indexes in O(log n) (C1).
//   - An unfiltered, context-filtered, owner-filtered or owner-and-context
//     filtered page seeks once in O(log n) in the one index that holds only
//     candidates and visits exactly PageSize+1 index entries when the page
//     is full (C2, O6); ListResponse.Stats reports the count. An owner's
//     pages and totals never read another owner's tasks, whatever their
//     number.
//   - Totals are O(1) for every filter shape except StatusTimestampAfter
//     (counters per context, per state and per context+state; index
//     lengths per owner and per owner+context; counters per owner+state),
//     which scans the matching index, and owner+context+state, which scans
//     that owner's tasks in the context.
//   - Count and page are read under one shared lock (L8).
//   - Tasks are stored encoded (taskcodec's binary form), so the garbage
//     collector scans no task internals, a task passed in is never retained,
//     and every returned task is a fresh copy (L9).
//   - The owner indexes are small: their items are a time and a pointer to
//     the record (16 bytes), not copies of the light fields, so an owner's
//     pages read each visited task through its record.
//
// IDs and owners may hold any bytes, NUL and invalid UTF-8 included (S8,
// O1).
package memstore
