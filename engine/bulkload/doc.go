// Package bulkload fills a store with a generated data set: the bulk path
// of loadgen's -initial and of the conformance suite's bulk clause (SPEC
// X1). Load writes N tasks, made by the caller's generator, through the
// store's engine.Importer in batches (one transaction each: Pebble
// batches, PostgreSQL COPY) when the store has one, and otherwise through
// Create (CreateOwned for owned tasks) from a few goroutines.
//
// What it guarantees:
//
//   - Exact state. Every task imported is valid stored state
//     (engine.ValidateStoredTask): revision 1, its owner, and the log
//     entry Create would have written (engine.NewLogEntry, revision 1, at
//     the task's time) when the store keeps a log. The store maintains
//     its counters and indexes as for any write, so totals (by state,
//     context and owner), pages and logs are exact after a load.
//   - Ordered times, in the past. Task i is stored at origin + i µs, the
//     times strictly increasing with i as Creates one after another would
//     leave them, and the last one before the store's clock reading when
//     the load began, so writes after the load sort newer.
//   - Resumable. A load that stopped (error, canceled context, killed
//     process) and is run again with the same generator continues where
//     it stopped: batches the store holds are found (the first and last
//     task of each read back and compared) and skipped, a batch partly
//     there is completed, and the times continue from the last task
//     found. (Only the first and last of a batch are read: a task
//     deleted since from inside a batch found whole is not written
//     back.) No task is written twice (an ID the store holds fails an
//     import with engine.ErrAlreadyExists, and is counted as found by the
//     Create path) and none is left out.
//   - Progress: a line with the count, the percentage and the rate to
//     Config.Progress at most once per Config.ProgressEvery, and a last
//     one; Result gives the rate.
package bulkload
