package storemetrics

import (
	"context"
	"fmt"
	"time"

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
	start := time.Now()
	var rec engine.Record
	c, err := s.conditional()
	if err == nil {
		rec, err = c.CancelIf(ctx, id, expectedRevision)
	}
	s.observe(OpCancel, start, err)
	return rec, err
}

// AppendHistoryIf implements engine.ConditionalStore.
func (s *Store) AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, expectedRevision int64) (engine.Record, error) {
	start := time.Now()
	var rec engine.Record
	c, err := s.conditional()
	if err == nil {
		rec, err = c.AppendHistoryIf(ctx, id, msg, expectedRevision)
	}
	s.observe(OpAppendHistory, start, err)
	return rec, err
}

// DeleteIf implements engine.ConditionalStore.
func (s *Store) DeleteIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) error {
	start := time.Now()
	c, err := s.conditional()
	if err == nil {
		err = c.DeleteIf(ctx, id, expectedRevision)
	}
	s.observe(OpDelete, start, err)
	return err
}
