package memstore

// CheckInvariants finds damage to the structures of the compact
// representation (#16): a body that does not decode or holds light
// fields, an (owner, context) pair counted in two places, and free lists
// holding a reserved, unknown or twice-freed sym. Each test damages the
// store, requires CheckInvariants to report it, and shows what the damage
// does to reads.

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine/taskcodec"
)

// damageStore holds alice's tasks a1 and a2 in context "c" and an
// unowned task p in context "d".
func damageStore(t *testing.T) *Store {
	t.Helper()
	s := New(Options{})
	for _, task := range []struct{ id, owner, ctx string }{{"a1", "alice", "c"}, {"a2", "alice", "c"}, {"p", "", "d"}} {
		tk := &a2a.Task{ID: a2a.TaskID(task.id), ContextID: task.ctx, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		if _, err := s.CreateOwned(context.Background(), tk, task.owner); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("intact store: %v", err)
	}
	return s
}

// A body that does not decode (every read of the task then fails with
// ErrInternal), or whose rest holds light fields.
func TestCheckFindsCorruptBody(t *testing.T) {
	s := damageStore(t)
	e := s.entryOf("p")
	s.setBody(e, "\xff")
	e.metaLen = 1 // metadata of an unknown format
	if err := s.CheckInvariants(); err == nil {
		t.Errorf("CheckInvariants passes a body whose metadata does not decode")
	}
	if _, err := s.Get(context.Background(), "p"); err == nil {
		t.Fatalf("Get decoded a corrupt body")
	} else {
		t.Logf("Get: %v", err)
	}

	s = damageStore(t)
	e = s.entryOf("p")
	s.setBody(e, "\x01garbage")
	e.metaLen = 0 // a rest that does not decode
	if err := s.CheckInvariants(); err == nil {
		t.Errorf("CheckInvariants passes a body whose rest does not decode")
	}

	// A rest that decodes but carries light fields the entry overrides
	// (a non-canonical body: they would be silently dropped on read).
	s = damageStore(t)
	e = s.entryOf("p")
	s.setBody(e, string(mustEncodeRest(t, &a2a.Task{ID: "other", ContextID: "other", Status: a2a.TaskStatus{State: a2a.TaskStateFailed}})))
	e.metaLen = 0
	if err := s.CheckInvariants(); err == nil {
		t.Errorf("CheckInvariants passes a body whose rest carries an ID, context and state")
	}
}

func mustEncodeRest(t *testing.T, tk *a2a.Task) []byte {
	t.Helper()
	b, err := taskcodec.EncodeTask(tk)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A pair counted partly in its owner's home slot and partly in the map:
// pairCounts.all() sums both places, so a comparison of sums passes, but
// get() reads only the home slot, so the (owner, context) total is wrong.
func TestCheckFindsSplitPair(t *testing.T) {
	s := damageStore(t)
	a := s.entryOf("a1")
	h := &s.mu.ownerCtx.home[a.owner]
	if h.ctx != a.ctx || h.n != 2 {
		t.Fatalf("setup: home of alice is (%d, %d), want (%d, 2)", h.ctx, h.n, a.ctx)
	}
	h.n--
	s.mu.ownerCtx.rest[ownerCtxKey(a.owner, a.ctx)] = 1
	if err := s.CheckInvariants(); err == nil {
		t.Errorf("CheckInvariants passes an (owner, context) pair split between the home slot and the map")
	}
}

// Free lists: sym 0 (noOwner) or a sym freed twice would corrupt the
// store on the next intern (an unowned task would read with the next
// owner; two contexts would share a sym).
func TestCheckFindsBadFreeList(t *testing.T) {
	ctx := context.Background()

	// noOwner on the owners' free list.
	s := damageStore(t)
	s.mu.owners.free = append(s.mu.owners.free, noOwner)
	if err := s.CheckInvariants(); err == nil {
		t.Errorf("CheckInvariants passes sym 0 (noOwner) on the owners' free list")
	}

	// A context sym freed twice.
	s = damageStore(t)
	if err := s.Delete(ctx, "p"); err != nil { // frees context "d"'s sym
		t.Fatal(err)
	}
	n := len(s.mu.contexts.free)
	if n == 0 {
		t.Fatal("setup: no freed context sym")
	}
	s.mu.contexts.free = append(s.mu.contexts.free, s.mu.contexts.free[n-1])
	if err := s.CheckInvariants(); err == nil {
		t.Errorf("CheckInvariants passes a context sym freed twice")
	}
}
