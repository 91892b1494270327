package pushdelivery_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/pushdelivery"
)

// SPEC N1, C6: a deletion stamps its mark inside its statement and
// commits later. A mark stamped before more than a page of marks that
// commit first, and committed itself after sweeps read those, still has
// its task's records swept (before: a full page moved the sweep's
// watermark to the last mark read, past the one still to commit, for
// good). A record saved by the earlier release (Incarnation 0) after its
// task was deleted and created again is not stale and stays; one saved
// before the deletion goes.
func TestPGSweepLateCommittedMark(t *testing.T) {
	ctx := context.Background()
	var ahead atomic.Int64 // the outbox's clock ahead of the database's
	e := freshAt(t, "sweep-late", func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) })
	old := time.Now().Add(-time.Hour)
	save := func(task a2a.TaskID, id string, created time.Time) {
		t.Helper()
		if err := e.o.Save(ctx, &pushdelivery.Record{TaskID: task, Config: a2a.PushConfig{ID: id}, Created: created, NextAt: created, Delivered: 1}); err != nil {
			t.Fatal(err)
		}
	}
	newTask(t, e.s, "late")
	save("late", "c", old)
	newTask(t, e.s, "again")
	save("again", "before", old)
	if err := e.s.Delete(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	newTask(t, e.s, "again")
	save("again", "after", time.Now().Add(time.Millisecond))

	// The deletion of late, stamped and not committed (its task row is
	// left: only the mark matters to the sweep).
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.a2a_task_deletions (task_id, at) VALUES ('late', clock_timestamp())`, e.schema)); err != nil {
		t.Fatal(err)
	}
	// Over two pages of deletions stamped and committed after it.
	if _, err := e.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.a2a_task_deletions (task_id, at)
		SELECT 'm' || g, clock_timestamp() FROM generate_series(1, 2100) g`, e.schema)); err != nil {
		t.Fatal(err)
	}
	sweeps := func() {
		t.Helper()
		for range 4 {
			if _, err := e.o.Sweep(ctx, 10*time.Minute, 100); err != nil {
				t.Fatal(err)
			}
		}
	}
	sweeps()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	ahead.Store(int64(2 * time.Minute)) // every mark settled
	sweeps()
	for _, k := range [][2]a2a.TaskID{{"late", "c"}, {"again", "before"}} {
		if _, err := e.o.Get(ctx, k[0], string(k[1])); !errors.Is(err, pushdelivery.ErrNotFound) {
			t.Errorf("%s/%s: %v, want swept", k[0], k[1], err)
		}
	}
	if _, err := e.o.Get(ctx, "again", "after"); err != nil {
		t.Errorf("the config saved on the task created again: %v, want kept", err)
	}
}

// SPEC N1, C6: the records of tasks deleted without a deletion mark (a
// DELETE by hand, a TRUNCATE) go too, by a walk over the records by key
// that reads at most limit of them per sweep (before: never, the sweep
// reading only the marks and the records of never-created tasks); a
// record younger than the grace, of a task not created yet, stays. The
// walk's cost per step is checked by TestPGSweepCostBoundedByDeletions.
func TestPGSweepWalksMarklessDeletions(t *testing.T) {
	ctx := context.Background()
	e := fresh(t, "sweep-walk")
	old := time.Now().Add(-time.Hour)
	const n, limit = 40, 10
	for i := range n {
		id := a2a.TaskID(fmt.Sprintf("t%02d", i))
		newTask(t, e.s, id)
		if err := e.o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c"}, Created: old, NextAt: old, Delivered: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// A record of a task not created yet, younger than the grace: the
	// walk keeps it.
	if err := e.o.Save(ctx, &pushdelivery.Record{TaskID: "t00a", Config: a2a.PushConfig{ID: "c"}, Created: time.Now(), NextAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	sweepAll := func(want int) {
		t.Helper()
		swept := 0
		for range n/limit + 1 { // the whole walk, from where it stands
			got, err := e.o.Sweep(ctx, 10*time.Minute, limit)
			if err != nil {
				t.Fatal(err)
			}
			if got > limit {
				t.Fatalf("a sweep deleted %d records, limit %d", got, limit)
			}
			swept += got
		}
		if swept != want {
			t.Fatalf("swept %d records, want %d", swept, want)
		}
	}
	sweepAll(0)
	if _, err := e.pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %s.a2a_tasks WHERE id IN ('t03', 't17', 't31')`, e.schema)); err != nil {
		t.Fatal(err)
	}
	sweepAll(3)
	for _, id := range []a2a.TaskID{"t03", "t17", "t31"} {
		if _, err := e.o.Get(ctx, id, "c"); !errors.Is(err, pushdelivery.ErrNotFound) {
			t.Errorf("%s: %v, want swept", id, err)
		}
	}
	if _, err := e.o.Get(ctx, "t04", "c"); err != nil {
		t.Errorf("a live task's record: %v", err)
	}
	if _, err := e.pool.Exec(ctx, fmt.Sprintf(`TRUNCATE %s.a2a_tasks CASCADE`, e.schema)); err != nil {
		t.Fatal(err)
	}
	sweepAll(n - 3)
	if _, err := e.o.Get(ctx, "t00a", "c"); err != nil {
		t.Errorf("the record of a task not created yet, within the grace: %v, want kept", err)
	}
}

// SPEC N1, C6: the sweep reads the deletion marks by (at, task) and
// moves past a page only once its stale records all went. Marks of one
// time across page boundaries (a retention pass deletes many tasks in
// one statement) are all read (before: a key of the time alone passed
// over the rest of the marks of that time); a page whose stale records
// the limit cut is read again. The tasks exist (created again), so only
// the marks find their stale records, not the walk.
func TestPGSweepMarksOfOneTimeAndCutPages(t *testing.T) {
	ctx := context.Background()
	e := freshAt(t, "sweep-pages", func() time.Time { return time.Now().Add(2 * time.Minute) })
	old := time.Now().Add(-time.Hour)
	// In (at, task) order: the last of the first page, the first of the
	// second, two of the third.
	stale := []a2a.TaskID{"m0999", "m1000", "m2000", "m2499"}
	for _, id := range stale {
		newTask(t, e.s, id)
		if err := e.o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c"}, Created: old, NextAt: old, Delivered: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.a2a_task_deletions (task_id, at)
		SELECT 'm' || lpad(g::text, 4, '0'), now() FROM generate_series(0, 2499) g`, e.schema)); err != nil {
		t.Fatal(err)
	}
	swept := 0
	for range 2 * len(stale) {
		n, err := e.o.Sweep(ctx, 10*time.Minute, 1)
		if err != nil {
			t.Fatal(err)
		}
		swept += n
	}
	for _, id := range stale {
		if _, err := e.o.Get(ctx, id, "c"); !errors.Is(err, pushdelivery.ErrNotFound) {
			t.Errorf("%s: %v, want swept", id, err)
		}
	}
	if swept != len(stale) {
		t.Errorf("swept %d records, want %d", swept, len(stale))
	}
}

// SPEC C6: a page of the sweep reads its marks, not every mark since
// the sweep's key: the (at, task_id) order comes from the index on at
// (sorted within a time), whatever the marks stored past the page.
func TestPGSweepPageCostBoundedByPage(t *testing.T) {
	ctx := context.Background()
	e := fresh(t, "sweep-page-cost")
	// 20,000 marks, in runs of 10 of one time.
	if _, err := e.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.a2a_task_deletions (task_id, at)
		SELECT 'm' || g, now() - interval '1 hour' + (g / 10) * interval '1 millisecond' FROM generate_series(1, 20000) g`, e.schema)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, fmt.Sprintf(`ANALYZE %s.a2a_task_deletions`, e.schema)); err != nil {
		t.Fatal(err)
	}
	deleted, _, _ := e.o.SweepStatements()
	if got := rowsRead(t, e.pool, deleted, time.Time{}, "", time.Now(), 1000, 100); got > 1100 {
		t.Errorf("a page of 1000 marks read %v rows of 20000 marks", got)
	}
}
