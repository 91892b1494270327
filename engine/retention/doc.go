// Package retention removes finished tasks older than a configured age
// from any engine.Retainer (SPEC R1, R2): a background service with one
// job, started and stopped by its owner.
//
// A Service sweeps at an interval that follows the age (a tenth of it, at
// most a minute, so that -retain 3s works in tests). A sweep removes, in
// batches of Options.BatchSize read oldest first from the tail of the
// store's ordering index, the terminal tasks (completed, failed, canceled,
// rejected) whose storage update time is older than Options.Age, and with
// Options.StuckAge set the other tasks older than that; it pauses
// Options.Pause between batches so that writers and readers are not
// starved, and stops promptly when its context ends or Close is called
// (the batch in flight finishes or is cancelled; a batch is all or
// nothing per task, never half a task).
//
// Removal is a Delete in the contract's sense: lists, totals, counters and
// owners' counts stay exact, and traversals in progress keep L7. With
// several servers sharing one PostgreSQL, give the service the store as
// Options.Locker (pgstore.Store.TryRetentionLock): a sweep runs only on
// the server that holds the schema's advisory lock; the others skip it.
// The lock ends with its connection's session; before each batch the
// sweep asks whether it still holds it (LockWatcher) and stops if not.
//
// Sweep runs one sweep by hand (a2astore-server -retain-once). Metrics
// (a prometheus.Collector): tasks removed, batches, sweeps by result, the
// last completed sweep's time, and the age of the oldest terminal task the
// last sweep kept.
package retention
