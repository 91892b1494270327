package storemetrics

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The Store is an engine.ConditionalStore whatever it wraps: it forwards
// CancelIf, AppendHistoryIf and DeleteIf, observed as cancel,
// append_history and delete, to a store that has them, and answers them
// with engine.ErrConditionalUnsupported over one that does not (never with
// the unconditional write, which would drop the condition).
var _ engine.ConditionalStore = (*Store)(nil)

var errConditionalUnsupported = fmt.Errorf("storemetrics: %w", engine.ErrConditionalUnsupported)

// conditional returns the wrapped store as a ConditionalStore.
func (s *Store) conditional() (engine.ConditionalStore, error) {
	if c, ok := s.next.(engine.ConditionalStore); ok {
		return c, nil
	}
	return nil, errConditionalUnsupported
}

// CancelIf implements engine.ConditionalStore.
func (s *Store) CancelIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) (engine.Record, error) {
	ctx, sp := s.begin(ctx, OpCancel)
	var rec engine.Record
	c, err := s.conditional()
	if err == nil {
		rec, err = c.CancelIf(ctx, id, expectedRevision)
	}
	sp.end(err)
	return rec, err
}

// AppendHistoryIf implements engine.ConditionalStore.
func (s *Store) AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, expectedRevision int64) (engine.Record, error) {
	ctx, sp := s.begin(ctx, OpAppendHistory)
	var rec engine.Record
	c, err := s.conditional()
	if err == nil {
		rec, err = c.AppendHistoryIf(ctx, id, msg, expectedRevision)
	}
	sp.end(err)
	return rec, err
}

// DeleteIf implements engine.ConditionalStore.
func (s *Store) DeleteIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) error {
	ctx, sp := s.begin(ctx, OpDelete)
	c, err := s.conditional()
	if err == nil {
		err = c.DeleteIf(ctx, id, expectedRevision)
	}
	sp.end(err)
	return err
}
