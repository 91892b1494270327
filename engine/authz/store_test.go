package authz_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// sliceStore is a small engine.Store for these tests: tasks in a slice
// sorted oldest first (the reverse of list order), so creates with a rising
// clock append. It stands in for a backend where a test needs to control
// exactly what the store holds.
type sliceStore struct {
	clock engine.Clock
	mu    struct {
		sync.Mutex
		es   []*sliceEntry // es[i] is listed after es[j] for i < j
		byID map[a2a.TaskID]engine.Cursor
	}
}

type sliceEntry struct {
	c    engine.Cursor
	rev  int64
	task *a2a.Task // private copy
}

var _ engine.Store = (*sliceStore)(nil)

func newSliceStore(clock engine.Clock) *sliceStore {
	s := &sliceStore{clock: clock}
	s.mu.byID = make(map[a2a.TaskID]engine.Cursor)
	return s
}

func timeOf(us int64) time.Time { return time.UnixMicro(us).UTC() }

func copyTask(t *a2a.Task) *a2a.Task {
	b, err := engine.EncodeTask(t)
	if err != nil {
		panic(err)
	}
	c, err := engine.DecodeTask(b)
	if err != nil {
		panic(err)
	}
	return c
}

// findLocked returns the index of id or -1. REQUIRES: s.mu held.
func (s *sliceStore) findLocked(id a2a.TaskID) int {
	c, ok := s.mu.byID[id]
	if !ok {
		return -1
	}
	return sort.Search(len(s.mu.es), func(i int) bool { return s.mu.es[i].c.Compare(c) <= 0 })
}

// placeLocked inserts e at its list position. REQUIRES: s.mu held.
func (s *sliceStore) placeLocked(e *sliceEntry) {
	i := sort.Search(len(s.mu.es), func(i int) bool { return s.mu.es[i].c.Compare(e.c) < 0 })
	s.mu.es = slices.Insert(s.mu.es, i, e)
	s.mu.byID[e.c.ID] = e.c
}

func (e *sliceEntry) record() engine.Record {
	return engine.Record{Task: copyTask(e.task), Revision: e.rev, Cursor: e.c}
}

func (s *sliceStore) Create(_ context.Context, t *a2a.Task) (engine.Record, error) {
	if err := engine.ValidateTask(t); err != nil {
		return engine.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findLocked(t.ID) >= 0 {
		return engine.Record{}, engine.ErrAlreadyExists
	}
	e := &sliceEntry{c: engine.Cursor{UpdatedAt: engine.CreateTime(s.clock()), ID: t.ID}, rev: 1, task: copyTask(t)}
	s.placeLocked(e)
	return e.record(), nil
}

func (s *sliceStore) Get(_ context.Context, id a2a.TaskID) (engine.Record, error) {
	if err := engine.ValidateID(id); err != nil {
		return engine.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.findLocked(id)
	if i < 0 {
		return engine.Record{}, fmt.Errorf("slicestore: get %q: %w", id, engine.ErrNotFound)
	}
	return s.mu.es[i].record(), nil
}

// mutate applies f to the task id under the lock and advances it.
func (s *sliceStore) mutate(id a2a.TaskID, f func(e *sliceEntry) (bool, error)) (engine.Record, error) {
	if err := engine.ValidateID(id); err != nil {
		return engine.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.findLocked(id)
	if i < 0 {
		return engine.Record{}, fmt.Errorf("slicestore: %q: %w", id, engine.ErrNotFound)
	}
	e := s.mu.es[i]
	at, err := engine.NextTime(e.c.UpdatedAt, s.clock())
	if err != nil {
		return engine.Record{}, err
	}
	cp := &sliceEntry{c: engine.Cursor{UpdatedAt: at, ID: id}, rev: e.rev + 1, task: copyTask(e.task)}
	changed, err := f(cp)
	if err != nil || !changed {
		return e.record(), err
	}
	if cp.task.Status.State == a2a.TaskStateCanceled && e.task.Status.State != a2a.TaskStateCanceled {
		ts := timeOf(at)
		cp.task.Status.Timestamp = &ts
	}
	s.mu.es = slices.Delete(s.mu.es, i, i+1)
	s.placeLocked(cp)
	return cp.record(), nil
}

func (s *sliceStore) Replace(_ context.Context, t *a2a.Task, expected int64) (engine.Record, error) {
	if err := engine.ValidateTask(t); err != nil {
		return engine.Record{}, err
	}
	return s.mutate(t.ID, func(e *sliceEntry) (bool, error) {
		if expected != 0 && expected != e.rev-1 {
			return false, engine.ErrRevisionConflict
		}
		e.task = copyTask(t)
		return true, nil
	})
}

func (s *sliceStore) Cancel(_ context.Context, id a2a.TaskID) (engine.Record, error) {
	return s.mutate(id, func(e *sliceEntry) (bool, error) {
		if e.task.Status.State.Terminal() {
			return false, engine.ErrNotCancelable
		}
		e.task.Status = a2a.TaskStatus{State: a2a.TaskStateCanceled}
		return true, nil
	})
}

func (s *sliceStore) AppendHistory(_ context.Context, id a2a.TaskID, m *a2a.Message) (engine.Record, error) {
	if err := engine.ValidateMessage(m); err != nil {
		return engine.Record{}, err
	}
	return s.mutate(id, func(e *sliceEntry) (bool, error) {
		if slices.ContainsFunc(e.task.History, func(h *a2a.Message) bool { return h.ID == m.ID }) {
			return false, nil
		}
		e.task.History = append(e.task.History, m)
		return true, nil
	})
}

func (s *sliceStore) Delete(_ context.Context, id a2a.TaskID) error {
	if err := engine.ValidateID(id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.findLocked(id)
	if i < 0 {
		return fmt.Errorf("slicestore: %q: %w", id, engine.ErrNotFound)
	}
	s.mu.es = slices.Delete(s.mu.es, i, i+1)
	delete(s.mu.byID, id)
	return nil
}

func (s *sliceStore) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	es := s.mu.es
	top := len(es)
	if q.After != nil {
		top = sort.Search(len(es), func(i int) bool { return es[i].c.Compare(*q.After) <= 0 })
	}
	st := engine.ListStatsFrom(ctx)
	var tasks []*a2a.Task
	var cursors []engine.Cursor
	for i := top - 1; i >= 0 && len(tasks) <= q.PageSize; i-- {
		e := es[i]
		if st != nil {
			st.Examined++
		}
		if !q.Matches(e.task.ContextID, e.task.Status.State, e.task.Status.Timestamp) {
			continue
		}
		var t *a2a.Task
		if q.Projection == engine.ProjectionLight {
			md, err := engine.EncodeMetadata(e.task.Metadata)
			if err != nil {
				return nil, err
			}
			t, err = engine.LightTask(e.task.ID, e.task.ContextID, e.task.Status, md)
			if err != nil {
				return nil, err
			}
		} else {
			t = copyTask(e.task)
			q.Shape(t)
		}
		tasks, cursors = append(tasks, t), append(cursors, e.c)
	}
	resp := q.Page(tasks, cursors)
	if q.IncludeTotalSize {
		for _, e := range es {
			if q.Matches(e.task.ContextID, e.task.Status.State, e.task.Status.Timestamp) {
				resp.TotalSize++
			}
		}
	}
	return resp, nil
}
