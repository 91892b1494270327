package memstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/tidwall/btree"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/loghub"
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// Clock supplies storage update times. Default: engine.WallClock.
	Clock engine.Clock
	// Limits bound the tasks the store accepts. Default: engine.Limits{}
	// (the engine's defaults).
	Limits engine.Limits
	// Log keeps the task log (engine.LogStore, K7). Default false: ReadLog
	// fails with engine.ErrLogDisabled and writes cost no log entry.
	Log bool
}

// Store is the in-memory backend. Create it with New.
type Store struct {
	clock  engine.Clock
	limits engine.Limits
	log    bool       // Options.Log
	hub    loghub.Hub // wakes log readers after a write
	probes *probes    // seek probes (slots.go)

	mu struct {
		sync.RWMutex
		slots slots // the entries (slots.go)
		ids   idMap // slot by task
		// The indexes hold each task once, as a time and a slot (the
		// keyed ones with their key first): one task, every index.
		order      *btree.BTreeG[item]  // every task, list order
		byCtx      *btree.BTreeG[keyed] // every task: context, then list order
		byOwner    *btree.BTreeG[keyed] // tasks with an owner: owner, then list order
		byOwnerCtx *btree.BTreeG[keyed] // tasks with an owner: (owner, context), then list order
		// The status-ordered indexes (C7): a page filtered by state, or by
		// owner and state, seeks into the one range of its candidates.
		byState      *btree.BTreeG[keyed] // every task: state, then list order
		byOwnerState *btree.BTreeG[keyed] // tasks with an owner: (owner, state), then list order
		// contexts and owners intern the strings tasks carry and count
		// their tasks per state (totals by context, context+state, owner,
		// owner+state); ownerCtx counts per (owner, context).
		contexts symbols
		owners   symbols
		ownerCtx pairCounts
		states   [numStates]int // tasks per state
		closed   bool
		// logs are the task logs by task's slot (Options.Log; no refs
		// without), in a slab of their own (logslab.go).
		logs taskLogs
		// trimmed is where TrimLog goes on: the last task whose log it
		// trimmed, in oldest-first order (nil: the oldest task).
		trimmed *engine.Cursor
		// deleted are the marks of the deletions the log remembers
		// (engine.LogStore.Deleted), by task; deletions the same marks
		// in the order made, which TrimLog forgets from the front.
		deleted   map[a2a.TaskID]int64
		deletions []deletion
	}
}

var (
	_ engine.OwnerStore = (*Store)(nil)
	_ engine.Checker    = (*Store)(nil)
)

// entry is one stored task, in its slot (slots.go), which the ID map and
// every index name: 112 bytes and no pointer. It holds the ID (the store's
// own copy, made at Create) when it has at most idInline bytes; its record
// in the slab (slab.go) holds a longer one, and the body. Its fields
// change only under s.mu (write). A view of its ID or of its record is
// valid only under the lock: the entry is cleared when the task goes and
// the slab's buffers are reused; what is handed out or kept is copied
// (slab.go).
type entry struct {
	rec       ref // the ID when longer than idInline, then the body: metadata, then the rest of the task (content.go)
	updatedAt int64
	revision  int64
	status    stamp          // status timestamp
	ctx       sym            // interned context ID
	owner     sym            // interned owner, fixed at Create (O1, O2); noOwner = none
	metaLen   uint32         // bytes of the body that are metadata
	slot      uint32         // this entry's slot
	gen       uint32         // the slot's generation: one on each time it is freed (wraps after 2^32 frees of one slot)
	state     uint8          // number in states
	sid       [idInline]byte // the ID, when it has at most idInline bytes (rec.idLen)
}

// item is an entry of the global index: the task's time and slot, whose
// ID breaks ties. An item is never modified: every mutation moves the
// task to a new key.
type item struct {
	atHi, atLo, slot uint32
}

// An item holds its time as two 32-bit halves, so that it aligns to 4
// bytes: 12 bytes, not 16 (#55: at 1e6 light tasks 300 → 292 bytes a
// task). Scalar fields, not an array, keep two items in registers when
// the B-tree passes them to its comparison. A keyed item stays 24
// bytes: as five 32-bit fields it would be 20, but two of them no longer
// fit the registers (Go's ABI has nine for integers), and a Replace at
// 1e5 cost about 30 % more.

func itemAt(at int64, slot uint32) item { return item{uint32(uint64(at) >> 32), uint32(at), slot} }

func (it item) when() int64 { return int64(uint64(it.atHi)<<32 | uint64(it.atLo)) }

// keyed is an entry of a keyed index: the key (a context sym, an owner
// sym, or both: ownerCtxKey), then as item. A keyed at rangeStart is the
// start of its key's range: it sorts before the key's entries.
type keyed struct {
	key  uint64
	at   int64
	slot uint32
}

func ownerCtxKey(owner, ctx sym) uint64 { return uint64(owner)<<32 | uint64(ctx) }

// ownerStateKey is the key of the (owner, state) index: the owner, then
// the state's number in the low byte.
func ownerStateKey(owner sym, state uint8) uint64 { return uint64(owner)<<8 | uint64(state) }

// before is list order (S6): time descending, then ID bytes descending;
// then a probe after the task with the same key, so a page starts
// strictly after its boundary.
// REQUIRES: s.mu held.
func (s *Store) before(aAt int64, a uint32, bAt int64, b uint32) bool {
	if aAt != bAt {
		return aAt > bAt
	}
	if a == b {
		return false
	}
	if c := strings.Compare(s.idOf(a), s.idOf(b)); c != 0 {
		return c > 0
	}
	return a < probeBase && b >= probeBase
}

func (s *Store) itemLess(a, b item) bool { return s.before(a.when(), a.slot, b.when(), b.slot) }

func (s *Store) keyedLess(a, b keyed) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	if a.slot == rangeStart || b.slot == rangeStart {
		return a.slot == rangeStart && b.slot != rangeStart
	}
	return s.before(a.at, a.slot, b.at, b.slot)
}

func newIndex[T any](less func(a, b T) bool) *btree.BTreeG[T] {
	return btree.NewBTreeGOptions(less, btree.Options{NoLocks: true})
}

// New returns an empty store.
func New(opts Options) *Store {
	s := &Store{clock: opts.Clock, limits: opts.Limits, log: opts.Log, probes: newProbes()}
	if s.clock == nil {
		s.clock = engine.WallClock
	}
	s.resetLocked()
	return s
}

// resetLocked empties the store.
// REQUIRES: s.mu held for writing, or s unshared.
func (s *Store) resetLocked() {
	s.mu.logs, s.mu.trimmed, s.mu.deleted, s.mu.deletions = taskLogs{}, nil, nil, nil
	if s.log {
		s.mu.logs.refs = make(map[uint32]logRef)
		s.mu.deleted = make(map[a2a.TaskID]int64)
	}
	s.mu.slots = slots{}
	s.mu.ids = newIDMap()
	s.mu.order = newIndex(s.itemLess)
	s.mu.byCtx, s.mu.byOwner, s.mu.byOwnerCtx = newIndex(s.keyedLess), newIndex(s.keyedLess), newIndex(s.keyedLess)
	s.mu.byState, s.mu.byOwnerState = newIndex(s.keyedLess), newIndex(s.keyedLess)
	s.mu.contexts, s.mu.owners = newSymbols(), newSymbols()
	s.mu.ownerCtx = newPairCounts()
	s.mu.states = [numStates]int{}
}

// Close releases the store; later calls fail with ErrInternal.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
	s.mu.closed = true
	return nil
}

var errClosed = fmt.Errorf("memstore: store is closed: %w", engine.ErrInternal)

func (e *entry) item() item             { return itemAt(e.updatedAt, e.slot) }
func (e *entry) keyed(key uint64) keyed { return keyed{key, e.updatedAt, e.slot} }

// snapshotLocked is what a caller needs of e after the lock is released,
// copied out of the slab: the record and, when full, the content (the
// ID and body: decoded); else the record has no ID, which the caller
// sets.
// REQUIRES: s.mu held.
func (s *Store) snapshotLocked(e *entry, full bool) (engine.Record, content) {
	rec := engine.Record{Revision: e.revision, Cursor: engine.Cursor{UpdatedAt: e.updatedAt}, Owner: s.mu.owners.names[e.owner]}
	if !full {
		return rec, content{}
	}
	c := s.contentLocked(e)
	c.detach()
	rec.Cursor.ID = a2a.TaskID(c.id)
	return rec, c
}

// Create stores a new task without an owner (S2, S4, S7, O1).
func (s *Store) Create(ctx context.Context, task *a2a.Task) (engine.Record, error) {
	return s.CreateOwned(ctx, task, "")
}

// CreateOwned stores a new task of owner (O1): any bytes, at most
// engine.MaxOwnerBytes.
func (s *Store) CreateOwned(ctx context.Context, task *a2a.Task, owner string) (engine.Record, error) {
	enc, err := s.encode(task)
	if err != nil {
		return engine.Record{}, err
	}
	if err := engine.ValidateOwner(owner); err != nil {
		return engine.Record{}, err
	}
	logged, err := s.newLogEntry(ctx, task, nil)
	if err == nil && s.log {
		err = checkLogSize(task.ID, 0, &logged)
	}
	if err != nil {
		return engine.Record{}, err
	}
	if err := s.lockOpen(); err != nil {
		return engine.Record{}, err
	}
	if _, ok := s.mu.ids.get(&s.mu.slots, task.ID); ok {
		s.mu.Unlock()
		return engine.Record{}, fmt.Errorf("memstore: create: %w", engine.ErrAlreadyExists)
	}
	e := s.mu.slots.alloc()
	e.updatedAt, e.revision = engine.CreateTime(s.clock()), 1
	if owner != "" {
		e.owner = s.mu.owners.intern(owner)
	}
	s.setLocked(e, task.ID, &enc)
	s.mu.ids.add(s.mu.slots.id(e), e.slot)
	s.indexLocked(e)
	s.logLocked(e, logged)
	rec, c := s.snapshotLocked(e, engine.TaskWanted(ctx))
	s.mu.Unlock()
	enc.release()
	s.wake(task.ID)
	return returned(ctx, task.ID, rec, c)
}

// lockOpen takes s.mu for writing, or fails (not holding it) when the
// store is closed.
func (s *Store) lockOpen() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return errClosed
	}
	return nil
}

// setLocked stores id and enc's content in e, interning its context.
// REQUIRES: s.mu held for writing, e not indexed.
func (s *Store) setLocked(e *entry, id a2a.TaskID, enc *encoded) {
	e.ctx = s.mu.contexts.intern(enc.contextID)
	e.state, e.status, e.metaLen = enc.state, enc.status, enc.metaLen
	s.mu.slots.setRecord(e, id, enc.body(), enc.head)
}

// indexLocked adds e to the indexes and counters; a task without an owner
// is in no owner index.
// REQUIRES: s.mu held for writing.
func (s *Store) indexLocked(e *entry) {
	s.untrimLocked(e)
	s.mu.order.Set(e.item())
	s.mu.byCtx.Set(e.keyed(uint64(e.ctx)))
	s.mu.byState.Set(e.keyed(uint64(e.state)))
	s.mu.states[e.state]++
	s.mu.contexts.add(e.ctx, e.state, 1)
	if e.owner != noOwner {
		s.mu.byOwner.Set(e.keyed(uint64(e.owner)))
		s.mu.byOwnerCtx.Set(e.keyed(ownerCtxKey(e.owner, e.ctx)))
		s.mu.byOwnerState.Set(e.keyed(ownerStateKey(e.owner, e.state)))
		s.mu.owners.add(e.owner, e.state, 1)
		s.mu.ownerCtx.add(e.owner, e.ctx, 1)
	}
}

// untrimLocked moves where TrimLog goes on (s.mu.trimmed) back to e's
// time when e, about to be indexed, lands at or behind it: a task created
// or written while the clock is behind that point (S4 lets it step back;
// imports are engine.TrimFrom's case too) would otherwise lie where no
// later TrimLog looks, its log never trimmed (K7). An empty ID sorts after
// every task of that time, so the walk examines them all, e included.
// A write at a later time than the point (every write but after a clock
// step) costs one comparison: its ID is read only at the point's time.
// REQUIRES: s.mu held for writing.
func (s *Store) untrimLocked(e *entry) {
	t := s.mu.trimmed
	if t == nil || e.updatedAt > t.UpdatedAt {
		return
	}
	if e.updatedAt < t.UpdatedAt || s.mu.slots.cursor(e).Compare(*t) >= 0 {
		s.mu.trimmed = &engine.Cursor{UpdatedAt: e.updatedAt}
	}
}

// unindexLocked removes e from the indexes and counters. The context and
// owner stay interned: the caller releases them (releaseLocked) once e
// holds its new content, or is gone.
// REQUIRES: s.mu held for writing.
func (s *Store) unindexLocked(e *entry) {
	s.mu.order.Delete(e.item())
	s.mu.byCtx.Delete(e.keyed(uint64(e.ctx)))
	s.mu.byState.Delete(e.keyed(uint64(e.state)))
	s.mu.states[e.state]--
	s.mu.contexts.add(e.ctx, e.state, -1)
	if e.owner != noOwner {
		s.mu.byOwner.Delete(e.keyed(uint64(e.owner)))
		s.mu.byOwnerCtx.Delete(e.keyed(ownerCtxKey(e.owner, e.ctx)))
		s.mu.byOwnerState.Delete(e.keyed(ownerStateKey(e.owner, e.state)))
		s.mu.owners.add(e.owner, e.state, -1)
		s.mu.ownerCtx.add(e.owner, e.ctx, -1)
	}
}

// releaseLocked drops the interned context ctx and owner (noOwner: none)
// if no task carries them any more.
// REQUIRES: s.mu held for writing.
func (s *Store) releaseLocked(ctx, owner sym) {
	s.mu.contexts.release(ctx)
	if owner != noOwner {
		s.mu.owners.release(owner)
	}
}

// Get returns the whole task.
func (s *Store) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	_, _, rec, c, err := s.read(id)
	if err != nil {
		return engine.Record{}, err
	}
	return decoded(rec, c)
}

// read returns the entry of id, its generation and a snapshot of it,
// under the shared lock.
func (s *Store) read(id a2a.TaskID) (*entry, uint32, engine.Record, content, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, err := s.findLocked(id)
	if err != nil {
		return nil, 0, engine.Record{}, content{}, err
	}
	rec, c := s.snapshotLocked(e, true)
	return e, e.gen, rec, c, nil
}

// findLocked returns the entry of id.
// REQUIRES: s.mu held.
func (s *Store) findLocked(id a2a.TaskID) (*entry, error) {
	if s.mu.closed {
		return nil, errClosed
	}
	if err := engine.ValidateID(id); err != nil {
		return nil, err
	}
	slot, ok := s.mu.ids.get(&s.mu.slots, id)
	if !ok {
		return nil, fmt.Errorf("memstore: %w", engine.ErrNotFound)
	}
	return s.mu.slots.at(slot), nil
}

// Replace stores task as the new content of task.ID (S2, S7).
func (s *Store) Replace(ctx context.Context, task *a2a.Task, expectedRevision int64) (engine.Record, error) {
	enc, err := s.encode(task)
	if err != nil {
		return engine.Record{}, err
	}
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	logged, err := s.newLogEntry(ctx, task, engine.EventFrom(ctx))
	if err != nil {
		return engine.Record{}, err
	}
	s.mu.Lock()
	e, err := s.findLocked(task.ID)
	if err == nil && expectedRevision != 0 && expectedRevision != e.revision {
		err = fmt.Errorf("memstore: replace: %w", engine.ErrRevisionConflict)
	}
	var at int64
	if err == nil {
		at, err = engine.NextTime(e.updatedAt, s.clock()) // S4, S5
	}
	if err == nil {
		_, err = engine.NextRevision(e.revision) // S7
	}
	if err == nil {
		err = s.logFitsLocked(e, &logged)
	}
	if err != nil {
		s.mu.Unlock()
		return engine.Record{}, err
	}
	s.advanceLocked(e, &enc, at)
	s.logLocked(e, logged)
	rec, c := s.snapshotLocked(e, engine.TaskWanted(ctx))
	s.mu.Unlock()
	enc.release()
	s.wake(task.ID)
	return returned(ctx, task.ID, rec, c)
}

// advanceLocked moves e to new content at time at, one revision on, in
// the entry and the indexes.
// REQUIRES: s.mu held for writing.
func (s *Store) advanceLocked(e *entry, enc *encoded, at int64) {
	s.unindexLocked(e)
	old := e.ctx
	s.setLocked(e, s.mu.slots.id(e), enc) // the view is copied before its record is freed
	e.updatedAt = at
	e.revision++
	s.indexLocked(e)
	s.releaseLocked(old, noOwner)
}

// modifyEdited, when set (by tests), runs in modify between the edit and
// the write lock, holding no lock.
var modifyEdited func()

// modify applies edit to a decoded copy of the task and stores the result,
// unless edit reports no change (then the current record is returned and
// nothing changes, S3). edit receives the time the mutation will have.
// Decoding and encoding run outside the lock; if another writer got there
// first, modify starts over on the new content. A nonzero expected is the
// revision the task must have (engine.ConditionalStore), compared before
// edit runs. With the log on, logged makes the revision's entry from the
// edited task, which keeps the traceparent of ctx's span (H2).
func (s *Store) modify(ctx context.Context, id a2a.TaskID, expected int64, edit func(t *a2a.Task, at int64) (changed bool, err error),
	logged func(t *a2a.Task) (engine.LogEntry, error)) (engine.Record, error) {
	for {
		e, gen, rec, c, err := s.read(id)
		if err != nil {
			return engine.Record{}, err
		}
		if err := checkRevision(rec.Revision, expected); err != nil {
			return engine.Record{}, err
		}
		cur, err := decoded(rec, c)
		if err != nil {
			return engine.Record{}, err
		}
		at, atErr := engine.NextTime(rec.Cursor.UpdatedAt, s.clock())
		if atErr == nil {
			_, atErr = engine.NextRevision(rec.Revision) // S7
		}
		changed, err := edit(cur.Task, at)
		if err != nil || !changed {
			return cur, err
		}
		if atErr != nil {
			return engine.Record{}, atErr
		}
		enc, err := s.encode(cur.Task)
		if err != nil {
			return engine.Record{}, err
		}
		var l engine.LogEntry
		if s.log {
			if l, err = logged(cur.Task); err != nil {
				return engine.Record{}, err
			}
			l.Trace = engine.TraceParent(ctx)
		}
		if modifyEdited != nil {
			modifyEdited()
		}

		if err := s.lockOpen(); err != nil {
			return engine.Record{}, err
		}
		if e.gen != gen || e.revision != rec.Revision { // deleted, or written, meanwhile
			s.mu.Unlock()
			enc.release()
			continue
		}
		if err := s.logFitsLocked(e, &l); err != nil {
			s.mu.Unlock()
			enc.release()
			return engine.Record{}, err
		}
		s.advanceLocked(e, &enc, at)
		s.logLocked(e, l)
		rec, c = s.snapshotLocked(e, true)
		s.mu.Unlock()
		enc.release()
		s.wake(id)
		return decoded(rec, c)
	}
}

// Cancel moves a non-terminal task to canceled (S9).
func (s *Store) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return s.CancelIf(ctx, id, 0)
}

// CancelIf implements engine.ConditionalStore.
func (s *Store) CancelIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) (engine.Record, error) {
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	return s.modify(ctx, id, expectedRevision, func(t *a2a.Task, at int64) (bool, error) {
		if t.Status.State.Terminal() {
			return false, fmt.Errorf("memstore: cancel: %w", engine.ErrNotCancelable)
		}
		ts := time.UnixMicro(at).UTC()
		t.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: &ts}
		return true, nil
	}, func(t *a2a.Task) (engine.LogEntry, error) { return engine.CanceledEntry(t.ContextID), nil })
}

// AppendHistory appends msg unless its ID is already in the history (S3).
func (s *Store) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	return s.AppendHistoryIf(ctx, id, msg, 0)
}

// AppendHistoryIf implements engine.ConditionalStore.
func (s *Store) AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, expectedRevision int64) (engine.Record, error) {
	if err := s.limits.ValidateMessage(msg); err != nil {
		return engine.Record{}, err
	}
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	return s.modify(ctx, id, expectedRevision, func(t *a2a.Task, _ int64) (bool, error) {
		for _, m := range t.History {
			if m != nil && m.ID == msg.ID {
				return false, nil
			}
		}
		t.History = append(t.History, msg)
		return true, nil
	}, func(t *a2a.Task) (engine.LogEntry, error) { return engine.MessageEntry(msg, t.Status.State) })
}

// Delete removes a task (S9).
func (s *Store) Delete(ctx context.Context, id a2a.TaskID) error {
	return s.DeleteIf(ctx, id, 0)
}

// DeleteIf implements engine.ConditionalStore.
func (s *Store) DeleteIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) error {
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.findLocked(id)
	if err != nil {
		return err
	}
	if err := checkRevision(e.revision, expectedRevision); err != nil {
		return err
	}
	s.removeLocked(e)
	return nil
}

// removeLocked removes e from the store: indexes, counters, its log.
// REQUIRES: s.mu held for writing.
func (s *Store) removeLocked(e *entry) {
	s.unindexLocked(e)
	id := s.mu.slots.id(e) // a view: of the entry or its record, both reused once released
	s.mu.ids.delete(&s.mu.slots, id)
	s.mu.logs.drop(e.slot)
	s.markDeletedLocked(id, e.updatedAt)
	s.releaseLocked(e.ctx, e.owner)
	s.wake(id) // its readers end (they wait for the lock)
	s.mu.slots.release(e)
}
