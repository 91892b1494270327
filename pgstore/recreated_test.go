package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pgstore"
)

// A conditional Cancel or AppendHistory whose UPDATE waits on a row that
// another transaction deletes and, in the same transaction, replaces with
// a new task of the same ID at revision 1 (S7): the UPDATE skips the
// deleted row and cannot see the new one, so it writes nothing, and the
// follow-up read finds the new task at the expected revision. The write
// must then act on that task (it is the task at revision 1 from the
// moment the other transaction commits; a revision names one incarnation
// only, engine.ConditionalStore), never report an append that did not
// happen as deduplicated (returning the new task's record, which an
// authorization dispatcher would hand to a caller who checked the old
// one), nor call a working task not cancelable.
func TestConditionalRecreatedDuringUpdate(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		write func(s *pgstore.Store) (engine.Record, error)
		check func(rec engine.Record) bool
	}{
		{"CancelIf", func(s *pgstore.Store) (engine.Record, error) {
			return s.CancelIf(ctx, "x", 1)
		}, func(rec engine.Record) bool { return rec.Task.Status.State == a2a.TaskStateCanceled }},
		{"AppendHistoryIf", func(s *pgstore.Store) (engine.Record, error) {
			return s.AppendHistoryIf(ctx, "x", msg("m1", "new"), 1)
		}, func(rec engine.Record) bool {
			return slices.ContainsFunc(rec.Task.History, func(m *a2a.Message) bool { return m.ID == "m1" })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, dsn := open(t)
			old := task("x", "old", a2a.TaskStateWorking)
			old.History = []*a2a.Message{msg("m0", "hello")}
			must(t)(s.Create(ctx, old))
			next := task("y", "new", a2a.TaskStateWorking)
			next.History = []*a2a.Message{msg("m0", "hello")}
			must(t)(s.Create(ctx, next))

			other, watch := connect(t, dsn), connect(t, dsn)
			tx, err := other.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			// Delete x and make y the new x, in one transaction: there is
			// no moment at which x is missing.
			if _, err := tx.Exec(ctx, `DELETE FROM a2a_tasks WHERE id = 'x'`); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `UPDATE a2a_tasks SET id = 'x' WHERE id = 'y'`); err != nil {
				t.Fatal(err)
			}
			type result struct {
				rec engine.Record
				err error
			}
			done := make(chan result, 1)
			go func() {
				rec, err := c.write(s)
				done <- result{rec, err}
			}()
			waitFor(t, "the write to wait on the deleted row", func() bool { return len(blocked(t, watch)) > 0 })
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				if errors.Is(r.err, engine.ErrRevisionConflict) && r.rec.Task == nil {
					return // a conflict: the dispatcher checks the new task
				}
				t.Fatalf("%s on revision 1 of a task recreated at revision 1: %v", c.name, r.err)
			}
			if r.rec.Task == nil || r.rec.Task.ContextID != "new" || !c.check(r.rec) {
				t.Errorf("%s reported success without writing: returned %+v", c.name, r.rec.Task)
			}
			got := must(t)(s.Get(ctx, "x"))
			if !c.check(got) || got.Revision != 2 {
				t.Errorf("%s succeeded, but the task reads revision %d %+v", c.name, got.Revision, got.Task)
			}
		})
	}
}
