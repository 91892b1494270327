package memstore

import (
	"errors"
	"fmt"
)

// CheckInvariants verifies the store's internal consistency: every record is
// in the global index and in its context's index under its current cursor,
// the indexes hold nothing else, and every counter equals a recount. It is
// meant for tests (storetest calls it at cleanup).
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
	states := map[string]int{}
	pairs := map[ctxState]int{}
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
