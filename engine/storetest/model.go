package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// model is the reference store: a slice kept in list order (S6), scanned
// linearly by List, tasks kept as their JSON encoding. It is deliberately
// simple so that it is obviously right, and independent of the code it
// checks: validation, the time rule, filters, trimming, paging and page
// tokens are written out here from the SPEC, never taken from engine's
// ParseListRequest, NextTime or the validators, engine/listpage,
// engine/taskcodec or the engine's token codec — so a bug in any of them
// cannot pass the model test on every backend. From engine it uses only the
// types, the sentinel errors and the list of states. The suite runs it
// beside the real store and proves itself against it in its own tests.
type model struct {
	clock  engine.Clock
	binary bool // accept any ID bytes (else NUL and invalid UTF-8 are rejected)

	mu struct {
		sync.Mutex
		list []*modelEntry // list order: UpdatedAt desc, ID bytes desc
		byID map[a2a.TaskID]*modelEntry
	}
}

type modelEntry struct {
	cur   engine.Cursor
	rev   int64
	owner string // O1: beside the task, never in its metadata
	ctx   string // raw context ID (JSON would replace invalid UTF-8)
	state a2a.TaskState
	ts    *time.Time // status timestamp, for filters without decoding
	data  []byte     // the task's JSON; ID and context ID are cur.ID and ctx
	// emptyMeta: the task's metadata is an empty map, which JSON leaves out
	// (a store returns it as it was given).
	emptyMeta bool
}

var errModelInvalid = fmt.Errorf("model: %w", engine.ErrInvalidArgument)

func newEntry(t *a2a.Task, owner string, at, rev int64) (*modelEntry, error) {
	data, err := json.Marshal(t)
	if err != nil {
		// What the wire cannot carry (a NaN, a channel) no store can keep.
		return nil, fmt.Errorf("model: task cannot be encoded: %v: %w", err, engine.ErrInvalidArgument)
	}
	e := &modelEntry{cur: engine.Cursor{UpdatedAt: at, ID: t.ID}, rev: rev, owner: owner, ctx: t.ContextID, state: t.Status.State, data: data,
		emptyMeta: t.Metadata != nil && len(t.Metadata) == 0}
	if t.Status.Timestamp != nil {
		ts := *t.Status.Timestamp
		e.ts = &ts
	}
	return e, nil
}

var (
	_ engine.OwnerStore       = (*model)(nil)
	_ engine.ConditionalStore = (*model)(nil)
)

func newModel(clock engine.Clock, binary bool) *model {
	if clock == nil {
		clock = func() int64 { return time.Now().UnixMicro() }
	}
	m := &model{clock: clock, binary: binary}
	m.mu.byID = make(map[a2a.TaskID]*modelEntry)
	return m
}

// validate checks a task to be stored (S8): non-nil, an ID of 1..1024
// bytes, a context ID of at most 1024 bytes, a known state, and for a
// text-only backend IDs without NUL or invalid UTF-8.
func (m *model) validate(t *a2a.Task) error {
	switch {
	case t == nil,
		len(t.ID) == 0 || len(t.ID) > specMaxIDBytes,
		len(t.ContextID) > specMaxIDBytes,
		!slices.Contains(allStates, t.Status.State),
		!m.binary && (!textID(string(t.ID)) || !textID(t.ContextID)):
		return errModelInvalid
	}
	// The size and depth limits are engine.Limits' own rules, checked
	// here with its defaults (the clauses test them separately).
	if err := (engine.Limits{}).ValidateTask(t); err != nil {
		return err
	}
	return nil
}

// validOwner checks an owner (O1): at most 1024 bytes, and for a text-only
// backend the bytes it accepts in IDs.
func (m *model) validOwner(owner string) error {
	if len(owner) > specMaxOwnerBytes || !m.binary && !textID(owner) {
		return errModelInvalid
	}
	return nil
}

// textID reports whether s can be stored by a text-only backend.
func textID(s string) bool {
	return utf8.ValidString(s) && !strings.Contains(s, "\x00")
}

// listedBefore reports whether a comes before b in list order (S6): later
// UpdatedAt first, then the greater ID in byte order.
func listedBefore(a, b engine.Cursor) bool {
	if a.UpdatedAt != b.UpdatedAt {
		return a.UpdatedAt > b.UpdatedAt
	}
	return string(a.ID) > string(b.ID)
}

// REQUIRES: m.mu held.
func (m *model) insertLocked(e *modelEntry) {
	i := 0
	for i < len(m.mu.list) && listedBefore(m.mu.list[i].cur, e.cur) {
		i++
	}
	m.mu.list = slices.Insert(m.mu.list, i, e)
	m.mu.byID[e.cur.ID] = e
}

// REQUIRES: m.mu held.
func (m *model) removeLocked(e *modelEntry) {
	i := slices.Index(m.mu.list, e)
	if i < 0 {
		panic("model: entry not in list")
	}
	m.mu.list = slices.Delete(m.mu.list, i, i+1)
	delete(m.mu.byID, e.cur.ID)
}

// task returns a fresh copy of the entry's task.
func (e *modelEntry) task() *a2a.Task {
	t := new(a2a.Task)
	if err := json.Unmarshal(e.data, t); err != nil {
		panic(err)
	}
	t.ID, t.ContextID = e.cur.ID, e.ctx
	if e.emptyMeta {
		t.Metadata = map[string]any{}
	}
	return t
}

func (e *modelEntry) record() engine.Record {
	return engine.Record{Task: e.task(), Revision: e.rev, Cursor: e.cur, Owner: e.owner}
}

// findLocked returns id's entry, or ErrNotFound.
// REQUIRES: m.mu held.
func (m *model) findLocked(op string, id a2a.TaskID) (*modelEntry, error) {
	e, ok := m.mu.byID[id]
	if !ok {
		return nil, fmt.Errorf("model: %s: %w", op, engine.ErrNotFound)
	}
	return e, nil
}

// findAtLocked returns id's entry when it is at revision expected (0: any):
// ErrNotFound when missing, else ErrRevisionConflict at another revision,
// before anything else is decided (engine.ConditionalStore).
// REQUIRES: m.mu held.
func (m *model) findAtLocked(op string, id a2a.TaskID, expected int64) (*modelEntry, error) {
	e, err := m.findLocked(op, id)
	if err == nil && expected != 0 && expected != e.rev {
		return nil, fmt.Errorf("model: %s: revision %d, expected %d: %w", op, e.rev, expected, engine.ErrRevisionConflict)
	}
	return e, err
}

// validExpected rejects a negative expected revision, before the task is
// looked up (S7).
func validExpected(rev int64) error {
	if rev < 0 {
		return fmt.Errorf("model: negative expected revision: %w", engine.ErrInvalidArgument)
	}
	return nil
}

// now is the clock reading; below 0 counts as 0 (S5).
func (m *model) now() int64 { return max(m.clock(), 0) }

// Create is CreateOwned with no owner (O1).
func (m *model) Create(ctx context.Context, t *a2a.Task) (engine.Record, error) {
	return m.CreateOwned(ctx, t, "")
}

func (m *model) CreateOwned(ctx context.Context, t *a2a.Task, owner string) (engine.Record, error) {
	if err := m.validate(t); err != nil {
		return engine.Record{}, err
	}
	if err := m.validOwner(owner); err != nil {
		return engine.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mu.byID[t.ID]; ok {
		return engine.Record{}, fmt.Errorf("model: create: %w", engine.ErrAlreadyExists)
	}
	e, err := newEntry(t, owner, m.now(), 1) // S4: Create uses clock()
	if err != nil {
		return engine.Record{}, err
	}
	m.insertLocked(e)
	return written(ctx, e.record()), nil
}

// written is rec as a Create or Replace made with ctx returns it: without
// its task under engine.WithoutTask.
func written(ctx context.Context, rec engine.Record) engine.Record {
	if !engine.TaskWanted(ctx) {
		rec.Task = nil
	}
	return rec
}

func (m *model) Get(_ context.Context, id a2a.TaskID) (engine.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.findLocked("get", id)
	if err != nil {
		return engine.Record{}, err
	}
	return e.record(), nil
}

// updateLocked stores t as the new content of e at the next time (S4, S5):
// max(clock(), old+1); a task at MaxInt64 cannot advance and nothing
// changes. The owner stays (O2). stamp, if set, sees the new time before t
// is stored.
// REQUIRES: m.mu held.
func (m *model) updateLocked(e *modelEntry, t *a2a.Task, stamp func(at int64)) (engine.Record, error) {
	if e.cur.UpdatedAt == math.MaxInt64 {
		return engine.Record{}, fmt.Errorf("model: task time at its maximum: %w", engine.ErrInternal)
	}
	at := max(m.now(), e.cur.UpdatedAt+1)
	if stamp != nil {
		stamp(at)
	}
	ne, err := newEntry(t, e.owner, at, e.rev+1)
	if err != nil {
		return engine.Record{}, err
	}
	m.removeLocked(e)
	m.insertLocked(ne)
	return ne.record(), nil
}

func (m *model) Replace(ctx context.Context, t *a2a.Task, expectedRevision int64) (engine.Record, error) {
	if err := m.validate(t); err != nil {
		return engine.Record{}, err
	}
	if err := validExpected(expectedRevision); err != nil { // S7: bad input, before the task is looked up
		return engine.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.findAtLocked("replace", t.ID, expectedRevision)
	if err != nil {
		return engine.Record{}, err
	}
	rec, err := m.updateLocked(e, t, nil)
	return written(ctx, rec), err
}

func (m *model) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return m.CancelIf(ctx, id, 0)
}

func (m *model) CancelIf(_ context.Context, id a2a.TaskID, expectedRevision int64) (engine.Record, error) {
	if err := validExpected(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.findAtLocked("cancel", id, expectedRevision)
	if err != nil {
		return engine.Record{}, err
	}
	if slices.Contains(terminalStates, e.state) {
		return engine.Record{}, fmt.Errorf("model: cancel: %w", engine.ErrNotCancelable)
	}
	t := e.task()
	return m.updateLocked(e, t, func(at int64) { // S9
		ts := time.UnixMicro(at).UTC()
		t.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: &ts}
	})
}

func (m *model) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	return m.AppendHistoryIf(ctx, id, msg, 0)
}

func (m *model) AppendHistoryIf(_ context.Context, id a2a.TaskID, msg *a2a.Message, expectedRevision int64) (engine.Record, error) {
	if msg == nil || msg.ID == "" {
		return engine.Record{}, errModelInvalid
	}
	if err := (engine.Limits{}).ValidateMessage(msg); err != nil {
		return engine.Record{}, err
	}
	if err := validExpected(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.findAtLocked("append", id, expectedRevision)
	if err != nil {
		return engine.Record{}, err
	}
	t := e.task()
	for _, h := range t.History {
		if h != nil && h.ID == msg.ID {
			return e.record(), nil // S3: deduplicated
		}
	}
	t.History = append(t.History, msg) // encoded below: the store keeps no pointer
	if err := (engine.Limits{}).CheckTask(t); err != nil {
		return engine.Record{}, err
	}
	return m.updateLocked(e, t, nil)
}

func (m *model) Delete(ctx context.Context, id a2a.TaskID) error {
	return m.DeleteIf(ctx, id, 0)
}

func (m *model) DeleteIf(_ context.Context, id a2a.TaskID, expectedRevision int64) error {
	if err := validExpected(expectedRevision); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.findAtLocked("delete", id, expectedRevision)
	if err != nil {
		return err
	}
	m.removeLocked(e)
	return nil
}

// modelRequest is a list request the model accepted.
type modelRequest struct {
	*engine.ListRequest
	size     int            // the page size used
	boundary *engine.Cursor // nil: from the start
}

// accept validates a list request (L3, T4, O1): page size 0 (meaning 50) or
// 1..100, a known status or none, a history length of at least 0, a context
// ID of at most 1024 bytes, an owner the store could record, a known
// projection, and an empty or valid page token (for a text-only backend,
// with a boundary ID it can store).
func (m *model) accept(req *engine.ListRequest) (modelRequest, error) {
	if req == nil {
		return modelRequest{}, errModelInvalid
	}
	r := modelRequest{ListRequest: req, size: req.PageSize}
	if r.size == 0 {
		r.size = specDefaultPageSize
	}
	switch {
	case r.size < 1 || r.size > specMaxPageSize,
		req.Status != a2a.TaskStateUnspecified && !slices.Contains(allStates, req.Status),
		req.HistoryLength != nil && *req.HistoryLength < 0,
		len(req.ContextID) > specMaxIDBytes,
		m.validOwner(req.Owner) != nil,
		req.Projection != engine.ProjectionFull && req.Projection != engine.ProjectionLight:
		return modelRequest{}, errModelInvalid
	}
	if req.PageToken != "" {
		c, ok := specBoundary(req.PageToken)
		if !ok || !m.binary && !textID(string(c.ID)) {
			return modelRequest{}, engine.ErrInvalidPageToken
		}
		r.boundary = &c
	}
	return r, nil
}

// passes reports whether e passes req's filters (L2, O3): exact owner,
// exact context ID, exact state, and a status timestamp at or after
// StatusTimestampAfter (none never passes that filter).
func passes(req *engine.ListRequest, e *modelEntry) bool {
	return (req.Owner == "" || e.owner == req.Owner) &&
		(req.ContextID == "" || e.ctx == req.ContextID) &&
		(req.Status == a2a.TaskStateUnspecified || e.state == req.Status) &&
		(req.StatusTimestampAfter == nil || e.ts != nil && !e.ts.Before(*req.StatusTimestampAfter))
}

// shape returns the task as a page returns it (L4): light, or trimmed to
// the last HistoryLength messages and without artifacts unless asked for.
func (r *modelRequest) shape(t *a2a.Task) *a2a.Task {
	if r.Projection == engine.ProjectionLight {
		return &a2a.Task{ID: t.ID, ContextID: t.ContextID, Metadata: t.Metadata,
			Status: a2a.TaskStatus{State: t.Status.State, Timestamp: t.Status.Timestamp}}
	}
	if n := r.HistoryLength; n != nil && len(t.History) > *n {
		t.History = t.History[len(t.History)-*n:]
		if *n == 0 {
			t.History = nil
		}
	}
	if !r.IncludeArtifacts {
		t.Artifacts = nil
	}
	return t
}

// List scans every task in list order (L1–L6, O3–O5): the filters first,
// then the boundary; the page takes the first size tasks after it, with
// their owners, and a next token (the last returned cursor) only when
// another matching task follows (T6); the total counts every match,
// ignoring the boundary (L5).
func (m *model) List(_ context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	r, err := m.accept(req)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	resp := &engine.ListResponse{Tasks: []*a2a.Task{}, TaskCursors: []engine.Cursor{}, TaskOwners: []string{}, PageSize: r.size}
	more, total := false, 0
	for _, e := range m.mu.list {
		if !passes(req, e) {
			continue
		}
		total++
		if r.boundary != nil && !listedBefore(*r.boundary, e.cur) {
			continue
		}
		if len(resp.Tasks) == r.size {
			more = true
			continue
		}
		resp.Tasks = append(resp.Tasks, r.shape(e.task()))
		resp.TaskCursors = append(resp.TaskCursors, e.cur)
		resp.TaskOwners = append(resp.TaskOwners, e.owner)
	}
	if more {
		resp.NextPageToken = specToken(resp.TaskCursors[len(resp.TaskCursors)-1])
	}
	if req.IncludeTotalSize {
		resp.TotalSize = total
	}
	return resp, nil
}

// CheckInvariants checks the list is strictly ordered and matches the map.
func (m *model) CheckInvariants() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.mu.list) != len(m.mu.byID) {
		return fmt.Errorf("model: %d list entries, %d tasks", len(m.mu.list), len(m.mu.byID))
	}
	for i, e := range m.mu.list {
		if m.mu.byID[e.cur.ID] != e {
			return fmt.Errorf("model: entry %s not the map's", fmtCursor(e.cur))
		}
		if i > 0 && !listedBefore(m.mu.list[i-1].cur, e.cur) {
			return fmt.Errorf("model: entries %d and %d out of order", i-1, i)
		}
	}
	return nil
}

// matching returns the IDs of the tasks that pass req's filters now.
func (m *model) matching(req engine.ListRequest) map[a2a.TaskID]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[a2a.TaskID]bool)
	for _, e := range m.mu.list {
		if passes(&req, e) {
			out[e.cur.ID] = true
		}
	}
	return out
}

// revision returns id's current revision, or 0 when it does not exist.
func (m *model) revision(id a2a.TaskID) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.mu.byID[id]; ok {
		return e.rev
	}
	return 0
}

// get returns id's current task, or nil.
func (m *model) get(id a2a.TaskID) *a2a.Task {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.mu.byID[id]; ok {
		return e.task()
	}
	return nil
}
