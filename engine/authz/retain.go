package authz

import (
	"context"
	"fmt"

	"github.com/a2astore/a2astore/engine"
)

var (
	_ engine.Retainer        = (*Dispatcher)(nil)
	_ engine.RetainForwarder = (*Dispatcher)(nil)
)

// RemoveExpired forwards a retention batch (R1, R2) to the wrapped store,
// unscoped: retention is the operator's job, not a caller's, and removes
// every due task whoever owns it. Never expose it to callers. Over a store
// that is no engine.Retainer it fails with engine.ErrRetainUnsupported
// (engine.AsRetainer tells beforehand).
func (d *Dispatcher) RemoveExpired(ctx context.Context, req engine.RetainRequest) (engine.RetainResult, error) {
	r, ok := engine.AsRetainer(d.store)
	if !ok {
		return engine.RetainResult{}, fmt.Errorf("authz: %w", engine.ErrRetainUnsupported)
	}
	return r.RemoveExpired(ctx, req)
}

// CanRetain reports whether the wrapped store is an engine.Retainer
// (engine.RetainForwarder).
func (d *Dispatcher) CanRetain() bool {
	_, ok := engine.AsRetainer(d.store)
	return ok
}
