// Package storemetrics is a Prometheus decorator for any engine.Store.
//
// Wrap a store once, register the Store with a prometheus.Registerer (it is
// a prometheus.Collector) and serve the registry:
//
//	m := storemetrics.New(store, storemetrics.Options{Backend: "pebble"})
//	reg.MustRegister(m)
//	handler := a2aserver.TaskStore(m)
//
// Series (all labels have a small fixed set of values):
//
//	a2astore_store_operation_duration_seconds{backend,operation,outcome}  histogram
//	a2astore_store_list_page_tasks{backend}                               histogram: tasks returned per page
//	a2astore_store_list_examined_entries{backend}                         histogram: index entries (rows) a page read, look-ahead included
//	a2astore_store_list_counted_entries_total{backend}                    counter: entries inspected to compute totals
//	a2astore_store_list_totals_total{backend,total="computed|skipped"}    counter: List calls that computed TotalSize or skipped it
//
// operation is one of create, get, replace, cancel, append_history, delete,
// list; outcome is ok, invalid_argument, not_found, already_exists,
// revision_conflict, not_cancelable, canceled, internal. Examined and
// counted entries are what the backend reports in ListResponse.Stats; pages
// for which it reports no examined entries (an empty store, or a backend
// that fills no stats) are not observed. A List that asked for
// IncludeTotalSize counts as computed, any other as skipped (the authz
// dispatcher's batches skip it).
//
// Metrics are a decorator, not a backend feature (STYLE: cross-cutting
// concerns wrap an engine.Store). The Store forwards Close (io.Closer) and
// CheckInvariants (engine.Checker) to the store it wraps. It is an
// engine.OwnerStore: it forwards CreateOwned (counted as create) and owner
// filters to a store that records owners, and answers them with
// engine.ErrOwnersUnsupported over one that does not.
package storemetrics
