package authz

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/listpage"
)

// BatchSize is the most tasks one scan batch asks the store for (A3).
const BatchSize = 100

// List returns one page of the tasks the caller may access.
//
// The request is validated first, so a bad token or page size fails the same
// way for every caller (T4). The policy then narrows it (A1): the store
// reads apply the caller's filters and the scope's together (an owner
// filter included, which only a store recording owners can apply: another
// store makes an owner-filtered List fail with engine.ErrOwnersUnsupported).
// A caller the policy refuses to list for (ErrUnauthenticated) gets that
// error, after the store has judged its page token.
//
// When the policy says the scope is exact (ExactScoper, as OwnerPolicy's
// is), the answer is one store call: the store's page, token and total as
// they are, each task still checked against the caller's filters and the
// policy, any failure failing the call closed (engine.ErrInternal, no
// task). Its cost is the store's: an owner's page reads PageSize+1 entries
// and its total comes from the store's counters, however many tasks other
// owners hold (O6). A page is one store read, so each task carries the
// content, cursor and owner of that read (A5, L6).
//
// Otherwise the narrowed result is scanned in list order, in batches of at
// most BatchSize tasks read in the policy's projection (A3, A4). Every
// scanned task is checked against the caller's filters and the policy
// before it is counted or selected (A2): the total counts every accessible
// match, ignoring the boundary (L5); the page takes the first PageSize
// accessible tasks strictly after the boundary and notes whether one more
// exists.
//
// Whenever the dispatcher needs owners (an owner filter, or a policy that
// decides by owner, OwnerChecker), a store page whose TaskOwners are missing
// or misaligned with its tasks, or name another owner than the filter's,
// fails the call closed with engine.ErrInternal and no tasks, as misaligned
// cursors do (A7). Over a store that records owners, every page the
// dispatcher returns carries TaskOwners (O5).
//
// The batches are separate store calls: a scan may observe writes between
// them, so a total is the count of authorized observations during the scan,
// not a snapshot (A8).
//
// Without a total, the scan starts at the boundary and stops once the page
// and its look-ahead are found. With a total it starts at the top of the
// narrowed result and runs to its end. Either way the store receives the
// request's page token, so it rejects a boundary it cannot represent
// exactly as it would without the dispatcher (T4).
//
// The selected tasks are then re-read whole with Get and re-checked against
// the request's filters and the policy (A5); each is returned with the
// content and cursor of that read. A task deleted or changed in between (no
// longer at the cursor it was selected at, or no longer matching the
// filters) is a concurrent write like any other: List scans again (the new
// scan no longer selects it where it was), so page, token and total come
// from one scan. Rescans are bounded: List scans at most MaxScans times
// and stops with ctx's error when ctx ends between scans. If the final read
// of the last scan allowed still finds selected tasks deleted or changed,
// List returns the others, as read, with that scan's total less the tasks
// left out and, when more tasks follow, a token at the last one returned:
// a short page, but a valid step of a live traversal (L7), since what it
// leaves out was deleted or moved ahead. If it left out every selected
// task while more follow, no such page exists, and List fails with
// ErrListContention (an engine.ErrInternal; retry).
//
// A task unchanged since its selection that the policy now denies was
// revoked: it fails the call with the error Get gives for an inaccessible
// task. Changes to tasks the caller cannot see never reach the final read,
// so rescans depend on visible tasks only. A light request
// (engine.ProjectionLight) is not re-read: it returns the light tasks the
// scan read, with the cursors of that read, re-checked with the policy just
// before returning, so what it returns is exactly what was authorized.
// Stats is the sum of what the store calls of this List cost (every batch
// of every scan).
func (d *Dispatcher) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	if q.Owner != "" && d.owners == nil {
		return nil, errOwnersUnsupported
	}
	if d.open {
		return d.passThrough(ctx, &q, req)
	}
	p := newPager(q)
	scoped, err := d.policy.ScopeTaskList(ctx, *req)
	var scan engine.ListRequest
	if err == nil {
		var ok bool
		if scan, ok = narrow(req, &scoped); !ok {
			err = ErrEmptyScope // the scope and the caller's filters exclude each other
		}
	}
	switch {
	case errors.Is(err, ErrEmptyScope), errors.Is(err, ErrUnauthenticated):
		if req.PageToken != "" {
			// Nothing to read, but the store still judges the token,
			// so a token a backend cannot represent fails the same
			// way whatever the caller's scope (T4). The one-row
			// answer is discarded; what it cost is reported.
			probe, err := d.store.List(ctx, &engine.ListRequest{PageToken: req.PageToken, PageSize: 1, Projection: engine.ProjectionLight})
			if err != nil {
				return nil, err
			}
			p.stats.Add(probe.Stats)
		}
		if errors.Is(err, ErrUnauthenticated) {
			return nil, fmt.Errorf("authz: list: %w", ErrUnauthenticated)
		}
		return p.response(d.owners != nil), nil
	case err != nil:
		return nil, fmt.Errorf("authz: scope: %w", err)
	}
	if scan.Owner != "" && d.owners == nil {
		return nil, errOwnersUnsupported
	}
	if x, ok := d.policy.(ExactScoper); ok && x.ScopeIsExact(ctx, scoped) {
		return d.listExact(ctx, &q, req, &scan)
	}
	scan.PageSize = BatchSize
	scan.Projection = d.policy.Projection()
	// A policy that needs whole tasks gets them whole.
	scan.IncludeArtifacts = d.policy.Projection() == engine.ProjectionFull
	if _, err := engine.ParseListRequest(&scan); err != nil {
		return nil, fmt.Errorf("authz: policy returned an invalid scope: %v: %w", err, engine.ErrInternal)
	}
	for scans := 1; ; scans++ {
		if err := d.scan(ctx, &scan, &p); err != nil {
			return nil, err
		}
		err := d.finish(ctx, &p, scans == MaxScans)
		if err == nil {
			return p.response(d.owners != nil), nil
		}
		if !errors.Is(err, errMoved) {
			return nil, err
		}
		// A selected task was deleted or changed by a concurrent
		// writer: scan again, at most MaxScans times in all. The
		// response reports the cost of every scan.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		stats := p.stats
		p = newPager(q)
		p.stats = stats
	}
}

// narrow returns the filters a store read must apply: the caller's (req)
// and the scope's (scoped), combined (and). ok is false when they exclude
// each other (two different context IDs, owners or states). Only the
// filters are set in the result.
func narrow(req, scoped *engine.ListRequest) (f engine.ListRequest, ok bool) {
	both := func(a, b string) (string, bool) {
		if a == "" || b == "" || a == b {
			return cmp.Or(a, b), true
		}
		return "", false
	}
	var okCtx, okOwner, okState bool
	f.ContextID, okCtx = both(req.ContextID, scoped.ContextID)
	f.Owner, okOwner = both(req.Owner, scoped.Owner)
	var state string
	state, okState = both(string(req.Status), string(scoped.Status))
	f.Status = a2a.TaskState(state)
	f.StatusTimestampAfter = req.StatusTimestampAfter
	if a := scoped.StatusTimestampAfter; a != nil && (f.StatusTimestampAfter == nil || a.After(*f.StatusTimestampAfter)) {
		f.StatusTimestampAfter = a
	}
	return f, okCtx && okOwner && okState
}

// listExact serves List for an exact scope (ExactScoper) with one store
// call: the caller's request with the narrowed filters, whose page, token
// and total are the answer. The page must still pass every check the scan
// path makes (A7, owners aligned and of the filter's owner), and every
// task must match the caller's filters and pass the policy, or the call
// fails closed with no task (errScopeBroken).
func (d *Dispatcher) listExact(ctx context.Context, q *engine.Query, req, filters *engine.ListRequest) (*engine.ListResponse, error) {
	sreq := *req
	sreq.ContextID, sreq.Owner = filters.ContextID, filters.Owner
	sreq.Status, sreq.StatusTimestampAfter = filters.Status, filters.StatusTimestampAfter
	fq := *q
	fq.ContextID, fq.Owner, fq.Status, fq.StatusAfter = sreq.ContextID, sreq.Owner, sreq.Status, sreq.StatusTimestampAfter
	resp, err := d.storePage(ctx, q, &sreq)
	if err != nil {
		return nil, err
	}
	owners, err := d.batchOwners(resp, fq.Owner)
	if err != nil {
		return nil, err
	}
	for i, t := range resp.Tasks {
		if !listpage.Matches(&fq, owners[i], t.ContextID, t.Status.State, t.Status.Timestamp) {
			return nil, errScopeBroken
		}
		ok, err := d.decide(ctx, t, owners[i])
		if err != nil {
			return nil, policyError(err)
		}
		if !ok {
			return nil, errScopeBroken
		}
	}
	return resp, nil
}

// batchOwners returns the owner of each task of a store page: TaskOwners
// when the store listed them aligned with the tasks. A page without owners
// (a store that records none) reads as tasks of no owner, unless the
// dispatcher needs them (an owner filter, or a policy deciding by owner):
// then, like owners misaligned with the tasks or a task of another owner
// than the filter's, it fails closed.
func (d *Dispatcher) batchOwners(b *engine.ListResponse, filter string) ([]string, error) {
	need := filter != "" || d.byOwner != nil
	switch {
	case len(b.Tasks) == 0:
		return nil, nil
	case len(b.TaskOwners) == len(b.Tasks):
	case len(b.TaskOwners) == 0 && !need:
		return make([]string, len(b.Tasks)), nil
	default:
		return nil, errOwnersMisaligned
	}
	if filter != "" {
		for _, o := range b.TaskOwners {
			if o != filter {
				return nil, errOwnersMisaligned
			}
		}
	}
	return b.TaskOwners, nil
}

// passThrough serves List under AllowAll: every task is accessible, so the
// store's page is the answer (there is nothing to scope, skip or revoke).
// It still fails closed on a page whose cursors do not match its tasks or
// its token (A7), or, owner-filtered, whose owners are missing or not the
// filter's.
func (d *Dispatcher) passThrough(ctx context.Context, q *engine.Query, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := d.storePage(ctx, q, req)
	if err != nil {
		return nil, err
	}
	if _, err := d.batchOwners(resp, q.Owner); err != nil {
		return nil, err
	}
	return resp, nil
}

// storePage reads a page the store answers for the caller's query q (its
// page size and boundary) and fails closed unless its cursors match its
// tasks and its token the last of them (A7).
func (d *Dispatcher) storePage(ctx context.Context, q *engine.Query, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := d.store.List(ctx, req)
	if err != nil {
		return nil, err
	}
	last, err := checkBatch(resp, q.PageSize, q.After)
	if err != nil {
		return nil, err
	}
	if resp.NextPageToken != "" && resp.NextPageToken != engine.EncodeToken(*last) {
		return nil, errMisaligned
	}
	return resp, nil
}

// errMoved is finish's report that a selected task was deleted or changed
// after the scan selected it.
var errMoved = errors.New("authz: selected task deleted or changed")

// MaxScans bounds the scans of one List: the first, and the rescans after a
// final read found a selected task deleted or changed (A5).
const MaxScans = 4

// ErrListContention is the error of a List whose last allowed scan (the
// MaxScans-th) selected tasks that were all deleted or changed before its
// final read, while more tasks followed them: no page can then be built
// that keeps the traversal guarantees (an empty page ends a traversal, T6).
// It is an engine.ErrInternal under errors.Is, and the List may be retried.
var ErrListContention = fmt.Errorf("authz: list: every selected task changed while being read: %w", engine.ErrInternal)

// pager is the state of one List call: the page selected so far and the
// total. It holds at most PageSize selected entries (the look-ahead is only
// a flag).
type pager struct {
	q       engine.Query
	ids     []a2a.TaskID
	cursors []engine.Cursor // where each selected task was selected
	owners  []string        // the owner each selected task was selected with
	tasks   []*a2a.Task     // light requests: the scanned tasks, made light; full requests: filled by finish
	more    bool            // an accessible task follows the page
	total   int
	stats   engine.ListStats // what the store calls of this List cost, summed
}

func newPager(q engine.Query) pager {
	p := pager{q: q, ids: make([]a2a.TaskID, 0, q.PageSize), cursors: make([]engine.Cursor, 0, q.PageSize), owners: make([]string, 0, q.PageSize)}
	if q.Projection == engine.ProjectionLight {
		p.tasks = make([]*a2a.Task, 0, q.PageSize)
	}
	return p
}

// full reports whether the page and its look-ahead are found.
func (p *pager) full() bool { return p.more }

// add offers an accessible task of owner read at cursor c.
func (p *pager) add(t *a2a.Task, c engine.Cursor, owner string) {
	p.total++
	if p.more || (p.q.After != nil && c.Compare(*p.q.After) <= 0) {
		return
	}
	if len(p.ids) == p.q.PageSize {
		p.more = true
		return
	}
	p.ids = append(p.ids, t.ID)
	p.cursors = append(p.cursors, c)
	p.owners = append(p.owners, owner)
	if p.q.Projection == engine.ProjectionLight {
		p.tasks = append(p.tasks, lightTask(t))
	}
}

// response is the page. withOwners fills TaskOwners (O5): the dispatcher
// does when its store records owners.
func (p *pager) response(withOwners bool) *engine.ListResponse {
	tasks, cursors := p.tasks, p.cursors
	if len(p.ids) == 0 {
		tasks, cursors = nil, nil
	}
	resp := listpage.Response(&p.q, tasks, cursors, p.more)
	if withOwners {
		resp.TaskOwners = p.owners[:len(resp.Tasks):len(resp.Tasks)]
	}
	resp.Stats = p.stats
	if p.q.IncludeTotalSize {
		resp.TotalSize = p.total
	}
	return resp
}

// scan runs the batches.
//
// Without a total the tasks above the boundary cannot matter, so the scan
// starts at the boundary itself: the store seeks there instead of the
// dispatcher reading and discarding everything above it, and the result is
// the same because the store applies filters before the boundary exactly as
// a top-down scan would (L1, L2).
//
// With a total and a boundary, the scan counts from the top down to the
// boundary, then continues from the boundary with the request's own token
// (re-reading at most the part of one batch that crossed it). Either way
// the store sees the caller's token and judges it as it would without the
// dispatcher: a boundary a backend cannot represent fails with the same
// generic token error (T4). The store never needs the boundary task to exist
// (T5).
func (d *Dispatcher) scan(ctx context.Context, scan *engine.ListRequest, p *pager) error {
	switch {
	case !p.q.IncludeTotalSize:
		// If every task is accessible, PageSize+1 tasks finish the page:
		// ask for no more in the first batch.
		return d.scanRange(ctx, scan, p, p.q.After, nil, min(BatchSize, p.q.PageSize+1))
	case p.q.After != nil:
		if err := d.scanRange(ctx, scan, p, nil, p.q.After, BatchSize); err != nil {
			return err
		}
		return d.scanRange(ctx, scan, p, p.q.After, nil, BatchSize)
	}
	return d.scanRange(ctx, scan, p, nil, nil, BatchSize)
}

// scanRange scans the tasks strictly after from (nil: from the top) down to
// until inclusive (nil: to the end), asking for first tasks in the first
// batch and BatchSize after that.
func (d *Dispatcher) scanRange(ctx context.Context, scan *engine.ListRequest, p *pager, from, until *engine.Cursor, first int) error {
	scan.PageSize = first
	for {
		scan.PageToken = ""
		if from != nil {
			scan.PageToken = engine.EncodeToken(*from)
		}
		// The store gets a copy: what it does to its request never
		// changes the filters the batch is checked against.
		req := *scan
		batch, err := d.store.List(ctx, &req)
		if err != nil {
			return err
		}
		p.stats.Add(batch.Stats)
		last, err := checkBatch(batch, scan.PageSize, from)
		if err != nil {
			return err
		}
		owners, err := d.batchOwners(batch, scan.Owner)
		if err != nil {
			return err
		}
		for i, t := range batch.Tasks {
			c := batch.TaskCursors[i]
			if until != nil && c.Compare(*until) > 0 {
				return nil
			}
			if !listpage.Matches(&p.q, owners[i], t.ContextID, t.Status.State, t.Status.Timestamp) {
				continue // the scope was wider than the request
			}
			ok, err := d.decide(ctx, t, owners[i])
			if err != nil {
				return policyError(err)
			}
			if ok {
				p.add(t, c, owners[i])
				if !p.q.IncludeTotalSize && p.full() {
					return nil
				}
			}
		}
		if batch.NextPageToken == "" {
			return nil
		}
		// Continue from the last cursor read rather than trusting the
		// store's token.
		from = last
		scan.PageSize = BatchSize
	}
}

// checkBatch fails closed (A7) unless every task has its cursor, in strictly
// descending list order after from, within the batch limit. It returns the
// last cursor of the batch (from when the batch is empty).
func checkBatch(b *engine.ListResponse, limit int, from *engine.Cursor) (*engine.Cursor, error) {
	if b == nil || len(b.Tasks) > limit || len(b.TaskCursors) != len(b.Tasks) ||
		(len(b.Tasks) == 0 && b.NextPageToken != "") {
		return nil, errMisaligned
	}
	prev := from
	for i, t := range b.Tasks {
		c := &b.TaskCursors[i]
		if t == nil || t.ID != c.ID || (prev != nil && prev.Compare(*c) >= 0) {
			return nil, errMisaligned
		}
		prev = c
	}
	return prev, nil
}

// finish re-reads and re-checks the selected tasks (A5). At the first
// task that moved it returns errMoved, unless this is the last scan
// allowed: then it leaves moved tasks out and keeps the page of the others
// (each still matching, as read), whose token, when more tasks follow, is
// the last kept task's cursor; the tasks left out were deleted, or changed
// and so moved ahead of it (L7), and the total no longer counts them. If
// none is left while more follow, it fails with ErrListContention.
func (d *Dispatcher) finish(ctx context.Context, p *pager, last bool) error {
	if p.q.Projection == engine.ProjectionLight {
		for i, t := range p.tasks {
			ok, err := d.decide(ctx, t, p.owners[i])
			if err != nil {
				return policyError(err)
			}
			if !ok {
				return errNotFound
			}
		}
		return nil
	}
	p.tasks = make([]*a2a.Task, 0, len(p.ids))
	kept := 0
	for i := range p.ids {
		rec, err := d.reread(ctx, p, i)
		if errors.Is(err, errMoved) && last {
			continue
		}
		if err != nil {
			return err
		}
		listpage.Shape(&p.q, rec.Task)
		p.ids[kept], p.cursors[kept], p.owners[kept] = p.ids[i], p.cursors[i], rec.Owner
		p.tasks = append(p.tasks, rec.Task)
		kept++
	}
	if kept == 0 && len(p.ids) > 0 && p.more {
		return ErrListContention
	}
	// The total leaves out what the page leaves out, so page and total
	// still agree (L8): a first page without a token holds every match.
	p.total -= len(p.ids) - kept
	p.ids, p.cursors, p.owners = p.ids[:kept], p.cursors[:kept], p.owners[:kept]
	return nil
}

// reread reads the i-th selected task whole for the final read (A5). It
// returns errMoved when the task is no longer what the scan selected:
// deleted, at another cursor (changed since), or no longer matching the
// request's filters. Otherwise the policy decides on the content read: a
// task unchanged since selection that the policy now denies was revoked,
// and fails the call with the not-found error of an inaccessible task.
func (d *Dispatcher) reread(ctx context.Context, p *pager, i int) (engine.Record, error) {
	id := p.ids[i]
	rec, err := d.store.Get(ctx, id)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return engine.Record{}, errMoved
	case err != nil:
		return engine.Record{}, err
	}
	if err := readAs(id, rec); err != nil {
		return engine.Record{}, err
	}
	t := rec.Task
	if rec.Cursor != p.cursors[i] || !listpage.Matches(&p.q, rec.Owner, t.ContextID, t.Status.State, t.Status.Timestamp) {
		return engine.Record{}, errMoved
	}
	return rec, d.allow(ctx, t, rec.Owner)
}

// lightTask returns the light projection of a scanned task, always in an
// allocation of its own: a store may allocate a batch's tasks together, and
// keeping one of them must not keep the whole batch reachable (A3).
func lightTask(t *a2a.Task) *a2a.Task {
	return &a2a.Task{
		ID:        t.ID,
		ContextID: t.ContextID,
		Status:    a2a.TaskStatus{State: t.Status.State, Timestamp: t.Status.Timestamp},
		Metadata:  t.Metadata,
	}
}
