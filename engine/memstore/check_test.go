package memstore

import (
	"context"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestCheckInvariantsFindsDamage: each kind of damage to each index, each
// counter and the interned strings is reported, and an intact store
// passes. The store holds a task of alice and one of bob in context "c",
// and one without an owner in context "d".
func TestCheckInvariantsFindsDamage(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(s *Store, alice, bob, plain *entry)
		want   string
	}{
		{"stored under another ID", func(s *Store, a, _, _ *entry) { s.mu.ids.more["other"] = a.slot }, "stored under"},
		{"kept both ways", func(s *Store, a, _, _ *entry) { s.mu.ids.more["t-alice"] = a.slot }, "both by hash and beside"},
		{"under another ID's hash", func(s *Store, a, _, _ *entry) { s.mu.ids.byHash[s.mu.ids.hash("other")] = a.slot }, "another ID's hash"},
		{"in a slot never handed out", func(s *Store, _, _, _ *entry) { s.mu.ids.more["t-alice"] = s.mu.slots.n }, "never handed out"},
		{"in a slot past the chunks", func(s *Store, _, _, _ *entry) { s.mu.ids.byHash[s.mu.ids.hash("x")] = 5 * slotChunk }, "never handed out"},
		{"a task's slot on the free list", func(s *Store, a, _, _ *entry) { s.mu.slots.free = append(s.mu.slots.free, a.slot) }, "holds a task"},
		{"a slot neither a task's nor free", func(s *Store, _, _, _ *entry) { s.mu.slots.n++ }, "4 slots handed out: 3 hold tasks, 0 free"},
		{"status time corrupt", func(s *Store, a, _, _ *entry) { a.status[0] = 7 }, "status time does not decode"},
		{"metadata beyond the body", func(s *Store, _, b, _ *entry) { b.metaLen = 1 }, "bytes of metadata"},
		{"missing from the global index", func(s *Store, a, _, _ *entry) { s.mu.order.Delete(a.item()) }, "missing from the global index"},
		{"stale item in the global index", func(s *Store, a, _, _ *entry) { s.mu.order.Set(itemAt(a.updatedAt+1, a.slot)) }, "not stored there"},
		{"missing from the context index", func(s *Store, _, _, p *entry) { s.mu.byCtx.Delete(p.keyed(uint64(p.ctx))) }, "missing from the context index"},
		{"under another context", func(s *Store, a, _, p *entry) { s.mu.byCtx.Set(a.keyed(uint64(p.ctx))) }, "not its own"},
		{"missing from the owner index", func(s *Store, a, _, _ *entry) { s.mu.byOwner.Delete(a.keyed(uint64(a.owner))) }, "missing from the owner index"},
		{"under another owner", func(s *Store, a, b, _ *entry) { s.mu.byOwner.Set(a.keyed(uint64(b.owner))) }, "not its own"},
		{"unowned task in the owner index", func(s *Store, a, _, p *entry) { s.mu.byOwner.Set(p.keyed(uint64(a.owner))) }, "not its own"},
		{"missing from the (owner, context) index", func(s *Store, a, _, _ *entry) {
			s.mu.byOwnerCtx.Delete(a.keyed(ownerCtxKey(a.owner, a.ctx)))
		}, "missing from the (owner, context) index"},
		{"stale cursor in the (owner, context) index", func(s *Store, a, _, _ *entry) {
			k := a.keyed(ownerCtxKey(a.owner, a.ctx))
			k.at++
			s.mu.byOwnerCtx.Set(k)
		}, "not stored there"},
		{"missing from the state index", func(s *Store, _, _, p *entry) { s.mu.byState.Delete(p.keyed(uint64(p.state))) }, "missing from the state index"},
		{"under another state", func(s *Store, a, _, _ *entry) { s.mu.byState.Set(a.keyed(uint64(a.state) + 1)) }, "not its own"},
		{"stale cursor in the state index", func(s *Store, _, b, _ *entry) {
			k := b.keyed(uint64(b.state))
			k.at++
			s.mu.byState.Set(k)
		}, "not stored there"},
		{"missing from the (owner, state) index", func(s *Store, _, b, _ *entry) {
			s.mu.byOwnerState.Delete(b.keyed(ownerStateKey(b.owner, b.state)))
		}, "missing from the (owner, state) index"},
		{"under another (owner, state)", func(s *Store, a, b, _ *entry) {
			s.mu.byOwnerState.Set(a.keyed(ownerStateKey(b.owner, a.state)))
		}, "not its own"},
		{"unowned task in the (owner, state) index", func(s *Store, a, _, p *entry) {
			s.mu.byOwnerState.Set(p.keyed(ownerStateKey(a.owner, p.state)))
		}, "not its own"},
		{"state counter off", func(s *Store, a, _, _ *entry) { s.mu.states[a.state]++ }, "state TASK_STATE_WORKING counter"},
		{"context count off", func(s *Store, a, _, _ *entry) { s.mu.contexts.count[a.ctx].states[a.state]++ }, `context "c" counts`},
		{"(context, state) count off", func(s *Store, _, _, p *entry) { s.mu.contexts.count[p.ctx].states[p.state]-- }, `context "d" counts`},
		{"owner count off", func(s *Store, a, _, _ *entry) { s.mu.owners.count[a.owner].states[a.state]-- }, `owner "alice" counts`},
		{"(owner, state) count off", func(s *Store, _, b, _ *entry) { s.mu.owners.count[b.owner].states[0]++ }, `owner "bob" counts`},
		{"(owner, context) home counter off", func(s *Store, a, _, _ *entry) { s.mu.ownerCtx.home[a.owner].n++ }, "(owner, context) counters"},
		{"(owner, context) counter off", func(s *Store, a, _, p *entry) { s.mu.ownerCtx.rest[ownerCtxKey(a.owner, p.ctx)] = 1 }, "(owner, context) counters"},
		{"context kept with no task", func(s *Store, _, _, _ *entry) { s.mu.contexts.intern("nobody") }, "no task has it"},
		{"owner kept with no task", func(s *Store, _, _, _ *entry) { s.mu.owners.intern("nobody") }, "no task has it"},
		{"context interned under another's sym", func(s *Store, a, _, p *entry) { s.mu.contexts.ids["c"] = p.ctx }, "names another"},
		{"released sym still in use", func(s *Store, _, b, _ *entry) { s.mu.owners.free = append(s.mu.owners.free, b.owner) }, "released but still in use"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New(Options{})
			ctx := context.Background()
			for _, task := range []struct{ id, owner, ctx string }{{"t-alice", "alice", "c"}, {"t-bob", "bob", "c"}, {"t-", "", "d"}} {
				if _, err := s.CreateOwned(ctx, &a2a.Task{ID: a2a.TaskID(task.id), ContextID: task.ctx, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, task.owner); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatalf("intact store: %v", err)
			}
			c.damage(s, s.entryOf("t-alice"), s.entryOf("t-bob"), s.entryOf("t-"))
			if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("CheckInvariants = %v, want a report containing %q", err, c.want)
			}
		})
	}
}

// entryOf returns the entry of id, which must be stored.
func (s *Store) entryOf(id a2a.TaskID) *entry {
	slot, ok := s.mu.ids.get(&s.mu.slots, id)
	if !ok {
		panic("entryOf: no task " + id)
	}
	return s.mu.slots.at(slot)
}

// setBody replaces e's body (for damage).
func (s *Store) setBody(e *entry, body string) {
	s.mu.slots.setRecord(e, s.mu.slots.id(e), body, uint32(len(body)))
}
