package memstore

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/tidwall/btree"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// Clock supplies storage update times. Default: engine.WallClock.
	Clock engine.Clock
	// Limits bound the tasks the store accepts. Default: engine.Limits{}
	// (the engine's defaults).
	Limits engine.Limits
}

// Store is the in-memory backend. Create it with New.
type Store struct {
	clock  engine.Clock
	limits engine.Limits

	mu struct {
		sync.RWMutex
		byID   map[a2a.TaskID]*record
		order  *btree.BTreeG[entry]            // every task, list order
		byCtx  map[string]*btree.BTreeG[entry] // per context ID, list order
		states map[a2a.TaskState]int           // tasks per state
		pairs  map[ctxState]int                // tasks per (context, state)
		// The owner indexes hold the tasks that have an owner, as refs
		// (O6): one task in each.
		byOwner     map[string]*btree.BTreeG[ref]   // per owner, list order
		byOwnerCtx  map[ownerCtx]*btree.BTreeG[ref] // per (owner, context ID), list order
		ownerStates map[ownerState]int              // tasks per (owner, state)
		closed      bool
	}
}

var (
	_ engine.OwnerStore = (*Store)(nil)
	_ engine.Checker    = (*Store)(nil)
)

// record is one stored task. Its fields change only under s.mu (write); a
// body or meta slice is never modified once stored, so readers may keep a
// reference past the lock.
type record struct {
	id    a2a.TaskID
	owner string // fixed at Create (O1, O2); "" = none
	lightFields
	updatedAt int64
	revision  int64
	body      []byte // taskcodec.EncodeTask: the whole task, binary
}

// lightFields are what filters and light pages read (ProjectionLight).
type lightFields struct {
	contextID  string
	state      a2a.TaskState
	statusTime time.Time // zero: no status timestamp
	hasStatus  bool
	meta       []byte // taskcodec.EncodeMetadata: nil = none
}

// entry is an item of the global and per-context indexes: the list-order
// key and a copy of the light fields inline, so filtering and light pages
// read the index, not a record per task, and the record it points to, for
// full pages and owners. An entry is never modified: every mutation moves
// the task to a new key. A seek probe has no record and sorts just after
// the entry with the same key, so a page starts strictly after its
// boundary.
type entry struct {
	at int64
	id a2a.TaskID
	lightFields
	rec *record
}

// ref is an item of the owner indexes: the task's time and its record,
// whose ID breaks ties. The owner indexes stay small by keeping no copy of
// the ID or the light fields: ties, filters and pages read them through the
// record. A seek probe's record has revision 0 (a stored record has 1 or
// more) and sorts just after the ref with the same key, as for entry.
type ref struct {
	at  int64
	rec *record
}

type ctxState struct {
	ctx   string
	state a2a.TaskState
}

type ownerCtx struct{ owner, ctx string }

type ownerState struct {
	owner string
	state a2a.TaskState
}

// less is list order (S6): time descending, then ID bytes descending;
// then a probe (no record) after the entry with the same key.
func less(a, b entry) bool {
	if a.at != b.at {
		return a.at > b.at
	}
	if c := strings.Compare(string(a.id), string(b.id)); c != 0 {
		return c > 0
	}
	return a.rec != nil && b.rec == nil
}

// refLess is less for refs: the record is read only on equal times, and
// a probe (revision 0) sorts after the ref with the same key.
func refLess(a, b ref) bool {
	if a.at != b.at {
		return a.at > b.at
	}
	if c := strings.Compare(string(a.rec.id), string(b.rec.id)); c != 0 {
		return c > 0
	}
	return a.rec.revision != 0 && b.rec.revision == 0
}

// probeAfter is the seek probe that sorts just after cursor c's ref.
func probeAfter(c *engine.Cursor) ref { return ref{at: c.UpdatedAt, rec: &record{id: c.ID}} }

func newIndex[T any](less func(a, b T) bool) *btree.BTreeG[T] {
	return btree.NewBTreeGOptions(less, btree.Options{NoLocks: true})
}

// indexSet adds item to m[k], creating that index if needed.
func indexSet[K comparable, T any](m map[K]*btree.BTreeG[T], k K, item T, less func(a, b T) bool) {
	t := m[k]
	if t == nil {
		t = newIndex(less)
		m[k] = t
	}
	t.Set(item)
}

// indexDelete removes item from m[k], dropping that index once it is empty.
func indexDelete[K comparable, T any](m map[K]*btree.BTreeG[T], k K, item T) {
	if t := m[k]; t != nil {
		t.Delete(item)
		if t.Len() == 0 {
			delete(m, k)
		}
	}
}

// New returns an empty store.
func New(opts Options) *Store {
	s := &Store{clock: opts.Clock, limits: opts.Limits}
	if s.clock == nil {
		s.clock = engine.WallClock
	}
	s.mu.byID = make(map[a2a.TaskID]*record)
	s.mu.order = newIndex(less)
	s.mu.byCtx = make(map[string]*btree.BTreeG[entry])
	s.mu.states = make(map[a2a.TaskState]int)
	s.mu.pairs = make(map[ctxState]int)
	s.mu.byOwner = make(map[string]*btree.BTreeG[ref])
	s.mu.byOwnerCtx = make(map[ownerCtx]*btree.BTreeG[ref])
	s.mu.ownerStates = make(map[ownerState]int)
	return s
}

// Close releases the store; later calls fail with ErrInternal.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.closed = true
	s.mu.byID, s.mu.byCtx, s.mu.byOwner, s.mu.byOwnerCtx = nil, nil, nil, nil
	s.mu.order = newIndex(less)
	return nil
}

var errClosed = fmt.Errorf("memstore: store is closed: %w", engine.ErrInternal)

func (r *record) cursor() engine.Cursor { return engine.Cursor{UpdatedAt: r.updatedAt, ID: r.id} }

func (r *record) entry() entry {
	return entry{at: r.updatedAt, id: r.id, lightFields: r.lightFields, rec: r}
}

func (r *record) ref() ref { return ref{at: r.updatedAt, rec: r} }

// encoded is a task's stored form, prepared outside the lock.
type encoded struct {
	lightFields
	body []byte
}

func (s *Store) encode(t *a2a.Task) (encoded, error) {
	if err := s.limits.ValidateTask(t); err != nil {
		return encoded{}, err
	}
	body, err := taskcodec.EncodeTask(t)
	if err != nil {
		return encoded{}, err
	}
	meta, err := taskcodec.EncodeMetadata(t.Metadata)
	if err != nil {
		return encoded{}, err
	}
	// The encoder's buffer is larger than most bodies: keep an exact copy.
	e := encoded{lightFields: lightFields{contextID: t.ContextID, state: t.Status.State, meta: meta}, body: bytes.Clone(body)}
	if t.Status.Timestamp != nil {
		e.statusTime, e.hasStatus = *t.Status.Timestamp, true
	}
	return e, nil
}

// snapshot is what a caller needs of a record after the lock is released.
func (r *record) snapshot() (engine.Record, []byte) {
	return engine.Record{Revision: r.revision, Cursor: r.cursor(), Owner: r.owner}, r.body
}

// decoded finishes a snapshot outside the lock.
func decoded(rec engine.Record, body []byte) (engine.Record, error) {
	t, err := taskcodec.DecodeTask(body)
	if err != nil {
		return engine.Record{}, err
	}
	rec.Task = t
	return rec, nil
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
	if err := s.lockOpen(); err != nil {
		return engine.Record{}, err
	}
	if _, ok := s.mu.byID[task.ID]; ok {
		s.mu.Unlock()
		return engine.Record{}, fmt.Errorf("memstore: create: %w", engine.ErrAlreadyExists)
	}
	r := &record{id: task.ID, owner: owner, updatedAt: engine.CreateTime(s.clock()), revision: 1}
	r.setLocked(enc)
	s.mu.byID[r.id] = r
	s.indexLocked(r)
	rec, body := r.snapshot()
	s.mu.Unlock()
	return decoded(rec, body)
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

// setLocked stores enc's content in r.
// REQUIRES: s.mu held for writing, r not indexed.
func (r *record) setLocked(enc encoded) {
	r.lightFields, r.body = enc.lightFields, enc.body
}

// indexLocked adds r to the indexes and counters; a task without an owner
// is in no owner index.
// REQUIRES: s.mu held for writing.
func (s *Store) indexLocked(r *record) {
	s.mu.order.Set(r.entry())
	indexSet(s.mu.byCtx, r.contextID, r.entry(), less)
	s.mu.states[r.state]++
	s.mu.pairs[ctxState{r.contextID, r.state}]++
	if r.owner != "" {
		indexSet(s.mu.byOwner, r.owner, r.ref(), refLess)
		indexSet(s.mu.byOwnerCtx, ownerCtx{r.owner, r.contextID}, r.ref(), refLess)
		s.mu.ownerStates[ownerState{r.owner, r.state}]++
	}
}

// unindexLocked removes r from the indexes and counters.
// REQUIRES: s.mu held for writing.
func (s *Store) unindexLocked(r *record) {
	s.mu.order.Delete(r.entry())
	indexDelete(s.mu.byCtx, r.contextID, r.entry())
	decr(s.mu.states, r.state)
	decr(s.mu.pairs, ctxState{r.contextID, r.state})
	if r.owner != "" {
		indexDelete(s.mu.byOwner, r.owner, r.ref())
		indexDelete(s.mu.byOwnerCtx, ownerCtx{r.owner, r.contextID}, r.ref())
		decr(s.mu.ownerStates, ownerState{r.owner, r.state})
	}
}

func decr[K comparable](m map[K]int, k K) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}

// Get returns the whole task.
func (s *Store) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	_, rec, body, err := s.read(id)
	if err != nil {
		return engine.Record{}, err
	}
	return decoded(rec, body)
}

// read returns the record of id and a snapshot of it, under the shared lock.
func (s *Store) read(id a2a.TaskID) (*record, engine.Record, []byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, err := s.findLocked(id)
	if err != nil {
		return nil, engine.Record{}, nil, err
	}
	rec, body := r.snapshot()
	return r, rec, body, nil
}

// findLocked returns the record of id.
// REQUIRES: s.mu held.
func (s *Store) findLocked(id a2a.TaskID) (*record, error) {
	if s.mu.closed {
		return nil, errClosed
	}
	if err := engine.ValidateID(id); err != nil {
		return nil, err
	}
	r, ok := s.mu.byID[id]
	if !ok {
		return nil, fmt.Errorf("memstore: %w", engine.ErrNotFound)
	}
	return r, nil
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
	s.mu.Lock()
	r, err := s.findLocked(task.ID)
	if err == nil && expectedRevision != 0 && expectedRevision != r.revision {
		err = fmt.Errorf("memstore: replace: %w", engine.ErrRevisionConflict)
	}
	var at int64
	if err == nil {
		at, err = engine.NextTime(r.updatedAt, s.clock()) // S4, S5
	}
	if err != nil {
		s.mu.Unlock()
		return engine.Record{}, err
	}
	s.advanceLocked(r, enc, at)
	rec, body := r.snapshot()
	s.mu.Unlock()
	return decoded(rec, body)
}

// advanceLocked moves r to new content at time at, one revision on, in
// the record and the indexes.
// REQUIRES: s.mu held for writing.
func (s *Store) advanceLocked(r *record, enc encoded, at int64) {
	s.unindexLocked(r)
	r.setLocked(enc)
	r.updatedAt = at
	r.revision++
	s.indexLocked(r)
}

// modify applies edit to a decoded copy of the task and stores the result,
// unless edit reports no change (then the current record is returned and
// nothing changes, S3). edit receives the time the mutation will have.
// Decoding and encoding run outside the lock; if another writer got there
// first, modify starts over on the new content.
func (s *Store) modify(id a2a.TaskID, edit func(t *a2a.Task, at int64) (changed bool, err error)) (engine.Record, error) {
	for {
		r, rec, body, err := s.read(id)
		if err != nil {
			return engine.Record{}, err
		}
		cur, err := decoded(rec, body)
		if err != nil {
			return engine.Record{}, err
		}
		at, atErr := engine.NextTime(rec.Cursor.UpdatedAt, s.clock())
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

		if err := s.lockOpen(); err != nil {
			return engine.Record{}, err
		}
		if s.mu.byID[id] != r || r.revision != rec.Revision {
			s.mu.Unlock()
			continue
		}
		s.advanceLocked(r, enc, at)
		rec, body = r.snapshot()
		s.mu.Unlock()
		return decoded(rec, body)
	}
}

// Cancel moves a non-terminal task to canceled (S9).
func (s *Store) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return s.modify(id, func(t *a2a.Task, at int64) (bool, error) {
		if t.Status.State.Terminal() {
			return false, fmt.Errorf("memstore: cancel: %w", engine.ErrNotCancelable)
		}
		ts := time.UnixMicro(at).UTC()
		t.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: &ts}
		return true, nil
	})
}

// AppendHistory appends msg unless its ID is already in the history (S3).
func (s *Store) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	if err := s.limits.ValidateMessage(msg); err != nil {
		return engine.Record{}, err
	}
	return s.modify(id, func(t *a2a.Task, _ int64) (bool, error) {
		for _, m := range t.History {
			if m != nil && m.ID == msg.ID {
				return false, nil
			}
		}
		t.History = append(t.History, msg)
		return true, nil
	})
}

// Delete removes a task (S9).
func (s *Store) Delete(ctx context.Context, id a2a.TaskID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.findLocked(id)
	if err != nil {
		return err
	}
	s.unindexLocked(r)
	delete(s.mu.byID, id)
	return nil
}
