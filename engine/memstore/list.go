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

// List returns one page (L1–L9, O3–O5, C7). The total and the page are
// read under one shared lock from the one index that holds only
// candidates: the (owner, context) range, the (owner, state) range, the
// owner's, the context's, the state's or the global index (rangeLocked).
// The index decides the owner and context filters, and the state filter
// too where it is part of the key, so a visited entry is checked for what
// is left (the state in an owner+context or context range, the status
// time). Under the lock a page builds each task's light fields; after it,
// it decodes the stored bodies: only metadata for a light page, the
// metadata and status message for a full one that returns no history and
// no artifacts, and the rest of each task for any other full one
// (depthOf).
func (s *Store) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	var pg page
	pg.init(q.PageSize, depthOf(&q))
	more, examined, counted, total := false, 0, 0, 0
	var rest engine.Query // q without the filters the index decides; set under the lock
	// visit offers the page the entry e and reports whether the scan goes
	// on: until the page is full and one more match (the look-ahead) is
	// found.
	visit := func(e *entry) bool {
		examined++
		if !matches(&rest, e) {
			return true
		}
		if len(pg.cursors) == q.PageSize {
			more = true
			return false
		}
		s.addLocked(&pg, e)
		return true
	}

	// The total and the page under one shared lock, released by defer (a
	// panic must not leave it held).
	if err := func() error {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if s.mu.closed {
			return errClosed
		}
		r, ok := s.rangeLocked(&q)
		if !ok {
			return nil // no task has q's owner or context: an empty page, total 0
		}
		rest = r.rest(&q)
		limit := 0 // the entries the page visits, when known (scan)
		if rest.Status == a2a.TaskStateUnspecified && rest.StatusAfter == nil {
			limit = q.PageSize + 1
		}
		if q.IncludeTotalSize {
			total, counted = s.totalLocked(&q, &rest, r)
		}
		s.scanRange(r, q.After, limit, visit)
		pg.detach() // before the lock goes: a dropped chunk is reused
		return nil
	}(); err != nil {
		return nil, err
	}

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

// keyRange is the entries of one key of an index: the tasks of a context,
// of an owner, of an owner in a context, of a state or of an owner in a
// state; or the whole global index (idx nil).
type keyRange struct {
	idx        *btree.BTreeG[keyed] // nil: the global index
	key        uint64
	owner, ctx sym  // q's owner and context (noOwner, 0: none)
	state      bool // the key decides q's state filter
}

// rest returns q without the filters r decides: the owner, the context
// and, when r's key holds it, the state.
func (r *keyRange) rest(q *engine.Query) engine.Query {
	rest := *q
	rest.Owner, rest.ContextID = "", ""
	if r.state {
		rest.Status = a2a.TaskStateUnspecified
	}
	return rest
}

// rangeLocked returns the range of the index that holds only q's
// candidates (a nil idx for the global index); ok is false when no task
// has q's owner or context. A state filter takes the (owner, state) or
// the state index unless a context narrows the range further (C7: with a
// context, at most the tasks of that context, or of that owner in it).
// REQUIRES: s.mu held.
func (s *Store) rangeLocked(q *engine.Query) (r keyRange, ok bool) {
	if q.ContextID != "" {
		if r.ctx, ok = s.mu.contexts.lookup(q.ContextID); !ok {
			return keyRange{}, false
		}
	}
	if q.Owner != "" {
		if r.owner, ok = s.mu.owners.lookup(q.Owner); !ok {
			return keyRange{}, false
		}
	}
	st, byState := stateNumber(q.Status)
	switch {
	case q.Owner != "" && q.ContextID != "":
		r.idx, r.key = s.mu.byOwnerCtx, ownerCtxKey(r.owner, r.ctx)
	case q.ContextID != "":
		r.idx, r.key = s.mu.byCtx, uint64(r.ctx)
	case q.Owner != "" && byState:
		r.idx, r.key, r.state = s.mu.byOwnerState, ownerStateKey(r.owner, st), true
	case q.Owner != "":
		r.idx, r.key = s.mu.byOwner, uint64(r.owner)
	case byState:
		r.idx, r.key, r.state = s.mu.byState, uint64(st), true
	}
	return r, true
}

// scanRange visits r's entries from just after the boundary (nil: from
// the start) until visit returns false or the range ends. limit is the
// number of entries visit takes when that is known (a page whose filters
// the index decides all: its size plus one), and the scan then visits
// them in batches (batch); 0 when it is not (a filtered page, a count),
// and the scan then visits each entry as the index offers it.
// REQUIRES: s.mu held.
func (s *Store) scanRange(r keyRange, after *engine.Cursor, limit int, visit func(e *entry) bool) {
	b := batch{t: &s.mu.slots, visit: visit, left: limit}
	var p uint32 // the boundary's probe, when there is one
	if after != nil {
		p = s.probes.get(after.ID)
		defer s.probes.put(p)
	}
	if r.idx == nil {
		fn := func(it item) bool { return b.add(it.slot) }
		if after == nil {
			s.mu.order.Scan(fn)
		} else {
			s.mu.order.Ascend(itemAt(after.UpdatedAt, p), fn)
		}
		b.flush()
		return
	}
	fn := func(k keyed) bool { return k.key == r.key && b.add(k.slot) }
	if after == nil {
		r.idx.Ascend(keyed{key: r.key, slot: rangeStart}, fn)
	} else {
		r.idx.Ascend(keyed{r.key, after.UpdatedAt, p}, fn)
	}
	b.flush()
}

// batchSize is the most slots a scan gathers before it visits them.
const batchSize = 32

// batch gathers the slots an index scan offers, then visits their entries
// in index order. Before it visits a batch it loads a word of each entry
// (touch): those loads do not depend on one another, so the processor
// overlaps their cache misses, where visiting each entry as it comes
// waits for one miss at a time (#31: a page of entries that are not in
// the cache, as a context's first page usually is, spent a third of its
// time on them). A batch without a limit (left 0) visits each entry as
// it is offered: when visit may reject entries, a batch touches entries
// it never visits, and scans of entries in the cache were a third slower
// batched (op=total/…/filter=timestamp and filter=context+state at 1e4).
type batch struct {
	t     *slots
	visit func(e *entry) bool
	slots [batchSize]uint32
	n     int
	left  int // entries visit takes still; 0: visit each entry at once
}

// add gathers slot; it reports whether the scan goes on.
func (b *batch) add(slot uint32) bool {
	if b.left == 0 { // a direct scan, or a batched one that visit stopped
		return b.visit(b.t.at(slot))
	}
	b.slots[b.n] = slot
	b.n++
	if b.n < len(b.slots) && b.n < b.left {
		return true
	}
	return b.flush()
}

// flush visits the gathered entries; it reports whether visit took them
// all.
func (b *batch) flush() bool {
	sl := b.slots[:b.n]
	b.n = 0
	b.left = max(b.left-len(sl), 0)
	touch(b.t, sl)
	for _, i := range sl {
		if !b.visit(b.t.at(i)) {
			return false
		}
	}
	return true
}

// touch loads a byte of each entry of sl at most 64 bytes apart, from
// start to end (an entry of 112 bytes spans up to three cache lines; a
// page reads its ID from the end), and returns a value made of them, so
// that the loads are not compiled away.
//
//go:noinline
func touch(t *slots, sl []uint32) (sum uint8) {
	for _, i := range sl {
		e := t.at(i)
		sum += uint8(e.rec.id) + e.status[0] + e.state + e.sid[idInline-1]
	}
	return sum
}

// page collects a page. Under the lock it builds each task's light fields
// into the page's tasks and their status timestamps (a slice each, sized
// once: two size classes waste less than one, 7,424 bytes for a page of
// 50 against 8,192) and keeps a reference to the bodies it must decode; it
// decodes them after the lock is released, as deep as its depth says: the
// metadata of a light page, the metadata and status message of a full one
// without history or artifacts, the metadata and rest of any other.
type page struct {
	depth   depth
	cursors []engine.Cursor
	owners  []string
	tasks   []a2a.Task  // cap fixed so pointers stay valid
	times   []time.Time // the tasks' status timestamps; cap fixed as tasks'
	bodies  []bodyRef
}

// bodyRef is a body to decode into tasks[i].
type bodyRef struct {
	i       int
	body    string
	metaLen uint32
}

func (p *page) init(size int, dp depth) {
	p.depth = dp
	p.cursors = make([]engine.Cursor, 0, size)
	p.owners = make([]string, 0, size)
	p.tasks = make([]a2a.Task, 0, size)
	p.times = make([]time.Time, 0, size)
}

// addLocked appends the task of e to p.
// REQUIRES: s.mu held.
func (s *Store) addLocked(p *page, e *entry) {
	c := s.mu.slots.cursor(e)
	p.cursors = append(p.cursors, c)
	p.owners = append(p.owners, s.mu.owners.names[e.owner])
	i := len(p.tasks)
	p.tasks, p.times = p.tasks[:i+1], p.times[:i+1] // zeroed by init's make; visit stops at their cap
	fillLight(&p.tasks[i], &p.times[i], c.ID, s.mu.contexts.names[e.ctx], e.state, &e.status)
	if body := s.mu.slots.body(e); needsDecoding(body, e.metaLen, p.depth) {
		if p.bodies == nil { // sized once, only for pages that decode
			p.bodies = make([]bodyRef, 0, cap(p.tasks)-i)
		}
		switch p.depth { // what the page decodes, and detach copies
		case depthLight:
			body = body[:e.metaLen]
		case depthHead:
			body = body[:s.mu.slots.head(e)]
		}
		p.bodies = append(p.bodies, bodyRef{i, body, e.metaLen})
	}
}

// finish decodes the bodies and returns the page's tasks, shaped by q
// when whole: the decoder builds only the history and artifacts q returns.
func (p *page) finish(q *engine.Query) ([]*a2a.Task, error) {
	var d *taskcodec.Decoder // one for the page, when it decodes
	if len(p.bodies) > 0 {
		d = new(taskcodec.Decoder)
		d.Shape(q.HistoryLength, q.IncludeArtifacts)
	}
	for _, b := range p.bodies {
		if err := decodeBody(&p.tasks[b.i], b.body, b.metaLen, p.depth, &d); err != nil {
			return nil, err
		}
	}
	out := make([]*a2a.Task, len(p.tasks))
	for i := range p.tasks {
		if p.depth != depthLight {
			listpage.Shape(q, &p.tasks[i])
		}
		out[i] = &p.tasks[i]
	}
	return out, nil
}

// detach copies the page's IDs and bodies out of the slab, in one
// allocation: its tasks and cursors then hold no chunk. Of each body it
// copies what the page decodes, as addLocked cut it: a light page's
// metadata, a head page's metadata and head, or all.
func (p *page) detach() {
	n := 0
	for i := range p.tasks {
		n += len(p.tasks[i].ID)
	}
	for _, b := range p.bodies {
		n += len(b.body)
	}
	cp := newCopies(n)
	for i := range p.tasks {
		id := a2a.TaskID(cp.add(string(p.tasks[i].ID)))
		p.tasks[i].ID, p.cursors[i].ID = id, id
	}
	for i := range p.bodies {
		p.bodies[i].body = cp.add(p.bodies[i].body)
	}
}

// matches applies q's state and status time filters (listpage.Matches) to
// the task of e; q has no owner or context filter (the index decides
// those). The status time's instant is read only for a status time
// filter.
func matches(q *engine.Query, e *entry) bool {
	var ts *time.Time
	if q.StatusAfter != nil {
		if at, ok := e.status.instant(); ok {
			ts = &at
		}
	}
	return listpage.Matches(q, "", "", states[e.state], ts)
}

// totalLocked counts the tasks of r matching q, ignoring the boundary
// (L5, O4), reading only r's entries (O6): the task counts of a context
// or an owner, and per state, the (owner, context) counts, the counts per
// state and of all tasks are kept; owner, context and state together, and
// the status timestamp filter, scan r. rest is r.rest(q). It returns the
// total and the entries it inspected.
// REQUIRES: s.mu held, r from rangeLocked(q).
func (s *Store) totalLocked(q, rest *engine.Query, r keyRange) (total, inspected int) {
	if q.StatusAfter != nil || q.Owner != "" && q.ContextID != "" && q.Status != "" {
		return countMatches(func(visit func(*entry) bool) { s.scanRange(r, nil, 0, visit) }, rest)
	}
	st, byState := stateNumber(q.Status)
	var c *counts // the counts of q's owner or context
	switch {
	case q.Owner != "" && q.ContextID != "":
		return s.mu.ownerCtx.get(r.owner, r.ctx), 0
	case q.Owner != "":
		c = &s.mu.owners.count[r.owner]
	case q.ContextID != "":
		c = &s.mu.contexts.count[r.ctx]
	case byState:
		return s.mu.states[st], 0
	default:
		return s.mu.ids.len(), 0
	}
	if byState {
		return int(c.states[st]), 0
	}
	return c.total(), 0
}

// countMatches counts the entries that scanAll offers and that match rest.
// REQUIRES: s.mu held.
func countMatches(scanAll func(visit func(*entry) bool), rest *engine.Query) (total, inspected int) {
	scanAll(func(e *entry) bool {
		inspected++
		if matches(rest, e) {
			total++
		}
		return true
	})
	return total, inspected
}
