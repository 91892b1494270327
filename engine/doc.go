// Package engine is the a2astore contract: the types every backend shares
// (Cursor, Record, Projection, ListRequest, ListResponse), the Store
// interface, its sentinel errors, the v1 page-token codec, the clock rules
// (CreateTime, NextTime) and the request validation all backends apply the
// same way (ParseListRequest, ValidateTask, ValidateID, ValidateMessage,
// ValidateExpectedRevision, KnownState).
//
// Limits bound the size and nesting of the tasks a store accepts, so that
// every stored task can be served to any A2A client; every backend applies
// them, identically, before writing.
//
// It imports no backend. Backends (engine/memstore, pebblestore, pgstore)
// import it and assert var _ engine.Store = (*Store)(nil); decorators such as
// engine/authz and engine/storemetrics wrap any Store. What backends share
// beyond the contract lives beside it: engine/taskcodec (the stored binary
// form of a task) and engine/listpage (filters, trimming and page assembly
// for a validated Query).
//
// Tenancy is an optional part of the contract: an OwnerStore records an
// owner per task and filters and counts lists by it (clauses O1–O6, written
// out on OwnerStore, beside SPEC.md's). Retention is another: a Retainer
// removes expired tasks in bounded batches from the tail of its ordering
// index (R1, R2, written out on Retainer); engine/retention runs it at an
// interval, and AsRetainer sees through decorators.
//
// Conditional writes are an optional part too: a ConditionalStore's
// CancelIf, AppendHistoryIf and DeleteIf act only on the revision the
// caller read, as Replace does, which the authorization dispatcher needs
// to write only the version it checked (SPEC A9).
//
// Clause ids (S1, T3, L7, …) refer to SPEC.md in the repository's shared
// documentation; tests cite them by name.
package engine
