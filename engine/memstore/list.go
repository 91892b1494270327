package memstore

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/tidwall/btree"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/listpage"
	"github.com/a2astore/a2astore/engine/taskcodec"
)

// List returns one page (L1–L9). The total and the page are read under one
// shared lock. A light page is built under it (no decoding: the light fields
// are stored as they are returned); a full page keeps references to the
// stored bodies and decodes them after the lock is released.
func (s *Store) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	light := q.Projection == engine.ProjectionLight
	var pg page
	pg.cursors = make([]engine.Cursor, 0, q.PageSize)
	if light {
		pg.tasks = make([]a2a.Task, 0, q.PageSize)
		pg.times = make([]time.Time, 0, q.PageSize)
	} else {
		pg.bodies = make([][]byte, 0, q.PageSize)
	}
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
			if !matches(&q, &e.lightFields) {
				return true
			}
			if len(pg.cursors) == q.PageSize {
				more = true
				return false
			}
			pg.add(&e, light)
			return true
		}
		if q.After != nil {
			idx.Ascend(entry{at: q.After.UpdatedAt, id: q.After.ID, after: true}, visit)
		} else {
			idx.Scan(visit)
		}
	}
	s.mu.RUnlock()

	tasks, err := pg.finish(&q)
	if err != nil {
		return nil, err
	}
	resp := listpage.Response(&q, tasks, pg.cursors, more)
	resp.TotalSize = total
	resp.Stats = engine.ListStats{Examined: examined, Counted: counted, TotalComputed: q.IncludeTotalSize}
	return resp, nil
}

// page collects a page under the lock: light tasks built in place (the
// page's tasks and timestamps share one allocation each), or the stored
// bodies of a full page.
type page struct {
	cursors []engine.Cursor
	tasks   []a2a.Task  // light
	times   []time.Time // light: status timestamps, cap fixed so pointers stay valid
	metas   []metaRef   // light: tasks with metadata, decoded after the lock
	bodies  [][]byte    // full
}

type metaRef struct {
	i    int
	meta []byte
}

// add appends the task of index entry r to the page; a light page reads
// only the entry.
// REQUIRES: s.mu held.
func (p *page) add(r *entry, light bool) {
	p.cursors = append(p.cursors, engine.Cursor{UpdatedAt: r.at, ID: r.id})
	if !light {
		p.bodies = append(p.bodies, r.rec.body)
		return
	}
	p.tasks = append(p.tasks, a2a.Task{ID: r.id, ContextID: r.contextID, Status: a2a.TaskStatus{State: r.state}})
	if r.hasStatus {
		p.times = append(p.times, r.statusTime)
		p.tasks[len(p.tasks)-1].Status.Timestamp = &p.times[len(p.times)-1]
	}
	if r.meta != nil {
		p.metas = append(p.metas, metaRef{len(p.tasks) - 1, r.meta})
	}
}

// finish decodes what could not be built under the lock and returns the
// page's tasks.
func (p *page) finish(q *engine.Query) ([]*a2a.Task, error) {
	out := make([]*a2a.Task, len(p.cursors))
	if p.bodies == nil {
		for _, m := range p.metas {
			md, err := taskcodec.DecodeMetadata(m.meta)
			if err != nil {
				return nil, err
			}
			p.tasks[m.i].Metadata = md
		}
		for i := range p.tasks {
			out[i] = &p.tasks[i]
		}
		return out, nil
	}
	for i, body := range p.bodies {
		t, err := taskcodec.DecodeTask(body)
		if err != nil {
			return nil, err
		}
		listpage.Shape(q, t)
		out[i] = t
	}
	return out, nil
}

func matches(q *engine.Query, r *lightFields) bool {
	var ts *time.Time
	if r.hasStatus {
		ts = &r.statusTime
	}
	return listpage.Matches(q, "", r.contextID, r.state, ts)
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
				if matches(q, &e.lightFields) {
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
