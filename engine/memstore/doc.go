// Package memstore is the in-memory a2astore backend: every task lives in a
// map by ID, and two kinds of ordered index on github.com/tidwall/btree keep
// list order — one global, one per context ID.
//
// Guarantees beyond the engine contract:
//   - Writes maintain the indexes in O(log n) (C1).
//   - An unfiltered or context-filtered page seeks once in O(log n) and visits
//     exactly PageSize+1 index entries (C2); ListResponse.Stats reports
//     the count.
//   - Totals are O(1) for every filter shape except StatusTimestampAfter
//     (counters per context, per state and per context+state), which scans
//     the matching index.
//   - Count and page are read under one shared lock (L8).
//   - Tasks are stored encoded (taskcodec's binary form), so the garbage
//     collector scans no task internals, a task passed in is never retained,
//     and every returned task is a fresh copy (L9).
//
// IDs may hold any bytes, NUL and invalid UTF-8 included (S8).
package memstore
