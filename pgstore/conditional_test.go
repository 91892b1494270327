package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The conditional writes on a row at the maximum time (S5), which the
// storetest clause can only reach with an injected clock: the revision is
// compared first (another revision is a conflict), then the row cannot
// advance (ErrInternal), a deduplicated append still succeeds, and a
// Delete on the revision deletes. Nothing else changes the row.
func TestConditionalAtMaxTime(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	tk := task("top", "c", a2a.TaskStateWorking)
	tk.History = []*a2a.Message{msg("m0", "hello")}
	must(t)(s.Create(ctx, tk))
	if _, err := s.Pool().Exec(ctx, `UPDATE public.a2a_tasks SET updated_at = '294247-01-10 04:00:54.775807+00' WHERE id = 'top'`); err != nil {
		t.Fatal(err)
	}
	before := must(t)(s.Get(ctx, "top"))
	for _, c := range []struct {
		what string
		rev  int64
		want error
		do   func(rev int64) error
	}{
		{"CancelIf", 1, engine.ErrInternal, func(rev int64) error { _, err := s.CancelIf(ctx, "top", rev); return err }},
		{"CancelIf", 2, engine.ErrRevisionConflict, func(rev int64) error { _, err := s.CancelIf(ctx, "top", rev); return err }},
		{"AppendHistoryIf", 1, engine.ErrInternal, func(rev int64) error { _, err := s.AppendHistoryIf(ctx, "top", msg("m1", "new"), rev); return err }},
		{"AppendHistoryIf", 2, engine.ErrRevisionConflict, func(rev int64) error { _, err := s.AppendHistoryIf(ctx, "top", msg("m1", "new"), rev); return err }},
		{"AppendHistoryIf (known message)", 2, engine.ErrRevisionConflict, func(rev int64) error { _, err := s.AppendHistoryIf(ctx, "top", msg("m0", "again"), rev); return err }},
		{"DeleteIf", 2, engine.ErrRevisionConflict, func(rev int64) error { return s.DeleteIf(ctx, "top", rev) }},
	} {
		if err := c.do(c.rev); !errors.Is(err, c.want) {
			t.Errorf("%s on revision %d at the maximum time: error %v, want %v", c.what, c.rev, err, c.want)
		}
	}
	got, err := s.AppendHistoryIf(ctx, "top", msg("m0", "again"), 1)
	if err != nil || got.Revision != 1 || got.Cursor != before.Cursor || len(got.Task.History) != 1 {
		t.Errorf("deduplicated AppendHistoryIf at the maximum time: %v, revision %d cursor %+v, %d messages", err, got.Revision, got.Cursor, len(got.Task.History))
	}
	if after := must(t)(s.Get(ctx, "top")); after.Revision != 1 || after.Cursor != before.Cursor ||
		after.Task.Status.State != a2a.TaskStateWorking || len(after.Task.History) != 1 {
		t.Errorf("refused writes changed the row: revision %d cursor %+v state %s, %d messages", after.Revision, after.Cursor, after.Task.Status.State, len(after.Task.History))
	}
	if err := s.DeleteIf(ctx, "top", 1); err != nil {
		t.Errorf("DeleteIf on the revision at the maximum time: %v", err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}
