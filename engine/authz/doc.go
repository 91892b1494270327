// Package authz is an authorization dispatcher for any engine.Store.
//
// New wraps a Store with a Policy. The returned *Dispatcher is itself an
// engine.Store that shows each caller only the tasks the policy lets it
// access (SPEC A1–A8):
//
//   - List narrows the request with Policy.ScopeTaskList before anything is
//     read (A1), then scans the narrowed result in batches of at most 100
//     tasks in the policy's projection (A3, A4), checking
//     Policy.CanAccessTask on every task before it is counted or selected
//     (A2). It holds at most one batch and one page at a time, whatever the
//     number of tasks.
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
//   - A store that returns TaskCursors missing or misaligned with Tasks makes
//     List fail closed with ErrInternal and no tasks (A7).
//
// Page tokens stay unbound to caller and filters (T7): a token is only a
// boundary, applied to whatever the next caller may see. Bad tokens fail with
// engine.ErrInvalidPageToken before the policy is consulted, so the error
// never depends on the caller's scope (T4).
//
// A Policy may also implement Stamper to record ownership on Create and
// Replace; the content written must then pass CanAccessTask, or the write
// fails with ErrDenied.
//
// Two ready policies are provided: OwnerPolicy (the caller who created a
// task owns it) and ContextAllowList (the caller sees a set of context IDs).
// AllowAll admits everything (the dispatcher then passes calls straight to
// the store); it exists for tests and single-tenant servers.
//
// The Dispatcher forwards Close (io.Closer) and CheckInvariants
// (engine.Checker) to the store it wraps, so a caller holding only the
// dispatcher can release the store, and the conformance suite checks the
// store's invariants through it.
package authz
