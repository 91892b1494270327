package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// Broken conditional writes, caught in TestSuiteCatchesBugs.

// ignoreRevision has conditional writes that drop their condition: the
// window of SPEC A9 left open.
type ignoreRevision struct{ *model }

func (s ignoreRevision) CancelIf(ctx context.Context, id a2a.TaskID, _ int64) (engine.Record, error) {
	return s.Cancel(ctx, id)
}

func (s ignoreRevision) AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, _ int64) (engine.Record, error) {
	return s.AppendHistory(ctx, id, msg)
}

func (s ignoreRevision) DeleteIf(ctx context.Context, id a2a.TaskID, _ int64) error {
	return s.Delete(ctx, id)
}

// conditionLast compares the revision only after the unconditional
// method's own refusals: a deduplicated append returns the record and a
// terminal task is not cancelable whatever the revision.
type conditionLast struct{ *model }

func (s conditionLast) CancelIf(ctx context.Context, id a2a.TaskID, rev int64) (engine.Record, error) {
	if cur, err := s.Get(ctx, id); err == nil && cur.Task.Status.State.Terminal() {
		return engine.Record{}, engine.ErrNotCancelable
	}
	return s.model.CancelIf(ctx, id, rev)
}

func (s conditionLast) AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, rev int64) (engine.Record, error) {
	if cur, err := s.Get(ctx, id); err == nil && slices.ContainsFunc(cur.Task.History, func(m *a2a.Message) bool { return m.ID == msg.ID }) {
		return cur, nil
	}
	return s.model.AppendHistoryIf(ctx, id, msg, rev)
}

// TestConditionalClausesSkipWithout: a store without conditional writes
// skips the If clauses, saying so.
func TestConditionalClausesSkipWithout(t *testing.T) {
	h := wrap(true, func(m *model) engine.Store { return storeOnly{m} })
	f := runClauseTB(t, h, "If/match")
	if !f.Skipped() || len(f.msgs) != 0 {
		t.Errorf("If/match on a store without conditional writes: skipped %v, messages %q", f.Skipped(), f.msgs)
	}
}
