package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// model is the reference store: a slice kept in list order (S6), scanned
// linearly by List, tasks kept as their JSON encoding. It is deliberately
// simple so that it is obviously right; the suite runs it beside the real
// store and proves itself against it in its own tests.
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
	ctx   string // raw context ID (JSON would replace invalid UTF-8)
	state a2a.TaskState
	ts    *time.Time // status timestamp, for filters without decoding
	data  []byte     // engine.EncodeTask
}

func newEntry(t *a2a.Task, at, rev int64) (*modelEntry, error) {
	data, err := engine.EncodeTask(t)
	if err != nil {
		return nil, err
	}
	e := &modelEntry{cur: engine.Cursor{UpdatedAt: at, ID: t.ID}, rev: rev, ctx: t.ContextID, state: t.Status.State, data: data}
	if t.Status.Timestamp != nil {
		ts := *t.Status.Timestamp
		e.ts = &ts
	}
	return e, nil
}

var _ engine.Store = (*model)(nil)

func newModel(clock engine.Clock, binary bool) *model {
	if clock == nil {
		clock = engine.WallClock
	}
	m := &model{clock: clock, binary: binary}
	m.mu.byID = make(map[a2a.TaskID]*modelEntry)
	return m
}

func (m *model) validate(t *a2a.Task) error {
	if err := (engine.Limits{}).ValidateTask(t); err != nil {
		return err
	}
	if !m.binary && (!textID(string(t.ID)) || !textID(t.ContextID)) {
		return fmt.Errorf("model: ID with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
	}
	return nil
}

// textID reports whether s can be stored by a text-only backend.
func textID(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return false
		}
	}
	return utf8.ValidString(s)
}

// REQUIRES: m.mu held.
func (m *model) insertLocked(e *modelEntry) {
	i, _ := slices.BinarySearchFunc(m.mu.list, e.cur, func(x *modelEntry, c engine.Cursor) int { return x.cur.Compare(c) })
	m.mu.list = slices.Insert(m.mu.list, i, e)
	m.mu.byID[e.cur.ID] = e
}

// REQUIRES: m.mu held.
func (m *model) removeLocked(e *modelEntry) {
	i, ok := slices.BinarySearchFunc(m.mu.list, e.cur, func(x *modelEntry, c engine.Cursor) int { return x.cur.Compare(c) })
	if !ok {
		panic("model: entry not in list")
	}
	m.mu.list = slices.Delete(m.mu.list, i, i+1)
	delete(m.mu.byID, e.cur.ID)
}

func (e *modelEntry) task() *a2a.Task {
	t, err := engine.DecodeTask(e.data)
	if err != nil {
		panic(err)
	}
	t.ID, t.ContextID = e.cur.ID, e.ctx
	return t
}

func (e *modelEntry) record() engine.Record {
	return engine.Record{Task: e.task(), Revision: e.rev, Cursor: e.cur}
}

func (m *model) Create(_ context.Context, t *a2a.Task) (engine.Record, error) {
	if err := m.validate(t); err != nil {
		return engine.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mu.byID[t.ID]; ok {
		return engine.Record{}, fmt.Errorf("model: create: %w", engine.ErrAlreadyExists)
	}
	e, err := newEntry(t, engine.CreateTime(m.clock()), 1)
	if err != nil {
		return engine.Record{}, err
	}
	m.insertLocked(e)
	return e.record(), nil
}

func (m *model) Get(_ context.Context, id a2a.TaskID) (engine.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.mu.byID[id]
	if !ok {
		return engine.Record{}, fmt.Errorf("model: get: %w", engine.ErrNotFound)
	}
	return e.record(), nil
}

// updateLocked stores t as the new content of e at the next time (S4).
// REQUIRES: m.mu held.
func (m *model) updateLocked(e *modelEntry, t *a2a.Task, stamp func(at int64)) (engine.Record, error) {
	at, err := engine.NextTime(e.cur.UpdatedAt, m.clock())
	if err != nil {
		return engine.Record{}, err
	}
	if stamp != nil {
		stamp(at)
	}
	ne, err := newEntry(t, at, e.rev+1)
	if err != nil {
		return engine.Record{}, err
	}
	m.removeLocked(e)
	m.insertLocked(ne)
	return ne.record(), nil
}

func (m *model) Replace(_ context.Context, t *a2a.Task, expectedRevision int64) (engine.Record, error) {
	if err := m.validate(t); err != nil {
		return engine.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.mu.byID[t.ID]
	if !ok {
		return engine.Record{}, fmt.Errorf("model: replace: %w", engine.ErrNotFound)
	}
	if expectedRevision != 0 && expectedRevision != e.rev {
		return engine.Record{}, fmt.Errorf("model: replace: %w", engine.ErrRevisionConflict)
	}
	return m.updateLocked(e, t, nil)
}

func (m *model) Cancel(_ context.Context, id a2a.TaskID) (engine.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.mu.byID[id]
	if !ok {
		return engine.Record{}, fmt.Errorf("model: cancel: %w", engine.ErrNotFound)
	}
	t := e.task()
	if t.Status.State.Terminal() {
		return engine.Record{}, fmt.Errorf("model: cancel: %w", engine.ErrNotCancelable)
	}
	return m.updateLocked(e, t, func(at int64) {
		ts := time.UnixMicro(at).UTC()
		t.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: &ts}
	})
}

func (m *model) AppendHistory(_ context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	if err := (engine.Limits{}).ValidateMessage(msg); err != nil {
		return engine.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.mu.byID[id]
	if !ok {
		return engine.Record{}, fmt.Errorf("model: append: %w", engine.ErrNotFound)
	}
	t := e.task()
	for _, h := range t.History {
		if h.ID == msg.ID {
			return e.record(), nil
		}
	}
	t.History = append(t.History, msg) // encoded below: the store keeps no pointer
	if err := (engine.Limits{}).CheckTask(t); err != nil {
		return engine.Record{}, err
	}
	return m.updateLocked(e, t, nil)
}

func (m *model) Delete(_ context.Context, id a2a.TaskID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.mu.byID[id]
	if !ok {
		return fmt.Errorf("model: delete: %w", engine.ErrNotFound)
	}
	m.removeLocked(e)
	return nil
}

func (m *model) List(_ context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	if q.After != nil && !m.binary && !textID(string(q.After.ID)) {
		return nil, engine.ErrInvalidPageToken
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var tasks []*a2a.Task
	var cursors []engine.Cursor
	more, total := false, 0
	for _, e := range m.mu.list {
		if !q.Matches(e.ctx, e.state, e.ts) {
			continue
		}
		total++
		if q.After != nil && e.cur.Compare(*q.After) <= 0 {
			continue
		}
		if len(tasks) == q.PageSize {
			more = true
			continue
		}
		t := e.task()
		if q.Projection == engine.ProjectionLight {
			md, err := engine.EncodeMetadata(t.Metadata)
			if err != nil {
				return nil, err
			}
			if t, err = engine.LightTask(t.ID, t.ContextID, t.Status, md); err != nil {
				return nil, err
			}
		} else {
			q.Shape(t)
		}
		tasks, cursors = append(tasks, t), append(cursors, e.cur)
	}
	resp := q.Page(tasks, cursors, more)
	if q.IncludeTotalSize {
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
		if i > 0 && m.mu.list[i-1].cur.Compare(e.cur) >= 0 {
			return fmt.Errorf("model: entries %d and %d out of order", i-1, i)
		}
	}
	return nil
}

// matching returns the IDs of the tasks that pass req's filters now.
func (m *model) matching(req engine.ListRequest) map[a2a.TaskID]bool {
	req.PageToken, req.PageSize = "", 0
	q, err := engine.ParseListRequest(&req)
	if err != nil {
		panic(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[a2a.TaskID]bool)
	for _, e := range m.mu.list {
		if q.Matches(e.ctx, e.state, e.ts) {
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
