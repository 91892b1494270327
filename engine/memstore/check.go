package memstore

import (
	"errors"
	"fmt"

	"github.com/tidwall/btree"
)

// CheckInvariants verifies the store's internal consistency: every record is
// in the global index and in its context's index under its current cursor,
// a record with an owner is in its owner's index and its
// (owner, context) index too, the indexes hold nothing else (no empty
// index is kept), and every counter equals a recount. It is meant for
// tests (storetest calls it at cleanup).
func (s *Store) CheckInvariants() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil
	}
	var errs []error
	if n, m := s.mu.order.Len(), len(s.mu.byID); n != m {
		errs = append(errs, fmt.Errorf("global index has %d entries, %d tasks", n, m))
	}
	inCtx := 0
	for c, t := range s.mu.byCtx {
		inCtx += t.Len()
		t.Scan(func(e entry) bool {
			if e.rec.contextID != c {
				errs = append(errs, fmt.Errorf("task %q indexed under context %q, has %q", e.id, c, e.rec.contextID))
			}
			return true
		})
	}
	if inCtx != len(s.mu.byID) {
		errs = append(errs, fmt.Errorf("context indexes hold %d entries, %d tasks", inCtx, len(s.mu.byID)))
	}
	owned, inOwner, inOwnerCtx := 0, 0, 0
	for o, t := range s.mu.byOwner {
		inOwner += t.Len()
		errs = append(errs, checkRefs(t, func(r *record) bool { return r.owner == o }, fmt.Sprintf("owner %q", o))...)
	}
	for k, t := range s.mu.byOwnerCtx {
		inOwnerCtx += t.Len()
		errs = append(errs, checkRefs(t, func(r *record) bool { return r.owner == k.owner && r.contextID == k.ctx }, fmt.Sprintf("owner %q context %q", k.owner, k.ctx))...)
	}
	states := map[string]int{}
	pairs := map[ctxState]int{}
	ownerStates := map[ownerState]int{}
	for id, r := range s.mu.byID {
		if r.id != id {
			errs = append(errs, fmt.Errorf("record %q stored under %q", r.id, id))
		}
		if e, ok := s.mu.order.Get(r.entry()); !ok || e.rec != r {
			errs = append(errs, fmt.Errorf("task %q missing from the global index at its cursor", id))
		}
		if t := s.mu.byCtx[r.contextID]; t == nil {
			errs = append(errs, fmt.Errorf("task %q: no index for its context", id))
		} else if e, ok := t.Get(r.entry()); !ok || e.rec != r {
			errs = append(errs, fmt.Errorf("task %q missing from its context index", id))
		}
		states[string(r.state)]++
		pairs[ctxState{r.contextID, r.state}]++
		if r.owner == "" {
			continue
		}
		owned++
		ownerStates[ownerState{r.owner, r.state}]++
		if t := s.mu.byOwner[r.owner]; t == nil {
			errs = append(errs, fmt.Errorf("task %q: no index for its owner", id))
		} else if e, ok := t.Get(r.ref()); !ok || e.rec != r {
			errs = append(errs, fmt.Errorf("task %q missing from its owner's index", id))
		}
		if t := s.mu.byOwnerCtx[ownerCtx{r.owner, r.contextID}]; t == nil {
			errs = append(errs, fmt.Errorf("task %q: no index for its owner and context", id))
		} else if e, ok := t.Get(r.ref()); !ok || e.rec != r {
			errs = append(errs, fmt.Errorf("task %q missing from its (owner, context) index", id))
		}
	}
	if inOwner != owned || inOwnerCtx != owned {
		errs = append(errs, fmt.Errorf("owner indexes hold %d entries, (owner, context) indexes %d, %d tasks have an owner", inOwner, inOwnerCtx, owned))
	}
	for k, n := range s.mu.ownerStates {
		if ownerStates[k] != n {
			errs = append(errs, fmt.Errorf("owner %q state %s counter %d, recount %d", k.owner, k.state, n, ownerStates[k]))
		}
	}
	if len(ownerStates) != len(s.mu.ownerStates) {
		errs = append(errs, fmt.Errorf("owner counters hold stale keys or miss some"))
	}
	for st, n := range s.mu.states {
		if states[string(st)] != n {
			errs = append(errs, fmt.Errorf("state %s counter %d, recount %d", st, n, states[string(st)]))
		}
	}
	if len(states) != len(s.mu.states) || len(pairs) != len(s.mu.pairs) {
		errs = append(errs, fmt.Errorf("counter maps hold stale keys"))
	}
	for k, n := range s.mu.pairs {
		if pairs[k] != n {
			errs = append(errs, fmt.Errorf("context %q state %s counter %d, recount %d", k.ctx, k.state, n, pairs[k]))
		}
	}
	return errors.Join(errs...)
}

// checkRefs checks the owner index named where: not empty, and every ref
// at its record's cursor, for a record that belongs there.
func checkRefs(t *btree.BTreeG[ref], belongs func(*record) bool, where string) []error {
	var errs []error
	if t.Len() == 0 {
		errs = append(errs, fmt.Errorf("empty index kept for %s", where))
	}
	t.Scan(func(e ref) bool {
		if e.at != e.rec.updatedAt || !belongs(e.rec) {
			errs = append(errs, fmt.Errorf("task %q indexed under %s at %d does not belong there", e.rec.id, where, e.at))
		}
		return true
	})
	return errs
}
