// Package authz is an authorization dispatcher for any engine.Store.
//
// New wraps a Store with a Policy. The returned *Dispatcher is itself an
// engine.Store that shows each caller only the tasks the policy lets it
// access (SPEC A1–A8):
//
//   - List narrows the request with Policy.ScopeTaskList before anything is
//     read (A1); the store reads apply the caller's filters and the scope's
//     together. When the policy says the scope is exact (ExactScoper), the
//     store's page and total are the answer, in one store call, each task
//     still checked; a task the check denies fails the call closed.
//     Otherwise the dispatcher scans the narrowed result in batches of at
//     most 100 tasks in the policy's projection (A3, A4), checking the
//     policy on every task before it is counted or selected (A2). It holds
//     at most one batch and one page at a time, whatever the number of
//     tasks.
//   - The selected tasks are re-read in full and re-checked, against the
//     request's filters and the policy, before they are returned, each with
//     the content and cursor of that read (A5). A task deleted or changed in
//     between makes the call scan again, so page, token and total come from
//     one scan, at most MaxScans times: then the call returns the tasks that
//     survived the last final read (a short page), or ErrListContention if
//     none did while more follow. A task unchanged but revoked in between
//     fails the call with the error Get gives for an inaccessible task.
//     Light requests are not re-read: the light tasks the scan authorized
//     are re-checked and returned.
//   - Get, Cancel, Replace, AppendHistory and Delete of a task the caller
//     cannot access fail with the very error a missing task gets (A6).
//   - A write acts only on the version of the task it checked (A9): Replace
//     on the checked revision, Cancel, AppendHistory and Delete through the
//     store's conditional writes (engine.ConditionalStore). A task another
//     writer changed in between is checked again (at most MaxWriteAttempts
//     times for Cancel, AppendHistory and Delete, then ErrWriteContention;
//     until ctx ends), so a caller never changes a task that was
//     inaccessible to it at the moment of the write. Over a store without
//     conditional writes these three fail closed
//     (engine.ErrConditionalUnsupported).
//   - A store that returns TaskCursors missing or misaligned with Tasks makes
//     List fail closed with ErrInternal and no tasks (A7); so do TaskOwners
//     missing, misaligned or of another owner when the dispatcher needs
//     them (an owner filter, or a policy deciding by owner).
//
// Page tokens stay unbound to caller and filters (T7): a token is only a
// boundary, applied to whatever the next caller may see. Bad tokens fail with
// engine.ErrInvalidPageToken before the policy is consulted, so the error
// never depends on the caller's scope (T4).
//
// # Tenancy: owners recorded by the store
//
// A store that is an engine.OwnerStore records an owner beside each task,
// fixed at Create (clauses O1–O6 on engine.OwnerStore), filters and counts
// lists by it with its own indexes and counters, and lists each task's
// owner. The dispatcher is an engine.OwnerStore itself (CreateOwned), and a
// policy takes part through optional interfaces, so the Policy interface
// of SPEC §0 is unchanged and a policy without them works as before:
//
//   - OwnerChecker: decisions that need the owner (CanAccessOwned), asked
//     instead of CanAccessTask everywhere, with the owner the store
//     recorded (or, for a Create, will record);
//   - OwnerAssigner: who owns what a caller creates (CreateOwner); the
//     dispatcher records it with the store's CreateOwned, and over a store
//     that records no owners fails with engine.ErrOwnersUnsupported rather
//     than store a task without its owner;
//   - ExactScoper: scopes whose every match the policy allows
//     (ScopeIsExact), answered in one store call.
//
// OwnerPolicy implements all three: the caller who creates a task owns it;
// a caller lists (ListRequest.Owner set to its identity), reads and
// mutates only its own tasks; what a page or a total costs does not depend
// on other callers' tasks. A caller without identity cannot list or create
// (ErrUnauthenticated, as a2a-go's taskstore.InMemory refuses to list
// without a user). Identities come from CallerFrom: WithCaller, else the
// authenticated user of the a2a-go call context
// (a2asrv.CallContextFrom(ctx).User, where a2a-go's authentication puts it).
//
// The empty owner means no owner: Create through a dispatcher whose policy
// assigns none, or a store's Create, records "", and an owner filter of ""
// filters nothing. Under OwnerPolicy a task without owner is nobody's.
//
// Older data: before #15 OwnerPolicy kept the owner in the task's metadata
// under "a2astore.owner". Nothing reads or writes that key any more; the
// backends move it into the store (Pebble upgrades its database on open,
// PostgreSQL backfills its owner column from it).
//
// # Other policies
//
// A Policy may also implement Stamper to change the content of Create and
// Replace (for example to record something in the task's metadata); the
// content written must then pass the policy's check, or the write fails
// with ErrDenied.
//
// ContextAllowList lets the caller see a set of context IDs. AllowAll
// admits everything (the dispatcher then passes calls straight to the
// store); it exists for tests and single-tenant servers.
//
// The Dispatcher forwards Close (io.Closer) and CheckInvariants
// (engine.Checker) to the store it wraps, offers the conditional writes
// (engine.ConditionalStore) with access checked, so a caller holding only the
// dispatcher can release the store, and the conformance suite checks the
// store's invariants through it.
package authz
