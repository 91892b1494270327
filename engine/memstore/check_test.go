package memstore

import (
	"context"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/tidwall/btree"
)

// TestCheckInvariantsFindsOwnerDamage: each kind of damage to the owner
// indexes and counters is reported, and an intact store passes.
func TestCheckInvariantsFindsOwnerDamage(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(s *Store, alice, plain *record)
		want   string
	}{
		{"missing from the owner index", func(s *Store, a, _ *record) { s.mu.byOwner["alice"].Delete(a.ref()) }, "missing from its owner's index"},
		{"missing from the (owner, context) index", func(s *Store, a, _ *record) {
			s.mu.byOwnerCtx[ownerCtx{"alice", "c"}].Delete(a.ref())
		}, "missing from its (owner, context) index"},
		{"under another owner", func(s *Store, a, _ *record) { indexSet(s.mu.byOwner, "bob", a.ref(), refLess) }, "does not belong there"},
		{"unowned task in an owner index", func(s *Store, _, p *record) { s.mu.byOwner["alice"].Set(p.ref()) }, "does not belong there"},
		{"stale cursor", func(s *Store, a, _ *record) {
			r := a.ref()
			r.at++
			s.mu.byOwnerCtx[ownerCtx{"alice", "c"}].Set(r)
		}, "does not belong there"},
		{"empty index kept", func(s *Store, _, _ *record) {
			s.mu.byOwner["nobody"] = btree.NewBTreeGOptions(refLess, btree.Options{NoLocks: true})
		}, "empty index kept"},
		{"owner counter off", func(s *Store, a, _ *record) { s.mu.ownerStates[ownerState{"alice", a.state}]++ }, "counter"},
		{"stale owner counter", func(s *Store, _, _ *record) { s.mu.ownerStates[ownerState{"nobody", a2a.TaskStateWorking}] = 1 }, "owner counters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New(Options{})
			ctx := context.Background()
			for _, o := range []string{"alice", ""} {
				if _, err := s.CreateOwned(ctx, &a2a.Task{ID: a2a.TaskID("t-" + o), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, o); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatalf("intact store: %v", err)
			}
			c.damage(s, s.mu.byID["t-alice"], s.mu.byID["t-"])
			if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("CheckInvariants = %v, want a report containing %q", err, c.want)
			}
		})
	}
}
