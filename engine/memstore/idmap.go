package memstore

import (
	"fmt"
	"hash/maphash"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// idMap finds a task's slot by its ID without holding the ID, so that it
// has no pointer for the collector to follow: it maps the ID's 64-bit
// hash (hash/maphash, seeded per store, so no client can aim at it) to
// the slot, whose entry holds the ID. An ID whose hash another stored ID
// already has goes to a plain map beside, and stays there until deleted;
// that map is empty but for such collisions (about one in 4×10^7 stores
// of a million tasks).
type idMap struct {
	seed   maphash.Seed
	byHash map[uint64]uint32
	more   map[a2a.TaskID]uint32 // IDs whose hash byHash holds for another ID
	// testHash, when set (by tests), replaces the hash, so that tests can
	// make IDs collide.
	testHash func(id string) uint64
}

func newIDMap() idMap {
	return idMap{seed: maphash.MakeSeed(), byHash: make(map[uint64]uint32), more: make(map[a2a.TaskID]uint32)}
}

func (m *idMap) hash(id a2a.TaskID) uint64 {
	if m.testHash != nil {
		return m.testHash(string(id))
	}
	return maphash.String(m.seed, string(id))
}

// get returns the slot of id.
func (m *idMap) get(t *slots, id a2a.TaskID) (uint32, bool) {
	if slot, ok := m.byHash[m.hash(id)]; ok && t.id(t.at(slot)) == id {
		return slot, true
	}
	if len(m.more) == 0 {
		return 0, false
	}
	slot, ok := m.more[id]
	return slot, ok
}

// add maps id, which is not stored, to slot; a colliding id is kept as a
// copy (id may be a view of an entry or the slab).
func (m *idMap) add(id a2a.TaskID, slot uint32) {
	h := m.hash(id)
	if _, taken := m.byHash[h]; taken {
		m.more[detached(id)] = slot
		return
	}
	m.byHash[h] = slot
}

// delete forgets id, which is stored.
func (m *idMap) delete(t *slots, id a2a.TaskID) {
	h := m.hash(id)
	if slot, ok := m.byHash[h]; ok && t.id(t.at(slot)) == id {
		delete(m.byHash, h)
		return
	}
	delete(m.more, id)
}

func (m *idMap) len() int { return len(m.byHash) + len(m.more) }

// check returns the stored IDs and their slots as the map knows them,
// and what is wrong with the map itself: a slot never handed out, an
// entry whose ID does not hash to its key, an ID kept both ways.
func (m *idMap) check(t *slots) (map[a2a.TaskID]uint32, []error) {
	var errs []error
	ids := make(map[a2a.TaskID]uint32, m.len())
	for h, slot := range m.byHash {
		if slot >= t.n {
			errs = append(errs, fmt.Errorf("a task in slot %d, which was never handed out", slot))
			continue
		}
		if !t.holds(t.at(slot)) {
			errs = append(errs, fmt.Errorf("slot %d, in the ID map, holds no task", slot))
			continue
		}
		id := t.id(t.at(slot))
		if m.hash(id) != h {
			errs = append(errs, fmt.Errorf("task %q in slot %d stored under another ID's hash", id, slot))
		}
		ids[id] = slot
	}
	for id, slot := range m.more {
		if _, twice := ids[id]; twice {
			errs = append(errs, fmt.Errorf("task %q kept both by hash and beside", id))
		}
		ids[id] = slot
	}
	return ids, errs
}
