// Package pgcluster is the PostgreSQL backbone of a2a-go's cluster mode
// (a2asrv.WithClusterMode): a work queue (workqueue.Queue) and an event
// queue (eventqueue.Manager) in two tables of their own on the database
// that holds the tasks (pgstore), so that N server instances behave as one
// A2A service (SPEC K1–K6). The task store itself is not here: it is
// pgstore through a2aserver.TaskStore, whose versions are the store's
// revisions.
//
// # Tables
//
// New creates, idempotently and under an advisory lock, two tables in
// Options.Schema: a2a_cluster_work (one row per execution or cancelation
// request) and a2a_cluster_events (task-less replies; the release before
// the task log kept every event there). Push-notification configurations
// and their delivery are package pushdelivery's (its PostgreSQL outbox,
// shared by the instances; the release before kept them in
// a2a_cluster_push_configs, which nothing reads any more). SchemaSQL is
// the same DDL for deployments that manage the schema themselves. The
// task log is the store's (pgstore.LogMigrationFile); each entry keeps
// the traceparent of the write that made it (pgstore.LogTraceMigrationFile,
// SPEC H2), so an instance that delivers another's events joins its trace.
//
// Upgrading from the release before the task log: stop every instance of
// the old release, then start the new ones (a mixed cluster is not
// supported: old instances write events to a2a_cluster_events, which new
// readers do not follow). Work items carry over; the events of the old
// table stay readable there until the cleaner drops them after
// Options.Retention.
//
// # Work queue (K3, K4)
//
// A work item is claimed with FOR UPDATE SKIP LOCKED, which gives it a
// lease: a random token and an expiry Options.LeaseTimeout (default 30 s)
// ahead, renewed by a2a-go's Heartbeater every third of it. Complete,
// Return and Heartbeat are fenced by the token, so an instance whose lease
// was taken over cannot touch the item again. At most one execution item
// per task is open (a unique partial index), so at most one instance
// executes a task at a time (K4). The lease rescuer (rescuer.go) returns
// the items of dead instances to the queue once their lease expired: the
// next attempt re-runs the execution with a2a-go's retry semantics (the
// stored task is resumed); after Options.MaxAttempts attempts the task is
// finished as FAILED with a status message saying why (without it when the
// task is at the store's size limit), and a caller waiting for a new task
// that was never stored gets ErrGaveUp. So no task stays SUBMITTED or
// WORKING forever, no caller waits forever, and -finish-abandoned is not
// needed. A give-up that fails is set aside and tried again later; it
// never stops the rescue of the other items.
//
// A CancelTask on any instance is a cancel item; the instance that runs it
// lets the agent write CANCELED (a conditional write by revision, as every
// store write of a2a-go is) and then notifies the instance holding the
// execution's lease, which cancels the execution's context (K3). The old
// execution's later writes fail on the revision, so CANCELED stays.
//
// # Event queue (K2, K7)
//
// There is no event table to write: the task store keeps the task log
// (engine.LogStore; pgstore with StoreOptions), one entry per revision,
// inserted by the very statement that makes the revision and NOTIFYing
// the cluster's channel in the same transaction. An event is committed
// exactly when its revision is, so no crash, handover or restart can
// leave a revision without its event or an event without its revision.
// A reader follows the log of its task (tasklog.Tail) from the revision
// the task had when the reader was created, in revision order with no
// gaps to wait for; history revisions (a message added to the history)
// deliver nothing. One LISTEN connection per instance (listener.go) wakes
// the readers of the task; when it drops it reconnects and wakes every
// reader, which catch up from the log. A long safety-net poll
// (Options.PollInterval, default 10 s) covers a notification that never
// came. An entry that leaves the task terminal or interrupted is
// delivered without TaskVersion: a2a-go v2.3.1's remote subscription
// reads its snapshot after writing the work item and skips events at or
// below the snapshot's version, which would skip a final event committed
// before the snapshot and leave the call waiting forever. The one event
// without a revision, a Message answering a new task that is never
// stored, goes to a2a_cluster_events.
//
// # Cancel and exactly-once answers (K3, K8)
//
// A cancel is state: CANCELED in the task. Besides the notification of a
// finished cancelation, the executing instance reads its task's state on
// every heartbeat (a third of the lease) and after its notification
// connection comes back, and stops an execution whose task is CANCELED.
// A Complete that fails is retried while the lease holds. One answered
// check (answered.go) decides whether an execution's message was answered
// already — a task-less reply, or an entry in a terminal or interrupted
// state after the one that brought the message in — and every path that
// could run a message again or fail its task goes through it: a claim of
// an item claimed before (a retry, a takeover, the first attempt after a
// handover), Return (a failed or handed-over attempt) and the give-up.
// An answered item is completed without running the agent and its task
// is left as the answer left it; a check that cannot read decides
// nothing (the item waits). A follow-up message to a task whose previous
// execution already wrote its final entry waits, woken by that
// execution's completion notification, for at most 2 lease timeouts,
// instead of being refused as in progress; its reader delivers only the
// entries after the revision its own execution starts from, never the
// previous turn's final one.
//
// # Identity (K5)
//
// The caller's identity travels in the work item: a2a-go encodes the call
// context (user, tenant, service parameters) into Payload.CallContext and
// decodes it on the executing instance, where the store's authorization
// policy and the server's task guard apply as on any other call.
//
// # Traces (H2)
//
// A work item's stored body carries the W3C trace context (traceparent,
// tracestate) of the call that wrote it, beside a2a-go's payload. With
// Options.Tracer the instance that claims the item runs it in a span
// that is a child of that context (trace.go), so the client's trace
// continues through the executing instance and everything it writes.
//
// # Retention (K6)
//
// Work items are rows in PostgreSQL, committed before a call is
// acknowledged: an instance or a database restart loses none. The cleaner
// (cleaner.go) deletes, in bounded batches, finished work items, replies
// and old event rows older than Options.Retention (default 1 h); a
// task's log goes with the task, and tasklog.Trimmer trims the logs
// of tasks idle for the log retention. So every table stays bounded by
// the work of the last retention window.
package pgcluster
