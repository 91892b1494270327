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

			// Delete x and make y the new x, in one transaction: there is
			// no moment at which x is missing.
			r := whileWaiting(t, dsn, []string{
				`DELETE FROM a2a_tasks WHERE id = 'x'`,
				`UPDATE a2a_tasks SET id = 'x' WHERE id = 'y'`,
			}, func() (engine.Record, error) { return c.write(s) })
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

type result struct {
	rec engine.Record
	err error
}

// whileWaiting runs stmts in a transaction of its own, then write, which
// must wait on a row lock the transaction holds, and commits once write
// waits: write's statement then re-evaluates (READ COMMITTED) the row the
// transaction left.
func whileWaiting(t *testing.T, dsn string, stmts []string, write func() (engine.Record, error)) result {
	t.Helper()
	ctx := context.Background()
	other, watch := connect(t, dsn), connect(t, dsn)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan result, 1)
	go func() {
		rec, err := write()
		done <- result{rec, err}
	}()
	waitFor(t, "the write to wait on the locked row", func() bool { return len(blocked(t, watch)) > 0 })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return <-done
}

// A conditional write whose statement waits on the row while another
// transaction changes the task (revision 2, another context) and then
// commits: under READ COMMITTED the statement re-evaluates its condition
// on the new row, so it writes nothing and is a revision conflict (not
// not-found, not success, no record). (An append of a message already in
// the history does not wait: the row it read is deduplicated, before the
// other transaction commits.)
func TestConditionalChangedDuringUpdate(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		write func(s *pgstore.Store) (engine.Record, error)
	}{
		{"CancelIf", func(s *pgstore.Store) (engine.Record, error) { return s.CancelIf(ctx, "x", 1) }},
		{"AppendHistoryIf", func(s *pgstore.Store) (engine.Record, error) {
			return s.AppendHistoryIf(ctx, "x", msg("m1", "new"), 1)
		}},
		{"DeleteIf", func(s *pgstore.Store) (engine.Record, error) { return engine.Record{}, s.DeleteIf(ctx, "x", 1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, dsn := open(t)
			tk := task("x", "old", a2a.TaskStateWorking)
			tk.History = []*a2a.Message{msg("m0", "hello")}
			must(t)(s.Create(ctx, tk))
			r := whileWaiting(t, dsn, []string{
				`UPDATE a2a_tasks SET revision = revision + 1, context_id = 'moved' WHERE id = 'x'`,
			}, func() (engine.Record, error) { return c.write(s) })
			if !errors.Is(r.err, engine.ErrRevisionConflict) || r.rec.Task != nil {
				t.Errorf("%s on revision 1 of a task changed to revision 2 while it waited: %v, record %+v; want a revision conflict and no record", c.name, r.err, r.rec.Task)
			}
			got := must(t)(s.Get(ctx, "x"))
			if got.Revision != 2 || got.Task.ContextID != "moved" || got.Task.Status.State != a2a.TaskStateWorking || len(got.Task.History) != 1 {
				t.Errorf("%s wrote the changed task: revision %d %+v", c.name, got.Revision, got.Task)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Error(err)
			}
		})
	}
}
