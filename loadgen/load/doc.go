// Package load is the load generator behind the loadgen command: it drives an
// a2astore task store — embedded (mem, pebble, pg) or a remote A2A server over
// JSON-RPC, HTTP+JSON or gRPC — with a named workload mix, records latencies
// per operation in HDR histograms, and checks the live-traversal guarantees
// (SPEC L7) while writers run.
//
// Everything is in a Config passed to Run; there are no globals, so tests
// run several loads in one process:
//
//	res, err := load.Run(ctx, load.Config{Workload: "traversal-under-churn", Ops: 20000})
//	if err != nil { … }          // the run could not be done (bad config, store down)
//	res.WriteTable(os.Stdout)
//	if err := res.Err(); err != nil { … } // invariant violations or internal errors
//
// # What is checked under load
//
// Traversals (full ListTasks walks copying NextPageToken) run beside the
// writers. Over each traversal the checker verifies, live:
//   - cursors strictly descend (embedded: each task's cursor; remote: the
//     boundary decoded from each NextPageToken);
//   - no task ID appears twice;
//   - every task loadgen knows existed at the traversal's start and that no
//     loadgen write touched (began, was in flight or finished) during the
//     traversal appears exactly once.
//
// Any violation is recorded with the run's seed and details; Result.Err
// reports it. Errors are classified (invalid_argument, not_found,
// not_cancelable, conflict, already_exists, internal, transport); any
// internal error fails the run as well.
//
// # Push notifications
//
// Against a server, Config.PushURL creates every task with a push
// notification configuration, and Config.PushReceiver runs a webhook
// receiver that books each delivery by task and A2A-Task-Revision: a
// revision received after a higher one of its task is an order violation,
// one received twice a duplicate (at-least-once delivery allows those).
// After the run it waits Config.PushGrace for the terminal event of every
// task loadgen saw reach a terminal state; the ones still missing are
// losses. Order violations, malformed deliveries and losses fail the run.
// Config.PushDown closes the receiver for a while every Config.PushEvery,
// so the server's retries are exercised.
package load
