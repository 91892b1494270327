package memstore

import (
	"context"

	"github.com/a2astore/a2astore/engine"
)

var _ engine.Retainer = (*Store)(nil)

// RemoveExpired removes the expired tasks of one batch (engine.Retainer,
// R1, R2). It walks the global index backward from its oldest entry (or
// from req.After), under the write lock, and removes each due task as
// Delete does: from every index and counter, releasing its context and
// owner once no task carries them. Readers wait for the batch: its work is
// at most req.Limit index steps and removals, O(log n) each.
func (s *Store) RemoveExpired(ctx context.Context, req engine.RetainRequest) (engine.RetainResult, error) {
	if err := req.Validate(); err != nil {
		return engine.RetainResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return engine.RetainResult{}, err
	}
	if err := s.lockOpen(); err != nil {
		return engine.RetainResult{}, err
	}
	defer s.mu.Unlock()
	scan := engine.NewRetainScan(&req)
	var due []*entry
	visit := func(it item) bool {
		c := it.e.cursor()
		if req.After != nil && c == *req.After {
			return true // strictly after the resume point
		}
		d, more := scan.Visit(c, states[it.e.state])
		if d {
			due = append(due, it.e)
		}
		return more
	}
	if req.After != nil {
		// Oldest first is descending list order. The probe sorts just
		// after After's entry in list order, so the walk starts at After
		// itself (skipped above) and goes on to newer tasks.
		s.mu.order.Descend(item{req.After.UpdatedAt, probeAfter(req.After)}, visit)
	} else {
		s.mu.order.Reverse(visit)
	}
	for _, e := range due {
		s.unindexLocked(e)
		delete(s.mu.byID, e.id)
		s.releaseLocked(e.ctx, e.owner)
		scan.Removed()
	}
	return scan.Result(), nil
}
