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
// New creates, idempotently and under an advisory lock, three tables in
// Options.Schema: a2a_cluster_work (one row per execution or cancelation
// request), a2a_cluster_events (one row per event an execution applied
// to the store) and a2a_cluster_push_configs (PushConfigs, a
// push.ConfigStore shared by the instances). SchemaSQL is the same DDL for deployments that manage the
// schema themselves.
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
// finished as FAILED with a status message saying why. So no task stays
// SUBMITTED or WORKING forever, and -finish-abandoned is not needed.
//
// A CancelTask on any instance is a cancel item; the instance that runs it
// lets the agent write CANCELED (a conditional write by revision, as every
// store write of a2a-go is) and then notifies the instance holding the
// execution's lease, which cancels the execution's context (K3). The old
// execution's later writes fail on the revision, so CANCELED stays.
//
// # Event queue (K2)
//
// Each event an execution writes is a row keyed by (task, seq), seq
// counting 1, 2, … per task in commit order, carrying the store revision
// after the event as its TaskVersion. A reader starts after the last seq
// at its creation and reads rows in seq order but delivers them in
// version order: the store write and the event insert are separate
// steps, so two writers of a task (an execution and a cancel) may insert
// their events in the reverse order of their revisions. An event ahead of
// the last delivered version plus one is held, woken by notifications,
// until the missing one arrives or Options.GapTimeout (default 1 s)
// passes — not every revision has an event (a2a-go's history update of a
// message to an existing task has none), so the wait is bounded; then it
// is delivered and Stats.GapsSkipped counts it. Per reader, versions
// strictly increase (an event at or below the last delivered version — a
// duplicate written by a losing concurrent writer — is skipped). Inserts
// NOTIFY; one LISTEN connection per instance (listener.go) wakes the
// readers of the task. When that connection drops it reconnects and wakes
// every reader, which catch up from the table: nothing is lost. A long
// safety-net poll (Options.PollInterval, default 10 s) covers a
// notification that never came.
//
// # Identity (K5)
//
// The caller's identity travels in the work item: a2a-go encodes the call
// context (user, tenant, service parameters) into Payload.CallContext and
// decodes it on the executing instance, where the store's authorization
// policy and the server's task guard apply as on any other call.
//
// # Retention (K6)
//
// Work items and events are rows in PostgreSQL, committed before a call is
// acknowledged: an instance or a database restart loses none. The cleaner
// (cleaner.go) deletes, in bounded batches, finished work items older than
// Options.Retention (default 1 h) and the events and push configs of tasks
// whose final event is older than Options.Retention, so the tables stay
// bounded by the work of the last Retention.
package pgcluster
