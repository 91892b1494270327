package pushdelivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// Claim implements Outbox. It reads the revisions of the dirty tasks from
// the store (every task's every Rescan), then picks, among the records of
// tasks behind their revision, the one due first.
func (l *Local) Claim(ctx context.Context, now time.Time, busy []string, skip ...a2a.TaskID) (Lease, error) {
	if err := l.refresh(ctx, now); err != nil {
		return nil, err
	}
	busySet, skipSet := setOf(busy), setOf(skip)
	return l.claimWhere(now, func(id a2a.TaskID, r *Record) bool {
		_, b := busySet[r.Dest]
		_, s := skipSet[id]
		return !b && !s
	}), nil
}

// ClaimAmong implements Drainer.
func (l *Local) ClaimAmong(ctx context.Context, now time.Time, dests []string) (Lease, error) {
	if err := l.refresh(ctx, now); err != nil {
		return nil, err
	}
	among := setOf(dests)
	return l.claimWhere(now, func(_ a2a.TaskID, r *Record) bool {
		_, ok := among[r.Dest]
		return ok
	}), nil
}

// claimWhere leases the due record first by NextAt among those take
// accepts (nil when none).
func (l *Local) claimWhere(now time.Time, take func(a2a.TaskID, *Record) bool) Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, lr := l.pickLocked(now, take)
	if lr == nil {
		return nil
	}
	l.mu.seq++
	lr.token, lr.until = l.mu.seq, now.Add(l.opts.Lease)
	return &localLease{l: l, rec: lr.rec, rev: t.rev, token: lr.token, until: lr.until}
}

// setOf is the set of s's elements.
func setOf[T comparable](s []T) map[T]struct{} {
	m := make(map[T]struct{}, len(s))
	for _, v := range s {
		m[v] = struct{}{}
	}
	return m
}

// refresh reads the revisions of the dirty tasks, every Rescan the tasks
// written since the previous rescan being dirty too (written).
func (l *Local) refresh(ctx context.Context, now time.Time) error {
	l.mu.Lock()
	rescan := l.mu.lastScan.IsZero() || now.Sub(l.mu.lastScan) >= l.opts.Rescan
	if rescan {
		l.mu.lastScan = now
	}
	l.mu.Unlock()
	if rescan {
		if err := l.written(ctx); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("pushdelivery: claim: rescan: %w", err)
			}
			// The watermark stays: the next rescan covers this one's window.
			l.opts.logger().Warn("pushdelivery: rescan failed, the next one covers its writes", "err", err)
		}
	}
	l.mu.Lock()
	ids := slices.Collect(maps.Keys(l.mu.dirty))
	clear(l.mu.dirty)
	checks := slices.Collect(maps.Keys(l.mu.marks))
	clear(l.mu.marks)
	l.mu.reads++
	seq := l.mu.reads
	l.mu.Unlock()
	revs := make(map[a2a.TaskID]int64, len(ids))
	var failed []a2a.TaskID
	var firstErr error
	for _, id := range ids {
		rec, err := l.store.Get(ctx, id)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			if ctx.Err() != nil {
				l.markDirty(ids) // none of them applied: all read again
				l.markChecks(checks)
				return fmt.Errorf("pushdelivery: claim: read task: %w", err)
			}
			// SPEC N4: one unreadable task is set aside, never blocking
			// the others: its records keep the revision last read, and it
			// is read again at the next refresh.
			failed = append(failed, id)
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		revs[id] = rec.Revision // 0 when not found
	}
	marks, err := l.readMarks(ctx, checks)
	if err != nil {
		l.markDirty(ids) // none of them applied: all read again
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setAsideLocked(failed, revs, firstErr)
	for id, rev := range revs {
		if t := l.mu.tasks[id]; t != nil {
			// The read begun last wins: a concurrent refresh begun later
			// read a state at least as recent. A revision may go down (a
			// task deleted, 0, or created again under the ID, from 1:
			// SPEC N1); kept from an earlier incarnation it would hold
			// the record due forever.
			if seq <= t.readSeq {
				continue
			}
			t.rev, t.readSeq = rev, seq
			if rev == 0 {
				l.mu.missing[id] = struct{}{}
				l.unfoundLocked(t)
			} else {
				delete(l.mu.missing, id)
				l.foundLocked(id, t, now)
			}
			l.updatePendingLocked(id)
		}
	}
	l.dropStaleMarkedLocked(marks)
	return nil
}

// readMarks reads the deletion marks of tasks (SPEC N1; none from a
// store without a log). A task whose mark cannot be read is checked
// again at the next refresh; a cancelled ctx fails.
func (l *Local) readMarks(ctx context.Context, tasks []a2a.TaskID) (map[a2a.TaskID]int64, error) {
	logs, ok := l.store.(engine.LogStore)
	if !ok || len(tasks) == 0 {
		return nil, nil
	}
	marks := make(map[a2a.TaskID]int64, len(tasks))
	var again []a2a.TaskID
	for _, id := range tasks {
		m, err := logs.Deleted(ctx, id)
		switch {
		case errors.Is(err, engine.ErrLogDisabled):
			return nil, nil
		case err != nil && ctx.Err() != nil:
			l.markChecks(tasks) // none applied
			return nil, fmt.Errorf("pushdelivery: claim: read task deletions: %w", err)
		case err != nil:
			again = append(again, id)
		case m > 0:
			marks[id] = m
		}
	}
	l.markChecks(again)
	return marks, nil
}

// markChecks has the next refresh read the deletion marks of tasks.
func (l *Local) markChecks(tasks []a2a.TaskID) {
	if len(tasks) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range tasks {
		if _, ok := l.mu.tasks[id]; ok {
			l.mu.marks[id] = struct{}{}
		}
	}
}

// dropStaleMarkedLocked removes the records stale against their task's
// deletion mark in marks (Record.stale: saved for an incarnation deleted
// since, SPEC N1), so that none comes back to serve a task created again
// under the ID once the store forgets the deletion (its log retention).
// A task whose records cannot be deleted is checked again later.
// REQUIRES: l.mu held.
func (l *Local) dropStaleMarkedLocked(marks map[a2a.TaskID]int64) {
	for id, mark := range marks {
		t := l.mu.tasks[id]
		if t == nil {
			continue
		}
		var stale []string
		for cid, lr := range t.recs {
			if lr.rec.stale(mark) {
				stale = append(stale, cid)
			}
		}
		if len(stale) == 0 {
			continue
		}
		if err := l.deleteKeysLocked(id, stale); err != nil {
			l.mu.marks[id] = struct{}{}
			l.opts.logger().Warn("pushdelivery: remove the push configs of a deleted task", "task", id, "err", err)
			continue
		}
		for _, cid := range stale {
			delete(t.recs, cid)
		}
		l.updatePendingLocked(id)
		l.dropIfEmptyLocked(id)
	}
}

// setAsideLocked keeps the unreadable tasks failed dirty (read again at
// the next refresh), and counts and logs each once when it becomes
// unreadable; the tasks read (revs) are readable again.
// REQUIRES: l.mu held.
func (l *Local) setAsideLocked(failed []a2a.TaskID, revs map[a2a.TaskID]int64, err error) {
	for id := range revs {
		delete(l.mu.unreadable, id)
	}
	for _, id := range failed {
		if _, ok := l.mu.tasks[id]; !ok {
			continue
		}
		l.mu.dirty[id] = struct{}{}
		if _, ok := l.mu.unreadable[id]; ok {
			continue
		}
		l.mu.unreadable[id] = struct{}{}
		l.opts.Metrics.setAside(SetAsideUnreadableTask)
		l.opts.logger().Warn("pushdelivery: task unreadable, its push records set aside until it reads again",
			"task", id, "err", err)
	}
}

func (l *Local) markDirty(ids []a2a.TaskID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.mu.dirty[id] = struct{}{}
	}
}

// pickLocked returns the claimable record due first among those take
// accepts, or nil.
// REQUIRES: l.mu held.
func (l *Local) pickLocked(now time.Time, take func(a2a.TaskID, *Record) bool) (*localTask, *localRecord) {
	var bt *localTask
	var best *localRecord
	for id := range l.mu.pending {
		t := l.mu.tasks[id]
		for _, lr := range t.recs {
			r := &lr.rec
			if r.NextAt.After(now) || t.rev <= r.Delivered ||
				(lr.token != 0 && !now.After(lr.until)) || !take(id, r) {
				continue
			}
			if best == nil || r.NextAt.Before(best.rec.NextAt) {
				bt, best = t, lr
			}
		}
	}
	return bt, best
}

// localLease is a claim on a Local record, fenced by its token.
type localLease struct {
	l     *Local
	rec   Record
	rev   int64
	token uint64
	until time.Time
}

func (ll *localLease) Record() *Record  { r := ll.rec; return &r }
func (ll *localLease) Revision() int64  { return ll.rev }
func (ll *localLease) Until() time.Time { return ll.until }

// heldLocked returns the record if the lease still holds it.
// REQUIRES: ll.l.mu held.
func (ll *localLease) heldLocked() *localRecord {
	t := ll.l.mu.tasks[ll.rec.TaskID]
	if t == nil {
		return nil
	}
	lr := t.recs[ll.rec.Config.ID]
	if lr == nil || lr.token != ll.token {
		return nil
	}
	return lr
}

func (ll *localLease) Commit(ctx context.Context, r *Record) error {
	l := ll.l
	l.mu.Lock()
	defer l.mu.Unlock()
	lr := ll.heldLocked()
	if lr == nil {
		return ErrLeaseLost
	}
	next := lr.rec
	next.setDelivery(r)
	if err := l.putLocked(&next); err != nil {
		return err
	}
	lr.rec, lr.token, lr.until = next, 0, time.Time{}
	l.updatePendingLocked(next.TaskID)
	return nil
}

// Drop implements dropper.
func (ll *localLease) Drop(ctx context.Context) error {
	l := ll.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if ll.heldLocked() == nil {
		return ErrLeaseLost
	}
	if err := l.deleteKeysLocked(ll.rec.TaskID, []string{ll.rec.Config.ID}); err != nil {
		return err
	}
	delete(l.mu.tasks[ll.rec.TaskID].recs, ll.rec.Config.ID)
	l.updatePendingLocked(ll.rec.TaskID)
	l.dropIfEmptyLocked(ll.rec.TaskID)
	return nil
}

func (ll *localLease) Release(ctx context.Context) {
	ll.l.mu.Lock()
	defer ll.l.mu.Unlock()
	if lr := ll.heldLocked(); lr != nil {
		lr.token, lr.until = 0, time.Time{}
	}
}

// setDelivery copies the delivery state of src into r (what Commit sets).
func (r *Record) setDelivery(src *Record) {
	r.Delivered, r.Attempts, r.FailingSince = src.Delivered, src.Attempts, src.FailingSince
	r.NextAt, r.LastError, r.Done = src.NextAt, src.LastError, src.Done
}

// Sweep implements Outbox. Like Claim it first reads the revisions of
// the dirty tasks; then the tasks whose last read found them missing,
// and up to limit tasks not found in the store for grace, with records
// older than grace, are looked up in the store again, and the old
// records of those missing go. It reads the tasks due for sweeping and
// a bounded batch, not every task with old records, and goes through
// those due only (Local's found list), not every task with records
// (SPEC C6).
func (l *Local) Sweep(ctx context.Context, grace time.Duration, limit int) (int, error) {
	now := l.opts.Clock()
	if err := l.refresh(ctx, now); err != nil {
		return 0, err
	}
	cutoff := now.Add(-grace)
	l.mu.Lock()
	var ids []a2a.TaskID
	oldRecord := func(t *localTask) bool {
		for _, lr := range t.recs {
			if lr.rec.Created.Before(cutoff) {
				return true
			}
		}
		return false
	}
	for id := range l.mu.missing {
		if t := l.mu.tasks[id]; t != nil && oldRecord(t) {
			ids = append(ids, id)
		}
	}
	// A task deleted after its last read is in no rescan (which sees
	// writes): up to limit tasks not found in the store for grace are
	// looked up again, the least recently found first, so that the
	// records of a deleted task go within (tasks with records / limit)
	// sweeps. It goes through those due only: the found list is in the
	// order of the reads (a task without an old record goes to its back).
	looked := 0
	for e := l.mu.found.Front(); e != nil && looked < limit; {
		next := e.Next()
		l.mu.looked++
		id := e.Value.(a2a.TaskID)
		t := l.mu.tasks[id]
		if !t.read.Before(cutoff) {
			break
		}
		looked++
		if oldRecord(t) {
			ids = append(ids, id)
		} else {
			l.mu.found.MoveToBack(e)
		}
		e = next
	}
	l.mu.Unlock()
	n := 0
	for _, id := range ids {
		if n >= limit {
			break
		}
		_, err := l.store.Get(ctx, id)
		if err == nil {
			l.mu.Lock()
			if t := l.mu.tasks[id]; t != nil && t.found != nil {
				l.foundLocked(id, t, now)
			} else if t != nil {
				t.read = now // missing at the last refresh: it settles that
			}
			l.mu.Unlock()
			continue
		}
		if !errors.Is(err, engine.ErrNotFound) {
			return n, fmt.Errorf("pushdelivery: sweep: read task: %w", err)
		}
		k, err := l.sweepTask(id, cutoff, limit-n)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// sweepTask deletes up to limit records of task created before cutoff.
func (l *Local) sweepTask(task a2a.TaskID, cutoff time.Time, limit int) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.mu.tasks[task]
	if t == nil {
		return 0, nil
	}
	var ids []string
	for id, lr := range t.recs {
		if len(ids) < limit && lr.rec.Created.Before(cutoff) {
			ids = append(ids, id)
		}
	}
	if err := l.deleteKeysLocked(task, ids); err != nil {
		return 0, err
	}
	for _, id := range ids {
		delete(t.recs, id)
	}
	l.updatePendingLocked(task)
	l.dropIfEmptyLocked(task)
	return len(ids), nil
}

// Depth implements Outbox. Like Claim it reads the revisions of the dirty
// tasks first. It looks only at the tasks with a record behind (SPEC C6),
// and reads the log, outside the lock, only for a due record whose wait
// it has not read yet since its cursor last moved (at most
// maxDepthReads per call: the others count from their NextAt until a
// later call reads them).
func (l *Local) Depth(ctx context.Context, now time.Time) (int, time.Duration, error) {
	if err := l.refresh(ctx, now); err != nil {
		return 0, 0, err
	}
	type unread struct {
		task      a2a.TaskID
		id        string
		delivered int64
	}
	var toRead []unread
	l.mu.Lock()
	for id := range l.mu.pending {
		for cid, lr := range l.mu.tasks[id].recs {
			r := &lr.rec
			if !r.NextAt.After(now) && l.mu.tasks[id].rev > r.Delivered && lr.waitFor != r.Delivered+1 && len(toRead) < maxDepthReads {
				toRead = append(toRead, unread{id, cid, r.Delivered})
			}
		}
	}
	l.mu.Unlock()
	logs, _ := l.store.(engine.LogStore)
	read := make([]time.Time, len(toRead))
	for i, u := range toRead {
		if logs == nil {
			break
		}
		if entries, err := logs.ReadLog(ctx, u.task, u.delivered, 1); err == nil && len(entries) > 0 {
			read[i] = time.UnixMicro(entries[0].Time)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, u := range toRead {
		if t := l.mu.tasks[u.task]; t != nil {
			if lr := t.recs[u.id]; lr != nil && lr.rec.Delivered == u.delivered {
				lr.waitFor, lr.waitFrom = u.delivered+1, read[i]
			}
		}
	}
	pending, oldest := 0, time.Duration(0)
	for id := range l.mu.pending {
		t := l.mu.tasks[id]
		for _, lr := range t.recs {
			r := &lr.rec
			if t.rev <= r.Delivered {
				continue
			}
			pending++
			if !r.NextAt.After(now) {
				since := r.NextAt
				if lr.waitFor == r.Delivered+1 {
					since = maxTime(since, lr.waitFrom)
				}
				oldest = max(oldest, now.Sub(since))
			}
		}
	}
	return pending, oldest, nil
}

// maxDepthReads bounds the log reads of one Depth.
const maxDepthReads = 64

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// DueNow implements Recoverer. It looks at the tasks with a record
// behind only; the new NextAt is written through (Pebble) like a commit's.
func (l *Local) DueNow(ctx context.Context, dest string, now time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for id := range l.mu.pending {
		t := l.mu.tasks[id]
		for _, lr := range t.recs {
			if lr.rec.Dest != dest || !lr.rec.NextAt.After(now) || t.rev <= lr.rec.Delivered {
				continue
			}
			next := lr.rec
			next.NextAt = now
			if err := l.putLocked(&next); err != nil {
				return n, err
			}
			lr.rec = next
			n++
		}
	}
	return n, nil
}
