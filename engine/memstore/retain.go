package memstore

import (
	"context"

	"github.com/a2astore/a2astore/engine"
)

var _ engine.Retainer = (*Store)(nil)

// seen is an index item as a scan saw it, with its slot's generation: the
// same slot, generation and time under a later lock are the same task,
// unmodified.
type seen struct {
	item
	gen uint32
}

// walkOldestFirst visits the global index oldest first (descending list
// order) from after (nil: the oldest task) under the shared lock.
func (s *Store) walkOldestFirst(after *engine.Cursor, visit func(item) bool) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return errClosed
	}
	if after != nil {
		// The probe sorts just after After's entry in list order, so the
		// walk starts at After itself (the caller skips it) and goes on to
		// newer tasks.
		s.descendFrom(after, visit)
	} else {
		s.mu.order.Reverse(visit)
	}
	return nil
}

// descendFrom visits the global index backward from just after c's entry
// in list order (so c's own entry, if stored, comes first).
// REQUIRES: s.mu held.
func (s *Store) descendFrom(c *engine.Cursor, visit func(item) bool) {
	p := s.probes.get(c.ID)
	defer s.probes.put(p)
	s.mu.order.Descend(itemAt(c.UpdatedAt, p), visit)
}

// retainScanned, when set (by tests), runs between a batch's scan and its
// removals, holding no lock.
var retainScanned func()

// RemoveExpired removes the expired tasks of one batch (engine.Retainer,
// R1, R2). It walks the global index backward from its oldest entry (or
// from req.After) under the shared lock, so readers go on meanwhile; then,
// if any task is due, it takes the write lock once and removes each due
// task that is still as examined (same entry, same time: a task mutated
// meanwhile moved and is left alone) as Delete does: from every index and
// counter, releasing its context and owner once no task carries them. Its
// work is at most req.Limit index steps and removals, O(log n) each.
func (s *Store) RemoveExpired(ctx context.Context, req engine.RetainRequest) (engine.RetainResult, error) {
	if err := req.Validate(); err != nil {
		return engine.RetainResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return engine.RetainResult{}, err
	}
	scan := engine.NewRetainScan(&req)
	var due []seen
	visit := func(it item) bool {
		e := s.mu.slots.at(it.slot)
		c := s.mu.slots.cursor(e)
		c.ID = detached(c.ID) // the scan may keep it past the lock
		if req.After != nil && c == *req.After {
			return true // strictly after the resume point
		}
		d, more := scan.Visit(c, states[e.state])
		if d {
			due = append(due, seen{it, e.gen})
		}
		return more
	}
	if err := s.walkOldestFirst(req.After, visit); err != nil {
		return engine.RetainResult{}, err
	}
	if len(due) == 0 {
		return scan.Result(), nil
	}
	if retainScanned != nil {
		retainScanned()
	}
	if err := s.lockOpen(); err != nil {
		return engine.RetainResult{}, err
	}
	defer s.mu.Unlock()
	for _, d := range due {
		e := s.mu.slots.at(d.slot)
		if e.gen != d.gen || e.updatedAt != d.when() || !req.Due(e.updatedAt, states[e.state]) {
			continue // deleted or mutated meanwhile
		}
		s.removeLocked(e)
		scan.Removed()
	}
	return scan.Result(), nil
}
