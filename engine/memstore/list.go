package memstore

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/tidwall/btree"

	"github.com/a2astore/a2astore/engine"
)

// hit is what a page needs of one selected record, copied under the lock.
type hit struct {
	cursor     engine.Cursor
	contextID  string
	state      a2a.TaskState
	statusTime time.Time
	hasStatus  bool
	meta       []byte
	body       []byte
}

// List returns one page (L1–L9). The total and the page are read under one
// shared lock; decoding happens after it is released.
func (s *Store) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	hits := make([]hit, 0, q.PageSize)
	more, examined, counted, total := false, 0, 0, 0

	s.mu.RLock()
	if s.mu.closed {
		s.mu.RUnlock()
		return nil, errClosed
	}
	idx := s.mu.order
	if q.ContextID != "" {
		idx = s.mu.byCtx[q.ContextID] // nil: no task has this context
	}
	if q.IncludeTotalSize {
		total, counted = s.totalLocked(&q, idx)
	}
	if idx != nil {
		visit := func(e entry) bool {
			examined++
			r := e.rec
			if !matches(&q, r) {
				return true
			}
			if len(hits) == q.PageSize {
				more = true
				return false
			}
			hits = append(hits, hit{
				cursor: engine.Cursor{UpdatedAt: e.at, ID: e.id}, contextID: r.contextID, state: r.state,
				statusTime: r.statusTime, hasStatus: r.hasStatus, meta: r.meta, body: r.body,
			})
			return true
		}
		if q.After != nil {
			idx.Ascend(entry{at: q.After.UpdatedAt, id: q.After.ID, after: true}, visit)
		} else {
			idx.Scan(visit)
		}
	}
	s.mu.RUnlock()

	if st := engine.ListStatsFrom(ctx); st != nil {
		st.Examined += examined
		st.Counted += counted
		st.TotalComputed = st.TotalComputed || q.IncludeTotalSize
	}
	var resp *engine.ListResponse
	if q.Projection == engine.ProjectionLight {
		resp, err = lightPage(&q, hits, more)
	} else {
		resp, err = fullPage(&q, hits, more)
	}
	if err != nil {
		return nil, err
	}
	resp.TotalSize = total
	return resp, nil
}

func matches(q *engine.Query, r *record) bool {
	var ts *time.Time
	if r.hasStatus {
		ts = &r.statusTime
	}
	return q.Matches(r.contextID, r.state, ts)
}

// totalLocked counts the tasks matching q, ignoring the boundary (L5): from
// the counters, or by scanning idx when the status timestamp filter is set.
// It returns the total and the entries it inspected.
// REQUIRES: s.mu held.
func (s *Store) totalLocked(q *engine.Query, idx *btree.BTreeG[entry]) (total, inspected int) {
	switch {
	case q.StatusAfter != nil:
		if idx != nil {
			idx.Scan(func(e entry) bool {
				inspected++
				if matches(q, e.rec) {
					total++
				}
				return true
			})
		}
		return total, inspected
	case q.ContextID != "" && q.Status != "":
		return s.mu.pairs[ctxState{q.ContextID, q.Status}], 0
	case q.Status != "":
		return s.mu.states[q.Status], 0
	case idx != nil:
		return idx.Len(), 0
	}
	return 0, 0
}

// lightPage builds ProjectionLight tasks from the hits: no task body is
// decoded, and the page's tasks share three allocations.
func lightPage(q *engine.Query, hits []hit, more bool) (*engine.ListResponse, error) {
	tasks := make([]a2a.Task, len(hits))
	ptrs := make([]*a2a.Task, len(hits))
	cursors := make([]engine.Cursor, len(hits))
	var times []time.Time
	for i := range hits {
		h := &hits[i]
		t := &tasks[i]
		t.ID, t.ContextID, t.Status.State = h.cursor.ID, h.contextID, h.state
		if h.hasStatus {
			if times == nil {
				times = make([]time.Time, len(hits))
			}
			times[i] = h.statusTime
			t.Status.Timestamp = &times[i]
		}
		if h.meta != nil {
			m, err := engine.DecodeMetadata(h.meta)
			if err != nil {
				return nil, err
			}
			t.Metadata = m
		}
		ptrs[i], cursors[i] = t, h.cursor
	}
	return q.Page(ptrs, cursors, more), nil
}

// fullPage decodes each hit's task and shapes it for the request (L4).
func fullPage(q *engine.Query, hits []hit, more bool) (*engine.ListResponse, error) {
	tasks := make([]*a2a.Task, len(hits))
	cursors := make([]engine.Cursor, len(hits))
	for i := range hits {
		t, err := engine.DecodeTask(hits[i].body)
		if err != nil {
			return nil, err
		}
		q.Shape(t)
		tasks[i], cursors[i] = t, hits[i].cursor
	}
	return q.Page(tasks, cursors, more), nil
}
