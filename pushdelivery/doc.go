// Package pushdelivery delivers A2A push notifications durably: the
// push-notification configurations of tasks with the delivery state of
// each webhook (an Outbox on the store's backend), and workers that read
// each task's event log (engine.LogStore, SPEC K7) and POST its events to
// the task's webhooks, at least once, in log order per task and webhook,
// with retries and backoff up to a deadline.
//
// The outboxes:
//
//   - NewMemory: best effort, gone with the process (as the memory store).
//   - OpenPebble: the same records written through, synced, to a Pebble
//     database of their own; leases are local to the process.
//   - NewPG: a table beside pgstore's a2a_tasks that any instance claims
//     from (FOR UPDATE SKIP LOCKED, then a lease token and expiry on the
//     row); a claimer that dies loses its records when the lease ends.
//
// Every outbox passes outboxtest.Run. ConfigStore is a2a-go's
// push.ConfigStore over any of them: it validates configurations and
// starts each webhook's cursor at its task's revision.
package pushdelivery
