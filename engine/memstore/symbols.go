package memstore

import (
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// sym is an interned string: a context ID or an owner, numbered from 1.
// Tasks and index keys hold syms, so each distinct string is stored once.
type sym uint32

// noOwner is the owner sym of a task without an owner ("" is never
// interned as an owner).
const noOwner sym = 0

// states are the task states a store holds, by state number (engine's
// known states: anything else is refused before it is stored).
var states = engine.KnownStates()

// numStates is len(states).
const numStates = 8

// stateNumbers maps a state to its number in states.
var stateNumbers = func() map[a2a.TaskState]uint8 {
	if len(states) != numStates {
		panic("memstore: engine.KnownStates changed; update numStates")
	}
	m := make(map[a2a.TaskState]uint8, numStates)
	for i, st := range states {
		m[st] = uint8(i)
	}
	return m
}()

// stateNumber returns the number of a known state; ok is false for any
// other.
func stateNumber(st a2a.TaskState) (n uint8, ok bool) {
	n, ok = stateNumbers[st]
	return n, ok
}

// counts are the tasks of one interned string per state (int32: 32 bytes
// per string; a store holds far fewer than 2^31 tasks).
type counts struct {
	states [numStates]int32
}

// total is the number of tasks counted.
func (c *counts) total() int {
	n := 0
	for _, k := range c.states {
		n += int(k)
	}
	return n
}

// symbols interns strings, and counts the tasks that carry each: the
// context IDs, or the owners. A string is interned while a task carries it
// (release drops it once none does), and its sym is reused after that.
// REQUIRES: the store's lock (symbols live in s.mu).
type symbols struct {
	ids   map[string]sym
	names []string // by sym; names[0] is unused
	count []counts // by sym
	free  []sym    // syms released, for reuse
}

func newSymbols() symbols {
	return symbols{ids: map[string]sym{}, names: []string{""}, count: []counts{{}}}
}

// intern returns the sym of name, interning it if needed (with no task
// counted yet).
func (s *symbols) intern(name string) sym {
	if id, ok := s.ids[name]; ok {
		return id
	}
	name = strings.Clone(name) // the store's own copy, not a slice of the caller's memory
	var id sym
	if n := len(s.free); n > 0 {
		id, s.free = s.free[n-1], s.free[:n-1]
		s.names[id] = name
	} else {
		id = sym(len(s.names))
		s.names = append(s.names, name)
		s.count = append(s.count, counts{})
	}
	s.ids[name] = id
	return id
}

// lookup returns the sym of name, if interned.
func (s *symbols) lookup(name string) (sym, bool) {
	id, ok := s.ids[name]
	return id, ok
}

// add counts delta tasks in state st for id.
func (s *symbols) add(id sym, st uint8, delta int32) {
	s.count[id].states[st] += delta
}

// release drops id once no task carries it.
func (s *symbols) release(id sym) {
	if s.count[id].total() != 0 {
		return
	}
	delete(s.ids, s.names[id])
	s.names[id] = ""
	s.count[id] = counts{}
	s.free = append(s.free, id)
}

// pairCounts counts the tasks per (owner, context). Most owners keep their
// tasks in few contexts, often one: each owner's first context with tasks
// (its home) is counted in a slice by owner sym, and only the owner's
// other contexts take map entries. A pair is counted in one place only.
type pairCounts struct {
	home []pair           // by owner sym
	rest map[uint64]int32 // other pairs with tasks, by ownerCtxKey
}

// pair is an owner's home context and its tasks (none: n == 0).
type pair struct {
	ctx sym
	n   int32
}

func newPairCounts() pairCounts { return pairCounts{rest: map[uint64]int32{}} }

// add counts delta tasks of owner in ctx.
func (p *pairCounts) add(owner, ctx sym, delta int32) {
	for int(owner) >= len(p.home) {
		p.home = append(p.home, pair{})
	}
	h := &p.home[owner]
	k := ownerCtxKey(owner, ctx)
	switch {
	case h.n != 0 && h.ctx == ctx:
		h.n += delta
	case h.n == 0: // a free home: the pair moves in, with what the map held
		h.ctx, h.n = ctx, p.rest[k]+delta
		delete(p.rest, k)
	case p.rest[k]+delta == 0:
		delete(p.rest, k)
	default:
		p.rest[k] += delta
	}
}

// get returns the tasks of owner in ctx.
func (p *pairCounts) get(owner, ctx sym) int {
	if int(owner) < len(p.home) && p.home[owner].n != 0 && p.home[owner].ctx == ctx {
		return int(p.home[owner].n)
	}
	return int(p.rest[ownerCtxKey(owner, ctx)])
}

// all returns every pair counted, by ownerCtxKey (for CheckInvariants).
func (p *pairCounts) all() map[uint64]int {
	m := make(map[uint64]int, len(p.rest))
	for owner, h := range p.home {
		if h.n != 0 {
			m[ownerCtxKey(sym(owner), h.ctx)] += int(h.n)
		}
	}
	for k, n := range p.rest {
		m[k] += int(n)
	}
	return m
}
