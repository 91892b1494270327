package memstore

import (
	"math"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Entries live in slots: chunks of entries that never move, named by a
// number. The ID map and the indexes hold slot numbers, not pointers, so
// the collector has nothing to follow in them: a task costs it two
// objects (the entry's ID and body) reached by one pointer each, not
// three objects reached by six (#31: with a million tasks the collector's
// marking was most of a Replace, and a fifth of the CPU under a
// read-heavy load). The ID map holds no ID but a colliding one (idMap).

const (
	slotShift = 10
	slotChunk = 1 << slotShift // entries per chunk: 112 KiB

	// rangeStart is the slot of a keyed index's range start: it sorts
	// before every entry of its key.
	rangeStart = math.MaxUint32
	// probeBase is the first probe slot: numProbes slots below
	// rangeStart that no entry gets (slots.alloc stops before it).
	probeBase = rangeStart - numProbes
	numProbes = 64
)

// slots holds the entries. A freed slot is cleared and reused; its
// generation moves on, so that a slot number read under one lock can be
// checked under the next (entry.gen).
type slots struct {
	chunks []*[slotChunk]entry
	n      uint32   // slots handed out, freed or not
	free   []uint32 // freed slots
	data   slab     // the entries' records (slab.go)
}

// at returns the entry of slot i, which alloc has handed out.
func (t *slots) at(i uint32) *entry { return &t.chunks[i>>slotShift][i&(slotChunk-1)] }

// alloc returns a cleared slot, whose entry knows its slot number.
func (t *slots) alloc() *entry {
	if n := len(t.free); n > 0 {
		i := t.free[n-1]
		t.free = t.free[:n-1]
		return t.at(i)
	}
	if t.n == probeBase {
		panic("memstore: out of slots") // 4e9 tasks
	}
	if t.n%slotChunk == 0 {
		t.chunks = append(t.chunks, new([slotChunk]entry))
	}
	i := t.n
	t.n++
	e := t.at(i)
	e.slot = i
	return e
}

// release clears e's slot for reuse, its generation one on.
func (t *slots) release(e *entry) {
	r := e.rec
	*e = entry{slot: e.slot, gen: e.gen + 1}
	t.data.free(r.chunk, r.size(), t.compact) // after: a compaction moves the records entries name
	t.data.compactClosed(t.compact)
	t.free = append(t.free, e.slot)
}

// probes are the seek probes: a seek's pivot is a probe slot, at or above
// probeBase, whose ID less reads here. A reader takes one while holding
// s.mu and gives it back before it lets go, so a reader waiting for a
// probe waits only for readers that hold the lock and wait for nothing.
// Each probe's ID is written and read by its holder alone.
type probes struct {
	ids  [numProbes]a2a.TaskID
	free chan uint32
}

func newProbes() *probes {
	p := &probes{free: make(chan uint32, numProbes)}
	for k := range uint32(numProbes) {
		p.free <- probeBase + k
	}
	return p
}

// get returns a probe for id: it sorts just after id's entry at the
// same time. put gives it back.
func (p *probes) get(id a2a.TaskID) uint32 {
	slot := <-p.free
	p.ids[slot-probeBase] = id
	return slot
}

func (p *probes) put(slot uint32) {
	p.ids[slot-probeBase] = ""
	p.free <- slot
}

// idOf returns the ID of slot: an entry's, or a probe's.
// REQUIRES: s.mu held.
func (s *Store) idOf(slot uint32) string {
	if slot >= probeBase {
		return string(s.probes.ids[slot-probeBase])
	}
	return string(s.mu.slots.id(s.mu.slots.at(slot)))
}
