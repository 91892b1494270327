package engine

import (
	"bytes"
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Clock returns the current time in microseconds since the Unix epoch. A
// reading below 0 counts as 0 (S5).
type Clock func() int64

// WallClock is the default Clock: time.Now in microseconds.
func WallClock() int64 { return time.Now().UnixMicro() }

// Cursor is where a task sits in list order (S6): UpdatedAt descending, then
// ID descending in byte order. It is also the boundary a page token encodes.
type Cursor struct {
	UpdatedAt int64      // storage last-update time, µs since the Unix epoch
	ID        a2a.TaskID // tie-breaker, compared as raw bytes
}

// Compare orders cursors in list order: it is negative when c is listed
// before d (newer, or equally new with a greater ID), zero when equal and
// positive when c is listed after d.
func (c Cursor) Compare(d Cursor) int {
	switch {
	case c.UpdatedAt > d.UpdatedAt:
		return -1
	case c.UpdatedAt < d.UpdatedAt:
		return 1
	}
	return -bytes.Compare([]byte(c.ID), []byte(d.ID))
}

// Record is a stored task with its revision and list position.
type Record struct {
	Task     *a2a.Task
	Revision int64  // 1 after Create, +1 per successful mutation (S7)
	Cursor   Cursor // where the task sits in list order now
	// Owner is the task's owner, fixed at Create (O1, O2); "" = none.
	// Stores that do not record owners (see OwnerStore) leave it "".
	Owner string
}

type withoutTaskKey struct{}

// WithoutTask returns ctx for writes whose caller reads only the Revision,
// Cursor and Owner of the Record they return: Create, CreateOwned and
// Replace made with it return the Record with Task nil, so the store makes
// no copy of the stored task (L9) for a caller that would drop it. The
// adapter to a2a-go writes this way (taskstore.Store's Create and Update
// return a version only); decorators forward it without knowing it, as
// they do WithEvent. What is stored, and every other call, is unchanged.
func WithoutTask(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutTaskKey{}, true)
}

// TaskWanted reports whether a write made with ctx returns its task: false
// under WithoutTask.
func TaskWanted(ctx context.Context) bool {
	without, _ := ctx.Value(withoutTaskKey{}).(bool)
	return !without
}

// Projection selects how much of each task List returns.
type Projection int

const (
	// ProjectionFull (the zero value) returns whole tasks, trimmed by the
	// request's HistoryLength and IncludeArtifacts.
	ProjectionFull Projection = iota
	// ProjectionLight returns ID, ContextID, Status.State, Status.Timestamp
	// and Metadata only (no status message, no history, no artifacts), read
	// without decoding the rest of the task.
	ProjectionLight
)

// ListRequest asks for one page of a ListTasks traversal.
//
// The page holds the tasks matching the filters strictly after the boundary
// encoded in PageToken, in list order (L1, L2, S6): UpdatedAt descending, then
// ID descending in byte order. Filters apply before the boundary. A traversal
// starts with an empty PageToken and copies NextPageToken unchanged into the
// next request until it is empty (T1).
//
// Traversals are live, not snapshots (L7): over one traversal cursors strictly
// descend, no task ID appears twice (unless deleted and re-created), every
// task that existed at the start and was neither mutated nor deleted during
// the traversal appears exactly once, a task mutated during the traversal
// appears at most once, and equal-time inserts after the ID boundary may
// appear in later pages.
type ListRequest struct {
	ContextID            string        // exact match; "" = any context
	Status               a2a.TaskState // unspecified = any state; unknown = ErrInvalidArgument
	StatusTimestampAfter *time.Time    // keep tasks with Status.Timestamp >= this; tasks without one never match
	PageSize             int           // 0 = 50; valid 1..100 (L3)
	PageToken            string        // "" = start; otherwise a token from NextPageToken (T1–T7)
	HistoryLength        *int          // nil = all; 0 = none; n = last n; <0 invalid (L4)
	IncludeArtifacts     bool          // false: returned tasks carry no artifacts (L4)
	IncludeTotalSize     bool          // internal: fill TotalSize (L5); false skips the count entirely
	Projection           Projection    // internal: ProjectionLight for cheap scans (A4)
	// Owner keeps only the tasks of this owner (O3); "" = any owner. Only
	// an OwnerStore honours it: set it on no other store (the dispatcher
	// and the wire adapter refuse to).
	Owner string
}

// ListResponse is one page.
type ListResponse struct {
	Tasks         []*a2a.Task
	TaskCursors   []Cursor // internal: aligned with Tasks, one per task, as read (L6)
	NextPageToken string   // non-empty only when another matching task follows the last returned one (T6)
	PageSize      int      // the page size used
	TotalSize     int      // only when IncludeTotalSize: every matching task, ignoring the boundary (L5)
	// TaskOwners is internal: aligned with Tasks, the owner of each task as
	// read (O5). An OwnerStore fills it on every page; other stores leave
	// it nil.
	TaskOwners []string
	// Stats is internal: what the call cost, for benchmarks and metrics.
	// It never reaches the wire (nor a JSON encoding of the response).
	Stats ListStats `json:"-"`
}

// Store is the a2astore contract. Every method is safe for concurrent use.
//
// Storage update time (S1–S5): every task has UpdatedAt, independent of
// Status.Timestamp. Create sets it to clock() (clamped at 0); Replace,
// Cancel and an AppendHistory that adds a message advance it to
// max(clock(), old+1), so each task's time moves forward by at least 1 µs
// even when the clock goes backward. A task whose time is math.MaxInt64 can
// no longer be mutated: further mutations fail with ErrInternal and change
// nothing. Rejected writes, revision conflicts, rejected cancellations and
// deduplicated appends change nothing at all (S3).
//
// Times are 0..math.MaxInt64 (S5), and so is every cursor a store returns.
// A backend whose storage can hold other times (rows another program wrote
// into a shared database) says what it does with them, within two rules: a
// List never fails because of a stored time, and never hands out a token
// it would reject (pgstore leaves such rows out of lists).
//
// Revisions (S7): 1 after Create, +1 on every successful mutation.
//
// IDs (S8): task IDs are non-empty and at most 1024 bytes; context IDs at
// most 1024 bytes. Backends state which bytes they accept; an ID a backend
// cannot store is ErrInvalidArgument, never ErrInternal.
//
// Returned tasks are copies (L9): mutating them never changes the store, and
// a task passed in is never retained. A caller that drops the task a
// Create or Replace returns asks for none with WithoutTask.
//
// Conditional writes: Replace takes the revision the caller read; a
// ConditionalStore offers the same for Cancel, AppendHistory and Delete.
// The authorization dispatcher (engine/authz) needs them so that a write
// acts only on the version of the task it checked (SPEC A9): over a store
// without them its Cancel, AppendHistory and Delete fail closed with
// ErrConditionalUnsupported.
type Store interface {
	// Create stores a new task at revision 1 and time clock(). An existing
	// ID fails with ErrAlreadyExists.
	Create(ctx context.Context, task *a2a.Task) (Record, error)
	// Get returns the whole task, or ErrNotFound.
	Get(ctx context.Context, id a2a.TaskID) (Record, error)
	// Replace stores task as the new content of task.ID. expectedRevision 0
	// replaces unconditionally; otherwise it must equal the stored revision
	// (else ErrRevisionConflict). A negative expectedRevision is bad input:
	// ErrInvalidArgument, decided before the store is read, so a missing
	// task gets it too and it is never a conflict (ValidateExpectedRevision).
	// Replace advances time and revision even when the content is
	// identical, may change the context ID and is allowed on terminal tasks
	// (S7).
	Replace(ctx context.Context, task *a2a.Task, expectedRevision int64) (Record, error)
	// Cancel moves a non-terminal task to TaskStateCanceled with
	// Status.Timestamp set to the new UpdatedAt and the status message
	// cleared (S9). A terminal task fails with ErrNotCancelable.
	Cancel(ctx context.Context, id a2a.TaskID) (Record, error)
	// AppendHistory appends msg to the task's history. A message whose ID is
	// already in the history is not appended again: the call succeeds and
	// returns the current record unchanged (S3). A nil message or one with
	// an empty ID is ErrInvalidArgument.
	AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (Record, error)
	// Delete removes a task; later lists never show it (S9).
	Delete(ctx context.Context, id a2a.TaskID) error
	// List returns one page; see ListRequest. Count and page are read from
	// one consistent view (L8).
	List(ctx context.Context, req *ListRequest) (*ListResponse, error)
}

// OwnerStore is a Store that records task owners: the tenancy part of the
// contract, an optional interface so that stores written against Store
// keep compiling. A custom store takes part by implementing CreateOwned,
// filling Record.Owner and ListResponse.TaskOwners and honouring
// ListRequest.Owner; storetest.Run then runs the owner clauses against it.
//
//   - O1 An owner is fixed at Create: CreateOwned records owner (at most
//     MaxOwnerBytes bytes; a backend accepts the same bytes in owners as in
//     IDs, S8); Create records "" (no owner). The owner lives beside the
//     task: it is never read from or written into the task's metadata.
//   - O2 Every Record returned carries the stored owner, and no mutation
//     changes it: Replace keeps the owner whatever the new content says.
//   - O3 ListRequest.Owner keeps only that owner's tasks, combined (and)
//     with ContextID, Status and StatusTimestampAfter; "" means any owner
//     (there is no filter for tasks without an owner). Filters apply before
//     the boundary, and tokens are not bound to the owner (T7).
//   - O4 TotalSize counts the matching tasks of the owner only (L5).
//   - O5 ListResponse.TaskOwners[i] is the owner of Tasks[i] as read (L6).
//   - O6 Isolation of cost: an owner-filtered page and its total read only
//     entries of that owner, however many tasks other owners have. Pages
//     filtered by owner, or by owner and context, seek once and visit
//     PageSize+1 entries (C2); totals by owner, and by owner and state, come
//     from maintained counters.
type OwnerStore interface {
	Store
	// CreateOwned is Create recording owner as the task's owner (O1).
	CreateOwned(ctx context.Context, task *a2a.Task, owner string) (Record, error)
}

// Checker is a capability a Store may have beyond the contract: verifying
// its own internal consistency (every task indexed once at its cursor,
// counters equal to a recount, …). It reads the whole store and is meant
// for tests: storetest.Run calls it when each subtest ends. Decorators
// (engine/authz, engine/storemetrics) forward it to the store they wrap, as
// they forward Close (io.Closer).
type Checker interface {
	CheckInvariants() error
}
