package storemetrics

import (
	"context"
	"fmt"

	"github.com/a2astore/a2astore/engine"
)

// OpRemoveExpired is the operation label of RemoveExpired (a retention
// batch).
const OpRemoveExpired = "remove_expired"

var (
	_ engine.Retainer        = (*Store)(nil)
	_ engine.RetainForwarder = (*Store)(nil)
)

// RemoveExpired forwards a retention batch (R1, R2) to the wrapped store,
// observed as remove_expired. Over a store that is no engine.Retainer it
// fails with engine.ErrRetainUnsupported (engine.AsRetainer tells
// beforehand). The tasks removed are counted by engine/retention.
func (s *Store) RemoveExpired(ctx context.Context, req engine.RetainRequest) (engine.RetainResult, error) {
	ctx, sp := s.begin(ctx, OpRemoveExpired)
	var res engine.RetainResult
	err := fmt.Errorf("storemetrics: %w", engine.ErrRetainUnsupported)
	if r, ok := engine.AsRetainer(s.next); ok {
		res, err = r.RemoveExpired(ctx, req)
	}
	sp.end(err)
	return res, err
}

// CanRetain reports whether the wrapped store is an engine.Retainer
// (engine.RetainForwarder).
func (s *Store) CanRetain() bool {
	_, ok := engine.AsRetainer(s.next)
	return ok
}
