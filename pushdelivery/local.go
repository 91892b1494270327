package pushdelivery

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// LocalOptions configure the memory and Pebble outboxes. The zero value is
// valid.
type LocalOptions struct {
	// Lease is how long a claim lasts before another Claim may take the
	// record again. Default 30 s.
	Lease time.Duration
	// Rescan is how often Claim looks for tasks written without a Touch:
	// it reads the revisions of the tasks with records written since the
	// previous rescan (the store's list order, newest first: the writes,
	// not the records stored; SPEC C6), beside the tasks marked by Touch.
	// Default 5 s.
	Rescan time.Duration
	// Clock gives the time of Sweep's grace and of the rescans' walks
	// (it must agree with the store's clock to well within Rescan).
	// Default time.Now.
	Clock func() time.Time
	// Logger receives Pebble's messages (OpenPebble only). Default:
	// pebble.DefaultLogger.
	Logger pebble.Logger
	// FS is the file system of the Pebble database (OpenPebble only).
	// Default: the operating system's (vfs.Default).
	FS vfs.FS
	// Metrics counts the records set aside (a task the store cannot
	// read). Default nil: none.
	Metrics *Metrics
	// Log receives the outbox's warnings (a task set aside). Default
	// slog.Default().
	Log *slog.Logger
}

func (o *LocalOptions) logger() *slog.Logger {
	if o.Log == nil {
		return slog.Default()
	}
	return o.Log
}

func (o *LocalOptions) ensureDefaults() {
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Rescan <= 0 {
		o.Rescan = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
}

// Local is the outbox of one process: every record in memory, written
// through to a Pebble database of its own when opened with OpenPebble.
// Claims are local to the process (leases fence the workers of this
// process; a restart drops every lease).
//
// A Local made by NewMemory is best effort: its records go with the
// process, as the tasks of the memory store do.
//
// Claim reads task revisions from the store only for the tasks marked
// dirty: by Touch (the worker calls it when a task gets an event), by
// Save, at open, and every Rescan those written since the previous
// rescan (local_rescan.go).
type Local struct {
	store engine.Store
	opts  LocalOptions
	db    *pebble.DB // nil: memory only

	mu struct {
		sync.Mutex
		tasks   map[a2a.TaskID]*localTask
		dirty   map[a2a.TaskID]struct{}
		pending map[a2a.TaskID]struct{} // tasks with a record behind rev
		// unreadable: tasks whose last read failed (set aside, N4),
		// each logged and counted once until it reads again.
		unreadable map[a2a.TaskID]struct{}
		// missing: tasks with records whose last read found no task
		// (deleted, retained away, or not created yet): all that Sweep
		// looks at (SPEC C6).
		missing map[a2a.TaskID]struct{}
		// marks: tasks with records written since the previous rescan
		// (a task created again is written), whose deletion mark the
		// next refresh reads to remove their stale records (SPEC N1),
		// before the store forgets the deletion.
		marks map[a2a.TaskID]struct{}
		// found: the tasks whose last read found them in the store (not
		// missing), least recently found first: Sweep looks again at
		// those not found for its grace from the front, reading only
		// those due (SPEC C6). looked counts the tasks it went through.
		found    *list.List
		looked   int
		lastScan time.Time
		// watermark: when the last rescan started (µs, Clock;
		// local_rescan.go); based once a rescan has.
		watermark int64
		based     bool
		seq       uint64 // lease tokens
		reads     uint64 // refresh read tokens (localTask.readSeq)
	}
}

// localTask holds the records of a task and what Claim last read of the
// task's revision.
type localTask struct {
	recs map[string]*localRecord
	rev  int64 // 0: missing or not read yet
	// readSeq: the token of the read rev came from (l.mu.reads when it
	// began); a read begun earlier is older and does not apply. Save
	// takes a token when it drops stale records, so no read begun before
	// it applies.
	readSeq uint64
	// read: when a refresh or Sweep last found the task in the store
	// (zero: never); Sweep looks again at tasks not found for its grace.
	// found: its place in Local's found list (nil: not in it).
	read  time.Time
	found *list.Element
}

type localRecord struct {
	rec   Record
	token uint64 // 0: not leased
	until time.Time
	// waitFrom is when log entry waitFor was committed (zero: unknown),
	// as Depth last read it: the entry after Delivered when waitFor is
	// Delivered+1, stale otherwise.
	waitFrom time.Time
	waitFor  int64
}

var _ Outbox = (*Local)(nil)

// NewMemory returns an outbox held in memory only, over store's tasks. It
// is best effort: its records are gone with the process.
func NewMemory(store engine.Store, opts LocalOptions) *Local {
	opts.ensureDefaults()
	l := &Local{store: store, opts: opts}
	l.mu.tasks = map[a2a.TaskID]*localTask{}
	l.mu.dirty = map[a2a.TaskID]struct{}{}
	l.mu.pending = map[a2a.TaskID]struct{}{}
	l.mu.unreadable = map[a2a.TaskID]struct{}{}
	l.mu.missing = map[a2a.TaskID]struct{}{}
	l.mu.marks = map[a2a.TaskID]struct{}{}
	l.mu.found = list.New()
	return l
}

// OpenPebble opens (creating if needed) the outbox database in dir and
// loads its records. Save, Delete, DeleteAll and Commit are synced to disk
// before they return, so a crash loses no acknowledged state.
func OpenPebble(dir string, store engine.Store, opts LocalOptions) (*Local, error) {
	l := NewMemory(store, opts)
	po := &pebble.Options{Logger: opts.Logger, FS: opts.FS}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("pushdelivery: open %s: %w", dir, err)
	}
	l.db = db
	if err := l.load(); err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

// Close closes the Pebble database (a memory outbox: nothing to do).
func (l *Local) Close() error {
	if l.db == nil {
		return nil
	}
	return l.db.Close()
}

// load reads every record of the database into memory, every task dirty
// and its deletion mark to read (SPEC N1: a task deleted and created
// again while no outbox ran is in no rescan, which sees only the writes
// after the first; its stale records go at the first refresh). That is
// one mark read per task with records, once, beside the revision read.
func (l *Local) load() error {
	it, err := l.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("pushdelivery: load: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		r, err := decodeRecord(it.Key(), it.Value())
		if err != nil {
			return fmt.Errorf("pushdelivery: load: %w", err)
		}
		l.taskLocked(r.TaskID).recs[r.Config.ID] = &localRecord{rec: *r}
		l.mu.dirty[r.TaskID] = struct{}{}
		l.mu.marks[r.TaskID] = struct{}{}
	}
	return it.Error()
}

// Touch marks task as changed: the next Claim reads its revision.
func (l *Local) Touch(task a2a.TaskID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.mu.tasks[task]; ok {
		l.mu.dirty[task] = struct{}{}
	}
}

// taskLocked returns the task's entry, creating it.
// REQUIRES: l.mu held.
func (l *Local) taskLocked(id a2a.TaskID) *localTask {
	t := l.mu.tasks[id]
	if t == nil {
		// Reads begun before the entry existed do not apply to it.
		t = &localTask{recs: map[string]*localRecord{}, readSeq: l.mu.reads}
		l.mu.tasks[id] = t
	}
	return t
}

// Save implements Outbox.
func (l *Local) Save(ctx context.Context, r *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.taskLocked(r.TaskID)
	if err := l.dropStaleLocked(t, r); err != nil {
		l.dropIfEmptyLocked(r.TaskID)
		return err
	}
	cur := t.recs[r.Config.ID]
	next := *r
	next.Config.TaskID = r.TaskID
	if cur != nil {
		next = cur.rec
		if !sameConfig(next.Config, withTask(r.Config, r.TaskID)) {
			next.afresh(r.NextAt)
		}
		next.Config, next.Dest = r.Config, r.Dest
		next.Config.TaskID = r.TaskID
	} else if len(t.recs) >= MaxConfigsPerTask {
		l.dropIfEmptyLocked(r.TaskID)
		return ErrTooMany
	}
	if err := l.putLocked(&next); err != nil {
		l.dropIfEmptyLocked(r.TaskID)
		return err
	}
	if cur != nil {
		cur.rec = next
	} else {
		t.recs[r.Config.ID] = &localRecord{rec: next}
	}
	l.mu.dirty[r.TaskID] = struct{}{}
	l.updatePendingLocked(r.TaskID)
	return nil
}

// dropStaleLocked removes the records of r's task saved for an earlier
// incarnation of it than r (SPEC N1).
// REQUIRES: l.mu held.
func (l *Local) dropStaleLocked(t *localTask, r *Record) error {
	var ids []string
	for id, lr := range t.recs {
		if lr.rec.stale(r.Incarnation) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := l.deleteKeysLocked(r.TaskID, ids); err != nil {
		return err
	}
	for _, id := range ids {
		delete(t.recs, id)
	}
	// The revision read was the deleted incarnation's: the new one
	// starts again at 1, so the task is read again (SPEC N1, N2).
	l.mu.reads++
	t.rev, t.readSeq = 0, l.mu.reads
	l.mu.dirty[r.TaskID] = struct{}{}
	l.updatePendingLocked(r.TaskID)
	return nil
}

// dropIfEmptyLocked forgets a task without records.
// REQUIRES: l.mu held.
func (l *Local) dropIfEmptyLocked(id a2a.TaskID) {
	if t := l.mu.tasks[id]; t != nil && len(t.recs) == 0 {
		l.unfoundLocked(t)
		delete(l.mu.tasks, id)
		delete(l.mu.dirty, id)
		delete(l.mu.pending, id)
		delete(l.mu.unreadable, id)
		delete(l.mu.missing, id)
		delete(l.mu.marks, id)
	}
}

// foundLocked notes that task id (t) was found in the store at now: it
// goes last in the order Sweep looks again in.
// REQUIRES: l.mu held.
func (l *Local) foundLocked(id a2a.TaskID, t *localTask, now time.Time) {
	t.read = now
	if t.found == nil {
		t.found = l.mu.found.PushBack(id)
	} else {
		l.mu.found.MoveToBack(t.found)
	}
}

// unfoundLocked takes t out of the found list (its task missing, or its
// records gone).
// REQUIRES: l.mu held.
func (l *Local) unfoundLocked(t *localTask) {
	if t.found != nil {
		l.mu.found.Remove(t.found)
		t.found = nil
	}
}

// putLocked writes r through to the database (synced).
// REQUIRES: l.mu held.
func (l *Local) putLocked(r *Record) error {
	if l.db == nil {
		return nil
	}
	v, err := encodeRecord(r)
	if err != nil {
		return err
	}
	if err := l.db.Set(recordKey(r.TaskID, r.Config.ID), v, pebble.Sync); err != nil {
		return fmt.Errorf("pushdelivery: write: %w", err)
	}
	return nil
}

// Get implements Outbox.
func (l *Local) Get(ctx context.Context, task a2a.TaskID, id string) (*Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.mu.tasks[task]; t != nil {
		if lr := t.recs[id]; lr != nil {
			r := lr.rec
			return &r, nil
		}
	}
	return nil, ErrNotFound
}

// List implements Outbox.
func (l *Local) List(ctx context.Context, task a2a.TaskID, after string, limit int) ([]*Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.mu.tasks[task]
	if t == nil {
		return nil, nil
	}
	var out []*Record
	for id, lr := range t.recs {
		if id > after {
			r := lr.rec
			out = append(out, &r)
		}
	}
	slices.SortFunc(out, func(a, b *Record) int {
		return compareStrings(a.Config.ID, b.Config.ID)
	})
	if limit >= 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Delete implements Outbox.
func (l *Local) Delete(ctx context.Context, task a2a.TaskID, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.mu.tasks[task]
	if t == nil || t.recs[id] == nil {
		return nil
	}
	if err := l.deleteKeysLocked(task, []string{id}); err != nil {
		return err
	}
	delete(t.recs, id)
	l.updatePendingLocked(task)
	l.dropIfEmptyLocked(task)
	return nil
}

// DeleteAll implements Outbox.
func (l *Local) DeleteAll(ctx context.Context, task a2a.TaskID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deleteTaskLocked(task)
}

// deleteTaskLocked removes every record of task.
// REQUIRES: l.mu held.
func (l *Local) deleteTaskLocked(task a2a.TaskID) error {
	t := l.mu.tasks[task]
	if t == nil {
		return nil
	}
	ids := make([]string, 0, len(t.recs))
	for id := range t.recs {
		ids = append(ids, id)
	}
	if err := l.deleteKeysLocked(task, ids); err != nil {
		return err
	}
	clear(t.recs)
	l.dropIfEmptyLocked(task)
	return nil
}

// deleteKeysLocked deletes records from the database in one synced batch.
// REQUIRES: l.mu held.
func (l *Local) deleteKeysLocked(task a2a.TaskID, ids []string) error {
	if l.db == nil {
		return nil
	}
	b := l.db.NewBatch()
	defer b.Close()
	for _, id := range ids {
		if err := b.Delete(recordKey(task, id), nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("pushdelivery: delete: %w", err)
	}
	return nil
}

// updatePendingLocked recomputes whether task has a record behind its
// last read revision.
// REQUIRES: l.mu held.
func (l *Local) updatePendingLocked(task a2a.TaskID) {
	t := l.mu.tasks[task]
	if t != nil {
		for _, lr := range t.recs {
			if t.rev > lr.rec.Delivered { // Done too: a write after its terminal event
				l.mu.pending[task] = struct{}{}
				return
			}
		}
	}
	delete(l.mu.pending, task)
}
