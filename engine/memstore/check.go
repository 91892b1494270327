package memstore

import (
	"errors"
	"fmt"
	"maps"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/tidwall/btree"

	"github.com/a2astore/a2astore/engine/taskcodec"
)

// CheckInvariants verifies the store's internal consistency against the
// entries in the ID map: every entry's content is well formed (a status
// time that decodes, metadata within the body), it is in the global index,
// in the context index under its context and in the state index under its
// state (C7), and an entry with an owner in the owner, (owner, context)
// and (owner, state) indexes, each time at its current cursor;
// the indexes hold nothing else; the interned contexts and owners are
// exactly those the entries carry, each with its task counts (in all and
// per state) equal to a recount, as are the per-state and (owner,
// context) counters. It is meant for tests (storetest calls it at
// cleanup).
func (s *Store) CheckInvariants() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// Recount from the entries.
	var perState [numStates]int
	contexts := map[sym]*counts{}
	owners := map[sym]*counts{}
	ownerCtx := map[uint64]int{}
	owned := 0
	recount := func(m map[sym]*counts, id sym, st uint8) {
		c := m[id]
		if c == nil {
			c = &counts{}
			m[id] = c
		}
		c.states[st]++
	}
	ids, idErrs := s.mu.ids.check(&s.mu.slots)
	errs = append(errs, idErrs...)
	for id, slot := range ids {
		if slot >= s.mu.slots.n {
			fail("task %q in slot %d, which was never handed out", id, slot)
			continue
		}
		e := s.mu.slots.at(slot)
		if !s.mu.slots.holds(e) {
			fail("task %q in slot %d: its record %+v is not in the slab", id, slot, e.rec)
			continue
		}
		if got := s.mu.slots.id(e); got != id || e.slot != slot {
			fail("task %q stored under %q, slot %d under %d", got, id, e.slot, slot)
		}
		if e.revision < 1 || int(e.state) >= numStates {
			fail("task %q: revision %d, state number %d", id, e.revision, e.state)
			continue
		}
		if _, ok := e.status.time(); !ok && e.status != (stamp{}) {
			fail("task %q: its status time does not decode", id)
		}
		if err := checkBody(e, s.mu.slots.body(e), s.mu.slots.head(e)); err != nil {
			fail("task %q: body: %v", id, err)
		}
		if it, ok := s.mu.order.Get(e.item()); !ok || it.slot != slot {
			fail("task %q missing from the global index at its cursor", id)
		}
		if k, ok := s.mu.byCtx.Get(e.keyed(uint64(e.ctx))); !ok || k.slot != slot {
			fail("task %q missing from the context index at its context and cursor", id)
		}
		if k, ok := s.mu.byState.Get(e.keyed(uint64(e.state))); !ok || k.slot != slot {
			fail("task %q missing from the state index at its state and cursor", id)
		}
		perState[e.state]++
		recount(contexts, e.ctx, e.state)
		if e.owner == noOwner {
			continue
		}
		owned++
		recount(owners, e.owner, e.state)
		ownerCtx[ownerCtxKey(e.owner, e.ctx)]++
		if k, ok := s.mu.byOwner.Get(e.keyed(uint64(e.owner))); !ok || k.slot != slot {
			fail("task %q missing from the owner index at its owner and cursor", id)
		}
		if k, ok := s.mu.byOwnerCtx.Get(e.keyed(ownerCtxKey(e.owner, e.ctx))); !ok || k.slot != slot {
			fail("task %q missing from the (owner, context) index at its owner, context and cursor", id)
		}
		if k, ok := s.mu.byOwnerState.Get(e.keyed(ownerStateKey(e.owner, e.state))); !ok || k.slot != slot {
			fail("task %q missing from the (owner, state) index at its owner, state and cursor", id)
		}
	}

	errs = append(errs, s.checkIndexesLocked(ids, owned)...)
	errs = append(errs, s.mu.slots.check(ids)...)
	errs = append(errs, s.mu.slots.checkSlab(ids)...)

	// Counters and interned strings.
	for st, n := range s.mu.states {
		if perState[st] != n {
			fail("state %s counter %d, recount %d", states[st], n, perState[st])
		}
	}
	errs = append(errs, s.mu.contexts.check("context", contexts)...)
	errs = append(errs, s.mu.owners.check("owner", owners)...)
	if counted := s.mu.ownerCtx.all(); !maps.Equal(ownerCtx, counted) {
		fail("(owner, context) counters %v, recount %v", counted, ownerCtx)
	}
	errs = append(errs, s.mu.ownerCtx.check(ownerCtx)...)
	errs = append(errs, s.checkLogsLocked(ids)...)
	return errors.Join(errs...)
}

// checkIndexesLocked verifies that the indexes hold nothing but the
// stored entries: as many items as entries (owned of them with an
// owner), each at a stored entry's cursor and key.
// REQUIRES: s.mu held.
func (s *Store) checkIndexesLocked(ids map[a2a.TaskID]uint32, owned int) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	live := func(slot uint32, at int64) bool {
		if slot >= s.mu.slots.n {
			return false
		}
		e := s.mu.slots.at(slot)
		if !s.mu.slots.holds(e) {
			return false
		}
		stored, ok := ids[s.mu.slots.id(e)]
		return ok && stored == slot && e.updatedAt == at
	}
	if n, m := s.mu.order.Len(), s.mu.ids.len(); n != m {
		fail("global index holds %d items, %d tasks", n, m)
	}
	s.mu.order.Scan(func(it item) bool {
		if !live(it.slot, it.when()) {
			fail("global index: an item at %d for a task not stored there", it.when())
		}
		return true
	})
	for _, ix := range []struct {
		name string
		idx  *btree.BTreeG[keyed]
		n    int
		has  func(e *entry, key uint64) bool
	}{
		{"context", s.mu.byCtx, s.mu.ids.len(), func(e *entry, key uint64) bool { return uint64(e.ctx) == key }},
		{"owner", s.mu.byOwner, owned, func(e *entry, key uint64) bool { return e.owner != noOwner && uint64(e.owner) == key }},
		{"(owner, context)", s.mu.byOwnerCtx, owned, func(e *entry, key uint64) bool {
			return e.owner != noOwner && ownerCtxKey(e.owner, e.ctx) == key
		}},
		{"state", s.mu.byState, s.mu.ids.len(), func(e *entry, key uint64) bool { return uint64(e.state) == key }},
		{"(owner, state)", s.mu.byOwnerState, owned, func(e *entry, key uint64) bool {
			return e.owner != noOwner && ownerStateKey(e.owner, e.state) == key
		}},
	} {
		if n := ix.idx.Len(); n != ix.n {
			fail("%s index holds %d items, want %d", ix.name, n, ix.n)
		}
		ix.idx.Scan(func(k keyed) bool {
			if !live(k.slot, k.at) {
				fail("%s index: an item at %d for a task not stored there", ix.name, k.at)
			} else if e := s.mu.slots.at(k.slot); !ix.has(e, k.key) {
				fail("%s index: task %q under key %#x, which is not its own", ix.name, s.mu.slots.id(e), k.key)
			}
			return true
		})
	}

	return errs
}

// check verifies the free list against the slots the ID map names (ids):
// every freed slot was handed out, is listed once, is cleared and names
// no task, and every slot handed out is either a task's or free.
func (t *slots) check(ids map[a2a.TaskID]uint32) []error {
	var errs []error
	live := make(map[uint32]bool, len(ids))
	for _, slot := range ids {
		live[slot] = true
	}
	freed := make(map[uint32]bool, len(t.free))
	for _, slot := range t.free {
		switch {
		case slot >= t.n || freed[slot]:
			errs = append(errs, fmt.Errorf("slot %d on the free list: never handed out, or twice", slot))
		case live[slot] || *t.at(slot) != (entry{slot: slot, gen: t.at(slot).gen}):
			errs = append(errs, fmt.Errorf("slot %d on the free list holds a task, or is not cleared", slot))
		}
		freed[slot] = true
	}
	if int(t.n) != len(live)+len(freed) {
		errs = append(errs, fmt.Errorf("%d slots handed out: %d hold tasks, %d free", t.n, len(live), len(freed)))
	}
	return errs
}

// checkBody decodes e's body: its metadata, and a rest (when there is
// one) that is not the empty rest and holds no light field, which the
// entry holds instead; and the head (its first head bytes) alone.
func checkBody(e *entry, body string, head uint32) error {
	if int(e.metaLen) > len(body) || head < e.metaLen || int(head) > len(body) {
		return fmt.Errorf("%d bytes of metadata and %d of head in %d", e.metaLen, head, len(body))
	}
	if rest := body[e.metaLen:head]; len(body) > int(e.metaLen) {
		var d taskcodec.Decoder
		if err := d.Head(rest, new(a2a.Task)); err != nil {
			return fmt.Errorf("its head alone: %w", err)
		}
	}
	var d taskcodec.Decoder
	if _, err := d.Metadata(body[:e.metaLen]); err != nil {
		return err
	}
	rest := body[e.metaLen:]
	if rest == "" {
		return nil
	}
	if rest == string(emptyRest) {
		return errors.New("an empty rest is stored")
	}
	var t a2a.Task
	if err := d.Task(rest, &t); err != nil {
		return err
	}
	if t.ID != "" || t.ContextID != "" || t.Status.State != "" || t.Status.Timestamp != nil || t.Metadata != nil {
		return errors.New("the rest holds light fields")
	}
	return nil
}

// check compares p with want (a recount by ownerCtxKey): get returns each
// pair's count, and no pair is counted both in its owner's home and in
// the map, nor as zero in the map.
func (p *pairCounts) check(want map[uint64]int) []error {
	var errs []error
	for k, n := range want {
		if got := p.get(sym(k>>32), sym(k)); got != n {
			errs = append(errs, fmt.Errorf("(owner, context) %#x counts %d, recount %d", k, got, n))
		}
	}
	for owner, h := range p.home {
		if _, ok := p.rest[ownerCtxKey(sym(owner), h.ctx)]; ok && h.n != 0 {
			errs = append(errs, fmt.Errorf("(owner, context) %#x counted in the home and in the map", ownerCtxKey(sym(owner), h.ctx)))
		}
	}
	for k, n := range p.rest {
		if n == 0 {
			errs = append(errs, fmt.Errorf("(owner, context) %#x kept at zero", k))
		}
	}
	return errs
}

// check compares the interned strings with those the entries carry, and
// their counts with want (a recount): every sym in use is interned under
// its name, holds its tasks, and nothing else is kept.
func (s *symbols) check(what string, want map[sym]*counts) []error {
	var errs []error
	for name, id := range s.ids {
		if int(id) >= len(s.names) || id == 0 || s.names[id] != name {
			errs = append(errs, fmt.Errorf("%s %q interned as %d, which names another", what, name, id))
			continue
		}
		if want[id] == nil {
			errs = append(errs, fmt.Errorf("%s %q (%d) interned, but no task has it", what, name, id))
		}
	}
	for id, c := range want {
		if int(id) >= len(s.names) || s.ids[s.names[id]] != id {
			errs = append(errs, fmt.Errorf("a task's %s %d is not interned", what, id))
			continue
		}
		if s.count[id] != *c {
			errs = append(errs, fmt.Errorf("%s %q counts %+v, recount %+v", what, s.names[id], s.count[id], *c))
		}
	}
	freed := make(map[sym]bool, len(s.free))
	for _, id := range s.free {
		switch {
		case id == 0 || int(id) >= len(s.names) || freed[id]:
			errs = append(errs, fmt.Errorf("%s %d on the free list: reserved, unknown or twice", what, id))
		case s.names[id] != "" || s.count[id] != (counts{}) || want[id] != nil:
			errs = append(errs, fmt.Errorf("%s %d released but still in use", what, id))
		}
		freed[id] = true
	}
	return errs
}
