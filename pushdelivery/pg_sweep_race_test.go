package pushdelivery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/a2astore/a2astore/pushdelivery"
	"github.com/a2astore/a2astore/pushdelivery/outboxtest"
)

// gatedEnv is an outbox whose schema reads the tasks (and, with marks,
// the deletion marks) of a pgstore in another schema through views; the
// views call a gate on every row they read, which, while the
// statement the test armed runs, waits on an advisory lock the test
// holds. A sweep statement so stopped has taken its snapshot and has
// not yet locked any record: the test commits writes in that window,
// then lets it go on.
type gatedEnv struct {
	*pgEnv
	store string // the store's schema
	key   int64  // the advisory lock of the gate
}

func newGatedEnv(t *testing.T, app string, marks bool, clock func() time.Time) *gatedEnv {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	store := pgtest.Schema(t, dsn)
	outbox := pgtest.Schema(t, dsn)
	pool := newPool(t, dsn, app)
	s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: store, Log: true})
	if err != nil {
		t.Fatal(err)
	}
	st, ob := pgx.Identifier{store}.Sanitize(), pgx.Identifier{outbox}.Sanitize()
	e := &gatedEnv{pgEnv: &pgEnv{dsn: dsn, schema: outbox, pool: pool, s: s}, store: store}
	if err := pool.QueryRow(ctx, `SELECT hashtext($1)`, outbox).Scan(&e.key); err != nil {
		t.Fatal(err)
	}
	ddl := []string{
		fmt.Sprintf(`CREATE TABLE %s.gate_armed (q text NOT NULL)`, ob),
		fmt.Sprintf(`CREATE FUNCTION %[1]s.gate() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM %[1]s.gate_armed WHERE q = current_query()) THEN
		PERFORM pg_advisory_xact_lock_shared(%[2]d);
	END IF;
	RETURN true;
END $$`, ob, e.key),
		// OFFSET 0: the view is read whole, its gate called on each row,
		// whatever the conditions of the statement reading it.
		fmt.Sprintf(`CREATE VIEW %s.a2a_tasks AS SELECT * FROM %s.a2a_tasks WHERE %s.gate() OFFSET 0`, ob, st, ob),
	}
	if marks {
		ddl = append(ddl, fmt.Sprintf(`CREATE VIEW %s.a2a_task_deletions AS SELECT * FROM %s.a2a_task_deletions WHERE %s.gate() OFFSET 0`, ob, st, ob))
	}
	for _, q := range ddl {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	e.o, err = pushdelivery.NewPG(ctx, pool, pushdelivery.PGOptions{Schema: outbox, Lease: outboxtest.Lease, Rescan: outboxtest.Rescan, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	// A task, so that the view has a row to call its gate on.
	newTask(t, s, "aa-other")
	return e
}

// sweepAcross runs a sweep whose statement stmt stops, having taken its
// snapshot, until between has run and committed; it returns the records
// the sweep deleted.
func (e *gatedEnv) sweepAcross(t *testing.T, app, stmt string, between func()) int {
	t.Helper()
	ctx := context.Background()
	holder := newPool(t, e.dsn, app+"-gate")
	gate, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Rollback(ctx)
	if _, err := gate.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, e.key); err != nil {
		t.Fatal(err)
	}
	armed := fmt.Sprintf(`%s.gate_armed`, pgx.Identifier{e.schema}.Sanitize())
	if _, err := e.pool.Exec(ctx, `INSERT INTO `+armed+` (q) VALUES ($1)`, stmt); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := e.o.Sweep(ctx, 10*time.Minute, 100)
		done <- result{n, err}
	}()
	waitForLockWait(t, holder, app)
	// Disarmed: the writes below, and the rest of the sweep, pass the gate.
	if _, err := e.pool.Exec(ctx, `DELETE FROM `+armed); err != nil {
		t.Fatal(err)
	}
	between()
	if err := gate.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.n
}

// SPEC N1, N2 (#51): a sweep judges a record by a snapshot taken before
// it locks the record. A task created, and its config saved again (an
// acknowledged CreateTaskPushConfig), between the two keeps the config
// (before: the statement locked the row saved since, re-checked only the
// conditions on its own columns — the task's absence stayed that of its
// snapshot — and deleted it). Each of the three statements that judge a
// record by its task's absence: the sweep without marks, the one of
// never-created tasks and the walk.
func TestPGSweepKeepsConfigSavedInWindow(t *testing.T) {
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		name      string
		marks     bool
		delivered int64
		stmt      func(*pushdelivery.PG) string
	}{
		{"without marks", false, 1, func(o *pushdelivery.PG) string { _, _, all := o.SweepStatements(); return all }},
		{"never created", true, 0, func(o *pushdelivery.PG) string { _, unborn, _ := o.SweepStatements(); return unborn }},
		{"walk", true, 1, (*pushdelivery.PG).SweepWalkStatement},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := "sweep-window-" + c.name
			e := newGatedEnv(t, app, c.marks, time.Now)
			rec := func() *pushdelivery.Record {
				return &pushdelivery.Record{TaskID: "zz", Config: a2a.PushConfig{ID: "c", URL: "https://example.com/hook"},
					Created: old, NextAt: old, Delivered: c.delivered}
			}
			// Saved long ago, before its task was created.
			if err := e.o.Save(ctx, rec()); err != nil {
				t.Fatal(err)
			}
			n := e.sweepAcross(t, app, c.stmt(e.o), func() {
				newTask(t, e.s, "zz")
				if err := e.o.Save(ctx, rec()); err != nil {
					t.Fatal(err)
				}
			})
			if _, err := e.o.Get(ctx, "zz", "c"); err != nil {
				t.Fatalf("the config saved again on its created task: %v (the sweep deleted %d), want kept", err, n)
			}
			// The record is one this statement sweeps once its task is
			// gone (the check above is not kept by the record's own
			// columns).
			if _, err := e.pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %s.a2a_tasks WHERE id = 'zz'`, pgx.Identifier{e.store}.Sanitize())); err != nil {
				t.Fatal(err)
			}
			if n, err := e.o.Sweep(ctx, 10*time.Minute, 100); err != nil || n != 1 {
				t.Fatalf("sweep after the task's deletion without a mark: %d, %v; want 1", n, err)
			}
		})
	}
}

// SPEC N1, N2 (#51): the sweep over deletion marks judges a record by
// its own incarnation and creation against the mark, checked again on
// the row it locks. A task deleted, created again and given a config
// between the statement's snapshot and its lock keeps the new config:
// the save for the new incarnation replaced the stale row (the lock
// finds the version judged deleted) and the new one is not stale. (A
// sweep that found the stale key in one statement and deleted by key in
// a later one would take the new config.)
func TestPGSweepDeletedKeepsConfigSavedInWindow(t *testing.T) {
	ctx := context.Background()
	const app = "sweep-window-deleted"
	// The outbox's clock past the sweep's margin: the mark is settled.
	e := newGatedEnv(t, app, true, func() time.Time { return time.Now().Add(2 * time.Minute) })
	old := time.Now().Add(-time.Hour)
	save := func(created time.Time) {
		t.Helper()
		mark, err := e.s.Deleted(ctx, "zz")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.o.Save(ctx, &pushdelivery.Record{TaskID: "zz", Config: a2a.PushConfig{ID: "c", URL: "https://example.com/hook"},
			Created: created, NextAt: created, Delivered: 1, Incarnation: mark}); err != nil {
			t.Fatal(err)
		}
	}
	newTask(t, e.s, "zz")
	save(old)
	if err := e.s.Delete(ctx, "zz"); err != nil {
		t.Fatal(err)
	}
	deleted, _, _ := e.o.SweepStatements()
	n := e.sweepAcross(t, app, deleted, func() {
		newTask(t, e.s, "zz")
		save(time.Now())
	})
	if _, err := e.o.Get(ctx, "zz", "c"); err != nil {
		t.Fatalf("the config saved on the task created again: %v (the sweep deleted %d), want kept", err, n)
	}
	if n != 0 {
		t.Fatalf("the sweep deleted %d records, want none (the stale one went with the save)", n)
	}
}
