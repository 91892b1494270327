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

// List returns one page (L1–L9, O3–O5). The total and the page are read
// under one shared lock from the one index that holds only candidates: the
// (owner, context) index, the owner's, the context's or the global one. A
// light page is built under the lock (no decoding: the light fields are
// stored as they are returned); a full page keeps references to the stored
// bodies and decodes them after the lock is released.
func (s *Store) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	light := q.Projection == engine.ProjectionLight
	var pg page
	pg.init(q.PageSize, light)
	more, examined, counted, total := false, 0, 0, 0
	// visit offers the page the task at (at, id) of record rec, whose light
	// fields are lf (the index's copy, or the record's), and reports whether
	// the scan goes on: until the page is full and one more match (the
	// look-ahead) is found.
	visit := func(at int64, id a2a.TaskID, lf *lightFields, rec *record) bool {
		examined++
		if !matches(&q, rec, lf) {
			return true
		}
		if len(pg.cursors) == q.PageSize {
			more = true
			return false
		}
		pg.add(at, id, lf, rec, light)
		return true
	}

	s.mu.RLock()
	if s.mu.closed {
		s.mu.RUnlock()
		return nil, errClosed
	}
	if q.Owner != "" {
		idx := s.mu.byOwner[q.Owner] // nil: the owner has no task
		if q.ContextID != "" {
			idx = s.mu.byOwnerCtx[ownerCtx{q.Owner, q.ContextID}]
		}
		if q.IncludeTotalSize {
			total, counted = s.ownerTotalLocked(&q, idx)
		}
		if idx != nil {
			visitRef := func(r ref) bool { return visit(r.at, r.rec.id, &r.rec.lightFields, r.rec) }
			if q.After != nil {
				idx.Ascend(probeAfter(q.After), visitRef)
			} else {
				idx.Scan(visitRef)
			}
		}
	} else {
		idx := s.mu.order
		if q.ContextID != "" {
			idx = s.mu.byCtx[q.ContextID] // nil: no task has this context
		}
		if q.IncludeTotalSize {
			total, counted = s.totalLocked(&q, idx)
		}
		if idx != nil {
			visitEntry := func(e entry) bool { return visit(e.at, e.id, &e.lightFields, e.rec) }
			if q.After != nil {
				idx.Ascend(entry{at: q.After.UpdatedAt, id: q.After.ID}, visitEntry)
			} else {
				idx.Scan(visitEntry)
			}
		}
	}
	s.mu.RUnlock()

	tasks, err := pg.finish(&q)
	if err != nil {
		return nil, err
	}
	resp := listpage.Response(&q, tasks, pg.cursors, more)
	resp.TaskOwners = pg.owners
	resp.TotalSize = total
	resp.Stats = engine.ListStats{Examined: examined, Counted: counted, TotalComputed: q.IncludeTotalSize}
	return resp, nil
}

// page collects a page under the lock: light tasks built in place (the
// page's tasks and timestamps share one allocation each), or the stored
// bodies of a full page.
type page struct {
	cursors []engine.Cursor
	owners  []string
	tasks   []a2a.Task  // light
	times   []time.Time // light: status timestamps, cap fixed so pointers stay valid
	metas   []metaRef   // light: tasks with metadata, decoded after the lock
	bodies  [][]byte    // full
}

func (p *page) init(size int, light bool) {
	p.cursors = make([]engine.Cursor, 0, size)
	p.owners = make([]string, 0, size)
	if light {
		p.tasks = make([]a2a.Task, 0, size)
		p.times = make([]time.Time, 0, size)
	} else {
		p.bodies = make([][]byte, 0, size)
	}
}

type metaRef struct {
	i    int
	meta []byte
}

// add appends the task at (at, id) of record rec, whose light fields are
// lf, to the page: a light page reads lf and the owner, a full page the
// owner and the body.
// REQUIRES: s.mu held.
func (p *page) add(at int64, id a2a.TaskID, lf *lightFields, rec *record, light bool) {
	p.cursors = append(p.cursors, engine.Cursor{UpdatedAt: at, ID: id})
	p.owners = append(p.owners, rec.owner)
	if !light {
		p.bodies = append(p.bodies, rec.body)
		return
	}
	p.tasks = append(p.tasks, a2a.Task{ID: id, ContextID: lf.contextID, Status: a2a.TaskStatus{State: lf.state}})
	if lf.hasStatus {
		p.times = append(p.times, lf.statusTime)
		p.tasks[len(p.tasks)-1].Status.Timestamp = &p.times[len(p.times)-1]
	}
	if lf.meta != nil {
		p.metas = append(p.metas, metaRef{len(p.tasks) - 1, lf.meta})
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

// matches applies q's filters (listpage.Matches) to the task of rec, whose
// light fields are lf. It reads the record (a pointer chase from an index
// entry) only for an owner filter.
func matches(q *engine.Query, rec *record, lf *lightFields) bool {
	var ts *time.Time
	if lf.hasStatus {
		ts = &lf.statusTime
	}
	owner := ""
	if q.Owner != "" {
		owner = rec.owner
	}
	return listpage.Matches(q, owner, lf.contextID, lf.state, ts)
}

// totalLocked counts the tasks matching q, ignoring the boundary (L5): from
// the counters, or by scanning idx when the status timestamp filter is set.
// It returns the total and the entries it inspected.
// REQUIRES: s.mu held, q.Owner empty.
func (s *Store) totalLocked(q *engine.Query, idx *btree.BTreeG[entry]) (total, inspected int) {
	switch {
	case q.StatusAfter != nil:
		return countMatches(idx, func(e entry) bool { return matches(q, e.rec, &e.lightFields) })
	case q.ContextID != "" && q.Status != "":
		return s.mu.pairs[ctxState{q.ContextID, q.Status}], 0
	case q.Status != "":
		return s.mu.states[q.Status], 0
	case idx != nil:
		return idx.Len(), 0
	}
	return 0, 0
}

// ownerTotalLocked counts the tasks of q.Owner matching q, ignoring the
// boundary (L5, O4), reading only that owner's tasks (O6): the owner's count
// or its (owner, context) count is idx's length, (owner, state) has a
// counter; owner, context and state together, and the status timestamp
// filter, scan idx (the owner's or the (owner, context) index).
// REQUIRES: s.mu held, q.Owner set.
func (s *Store) ownerTotalLocked(q *engine.Query, idx *btree.BTreeG[ref]) (total, inspected int) {
	switch {
	case q.StatusAfter != nil, q.ContextID != "" && q.Status != "":
		return countMatches(idx, func(r ref) bool { return matches(q, r.rec, &r.rec.lightFields) })
	case q.Status != "":
		return s.mu.ownerStates[ownerState{q.Owner, q.Status}], 0
	case idx != nil:
		return idx.Len(), 0
	}
	return 0, 0
}

// countMatches scans idx (nil: empty) and counts the items that match.
// REQUIRES: s.mu held.
func countMatches[T any](idx *btree.BTreeG[T], match func(T) bool) (total, inspected int) {
	if idx == nil {
		return 0, 0
	}
	idx.Scan(func(item T) bool {
		inspected++
		if match(item) {
			total++
		}
		return true
	})
	return total, inspected
}
