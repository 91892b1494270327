// Package pushdelivery delivers A2A push notifications durably: the
// push-notification configurations of tasks with the delivery state of
// each webhook (an Outbox on the store's backend), and workers that read
// each task's event log (engine.LogStore, SPEC K7) and POST its events to
// the task's webhooks, at least once, in log order per task and webhook,
// with retries and backoff up to a deadline.
//
// The contract (SPEC N1–N4):
//
//   - N1 Push configs live beside the task's store on every backend (an
//     Outbox), under the task's owner policy (the server's TaskGuard
//     answers for a task the caller cannot see before any config is read);
//     they go with their task (Outbox.Sweep, once the task has been gone
//     for a grace period: a2a-go saves a SendMessage's config before the
//     task's first write), and never serve a later task created under
//     the same ID: a record keeps the incarnation its task had when
//     saved (Record.Incarnation, the store's deletion mark), and one
//     whose task was deleted since is dropped unsent, hidden by
//     ConfigStore and removed by a save for the later task.
//     ConfigStore.ListPage pages with a token of its own.
//   - N2 Every logged event of a task is delivered at least once to every
//     config of the task that existed when it was logged, in log order per
//     config (a config's cursor starts at its task's revision when saved);
//     failures are retried with exponential backoff and full jitter until
//     Options.Deadline, then the event is dropped and counted (so are,
//     unsent, the events of a destination set aside past it: fair.go,
//     and any event whose turn comes more than the deadline after it was
//     logged: a webhook too slow for its events, or a server that was
//     down longer; Worker.entryFate).
//     A delivery is repeated only when its lease was lost (a crash, a
//     claim that ran past the lease) before the commit.
//   - N3 NewClient connects only to allowed addresses, checked on the
//     address actually dialed (after DNS): no loopback, private,
//     link-local, metadata, CGNAT, multicast or unspecified address, nor
//     an IPv4-mapped or NAT64 form of one, unless AllowPrivate; no proxy,
//     no redirects, bounded time and response size; tokens and credentials
//     are never logged nor in metrics.
//   - N4 The worker schedules fairly (fair.go states the bound): one
//     owner's deliveries hold at most Options.PerOwner workers, owners
//     with nothing in flight and healthy destinations first, a claim's
//     posts within one client timeout, a circuit breaker per
//     destination whose recovery makes its waiting records due at once
//     (Recoverer); the client caps its connections (ClientOptions.
//     MaxConns); a record that cannot be read is set aside and counted,
//     never blocking the others. Claims, rescans and Depth cost the
//     records behind, not the records stored (C6).
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
// With Options.Tracer each POST is a span, a child of the span that
// wrote the event (the traceparent its log entry keeps, on whichever
// instance wrote it; else as the Sender saw it, in this process), and
// carries its W3C traceparent to the webhook (trace.go; SPEC H2).
//
// Every outbox passes outboxtest.Run. ConfigStore is a2a-go's
// push.ConfigStore over any of them: it validates configurations and
// starts each webhook's cursor at its task's revision.
package pushdelivery
