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
// (owner, context) range, the owner's, the context's or the global index.
// The index decides the owner and context filters, so a visited entry is
// checked for the state and status time only. Under the lock a page builds
// each task's light fields; after it, it decodes the stored bodies: only
// metadata for a light page, the metadata and status message for a full
// one that returns no history and no artifacts, and the rest of each task
// for any other full one (depthOf).
func (s *Store) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	// rest is q without the filters the index decides.
	rest := q
	rest.Owner, rest.ContextID = "", ""
	var pg page
	pg.init(q.PageSize, depthOf(&q))
	limit := 0 // the entries the page visits, when known (scan)
	if rest.Status == a2a.TaskStateUnspecified && rest.StatusAfter == nil {
		limit = q.PageSize + 1
	}
	more, examined, counted, total := false, 0, 0, 0
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
		if r, ok := s.rangeLocked(&q); !ok {
			// No task has q's owner or context: an empty page, total 0.
		} else if r.idx == nil {
			if q.IncludeTotalSize {
				total, counted = s.totalLocked(&q, &rest)
			}
			s.scan(q.After, limit, visit)
		} else {
			if q.IncludeTotalSize {
				total, counted = s.keyedTotalLocked(&q, &rest, r)
			}
			s.scanRange(r, q.After, limit, visit)
		}
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

// keyRange is the entries of one key of a keyed index: the tasks of a
// context, of an owner, or of an owner in a context.
type keyRange struct {
	idx *btree.BTreeG[keyed] // nil: the global index
	key uint64
}

// rangeLocked returns the range of the index that holds only q's
// candidates (a nil idx for the global index); ok is false when no task
// has q's owner or context.
// REQUIRES: s.mu held.
func (s *Store) rangeLocked(q *engine.Query) (r keyRange, ok bool) {
	var ctx, owner sym
	if q.ContextID != "" {
		if ctx, ok = s.mu.contexts.lookup(q.ContextID); !ok {
			return keyRange{}, false
		}
	}
	if q.Owner != "" {
		if owner, ok = s.mu.owners.lookup(q.Owner); !ok {
			return keyRange{}, false
		}
	}
	switch {
	case q.Owner != "" && q.ContextID != "":
		return keyRange{s.mu.byOwnerCtx, ownerCtxKey(owner, ctx)}, true
	case q.Owner != "":
		return keyRange{s.mu.byOwner, uint64(owner)}, true
	case q.ContextID != "":
		return keyRange{s.mu.byCtx, uint64(ctx)}, true
	}
	return keyRange{}, true
}

// scan visits the global index from just after the boundary (nil: from
// the start) until visit returns false. limit is the number of entries
// visit takes when that is known (a page whose filters the index decides
// all: its size plus one), and the scan then visits them in batches
// (batch); 0 when it is not (a filtered page, a count), and the scan then
// visits each entry as the index offers it.
// REQUIRES: s.mu held.
func (s *Store) scan(after *engine.Cursor, limit int, visit func(e *entry) bool) {
	b := batch{t: &s.mu.slots, visit: visit, left: limit}
	fn := func(it item) bool { return b.add(it.slot) }
	if after == nil {
		s.mu.order.Scan(fn)
	} else {
		p := s.probes.get(after.ID)
		defer s.probes.put(p)
		s.mu.order.Ascend(item{after.UpdatedAt, p}, fn)
	}
	b.flush()
}

// scanRange visits r's entries from just after the boundary (nil: from
// the start) until visit returns false or the range ends; limit as for
// scan.
// REQUIRES: s.mu held.
func (s *Store) scanRange(r keyRange, after *engine.Cursor, limit int, visit func(e *entry) bool) {
	b := batch{t: &s.mu.slots, visit: visit, left: limit}
	fn := func(k keyed) bool { return k.key == r.key && b.add(k.slot) }
	if after == nil {
		r.idx.Ascend(keyed{key: r.key, slot: rangeStart}, fn)
	} else {
		p := s.probes.get(after.ID)
		defer s.probes.put(p)
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

// touch loads a word at the start, middle and end of each entry of sl (an
// entry of 88 bytes spans up to three cache lines) and returns a value
// made of them, so that the loads are not compiled away.
//
//go:noinline
func touch(t *slots, sl []uint32) (sum uint8) {
	for _, i := range sl {
		e := t.at(i)
		sum += uint8(len(e.id)) + e.status[0] + e.state
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
	p.cursors = append(p.cursors, e.cursor())
	p.owners = append(p.owners, s.mu.owners.names[e.owner])
	i := len(p.tasks)
	p.tasks, p.times = p.tasks[:i+1], p.times[:i+1] // zeroed by init's make; visit stops at their cap
	fillLight(&p.tasks[i], &p.times[i], e.id, s.mu.contexts.names[e.ctx], e.state, &e.status)
	if needsDecoding(e.body, e.metaLen, p.depth) {
		if p.bodies == nil { // sized once, only for pages that decode
			p.bodies = make([]bodyRef, 0, cap(p.tasks)-i)
		}
		p.bodies = append(p.bodies, bodyRef{i, e.body, e.metaLen})
	}
}

// finish decodes the bodies and returns the page's tasks, shaped by q
// when whole: the decoder builds only the history and artifacts q returns.
func (p *page) finish(q *engine.Query) ([]*a2a.Task, error) {
	var d *taskcodec.Decoder // one for the page, when it decodes
	if len(p.bodies) > 0 {
		d = new(taskcodec.Decoder)
		d.Shape(q.HistoryLength, q.IncludeArtifacts)
		touchBodies(p.bodies, p.depth)
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

// touchBodies loads the first byte of each body and, unless dp is light
// (which decodes the metadata only), of its rest, as touch does for
// entries: the decoder then finds them in the cache.
//
//go:noinline
func touchBodies(bodies []bodyRef, dp depth) (sum byte) {
	for _, b := range bodies {
		sum += b.body[0]
		if dp != depthLight && int(b.metaLen) < len(b.body) {
			sum += b.body[b.metaLen]
		}
	}
	return sum
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

// totalLocked counts the tasks matching q, ignoring the boundary (L5), when
// q has no owner or context filter: from the counters, or by scanning the
// global index when the status timestamp filter is set. rest is q without
// owner and context. It returns the total and the entries it inspected.
// REQUIRES: s.mu held.
func (s *Store) totalLocked(q, rest *engine.Query) (total, inspected int) {
	switch {
	case q.StatusAfter != nil:
		return countMatches(func(visit func(*entry) bool) { s.scan(nil, 0, visit) }, rest)
	case q.Status != "":
		st, _ := stateNumber(q.Status)
		return s.mu.states[st], 0
	}
	return s.mu.ids.len(), 0
}

// keyedTotalLocked counts the tasks of r matching q, ignoring the boundary
// (L5, O4), reading only r's entries (O6): the task counts of a context
// or an owner, and per state, and the (owner, context) counts are kept;
// owner, context and state together, and the status timestamp filter,
// scan r. rest is q without owner and context.
// REQUIRES: s.mu held, r from rangeLocked(q).
func (s *Store) keyedTotalLocked(q, rest *engine.Query, r keyRange) (total, inspected int) {
	counted := &s.mu.contexts
	if q.Owner != "" {
		counted = &s.mu.owners
	}
	switch {
	case q.StatusAfter != nil, q.Owner != "" && q.ContextID != "" && q.Status != "":
		return countMatches(func(visit func(*entry) bool) { s.scanRange(r, nil, 0, visit) }, rest)
	case q.Owner != "" && q.ContextID != "":
		return s.mu.ownerCtx.get(sym(r.key>>32), sym(r.key)), 0
	case q.Status != "":
		st, _ := stateNumber(q.Status)
		return int(counted.count[r.key].states[st]), 0
	}
	return counted.count[r.key].total(), 0
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
