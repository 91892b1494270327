package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/retention"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
)

// The store elects the one server that sweeps (R2).
var _ retention.Locker = (*pgstore.Store)(nil)

// R1 (C3's rule for retention): on 100k skewed rows the examining query of
// a sweep, at its start and resumed deep in the table, is Limit over an
// Index Scan (backward) of idx_a2a_tasks_updated, the resume point a row
// comparison in Index Cond, with no Sort or Seq Scan.
func retainPlans(t *testing.T, s *pgstore.Store, f *fixture, conn *pgx.Conn) {
	for _, c := range []struct {
		name  string
		after *engine.Cursor
	}{{"start", nil}, {"resumed", &f.order[len(f.order)/3]}} {
		for _, generic := range []bool{false, true} {
			sql, args := s.RetainSQL(&engine.RetainRequest{TerminalBefore: time.Now().UnixMicro(), Limit: 500, After: c.after})
			plan := explain(t, conn, sql, args, generic)
			if plan.NodeType != "Limit" || len(plan.Plans) != 1 {
				t.Errorf("%s (generic %v): top node %s, want Limit over one scan", c.name, generic, plan.NodeType)
				continue
			}
			plan.walk(func(p *planNode) {
				switch p.NodeType {
				case "Sort", "Seq Scan", "Bitmap Heap Scan":
					t.Errorf("%s (generic %v): %s in the plan", c.name, generic, p.NodeType)
				}
			})
			scan := plan.Plans[0]
			if scan.NodeType != "Index Scan" || scan.IndexName != "idx_a2a_tasks_updated" {
				t.Errorf("%s (generic %v): %s on %q, want an Index Scan of idx_a2a_tasks_updated", c.name, generic, scan.NodeType, scan.IndexName)
			}
			if c.after != nil && scan.IndexCond == "" {
				t.Errorf("%s (generic %v): the resume point is no Index Cond (filter %q)", c.name, generic, scan.Filter)
			}
		}
	}
}

// R2: rows another program wrote into the table (no owner, its own
// columns' defaults) are removed like the store's own, and the counters
// the table's triggers keep stay equal to a recount (CheckInvariants).
func TestRetainForeignRows(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn := connect(t, dsn)
	// A foreign writer: plain INSERTs an hour in the past, finished and not.
	execSQL(t, conn, `INSERT INTO `+schema+`.a2a_tasks (id, context_id, updated_at, revision, state)
SELECT 'f' || g, 'fc' || (g % 3), clock_timestamp() - interval '1 hour', 1,
       CASE WHEN g % 2 = 0 THEN 'TASK_STATE_COMPLETED' ELSE 'TASK_STATE_WORKING' END
FROM generate_series(1, 20) g`)
	own, err := s.Create(ctx, &a2a.Task{ID: "own", ContextID: "fc1", Status: a2a.TaskStatus{State: a2a.TaskStateFailed}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: own.Cursor.UpdatedAt + 1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 11 {
		t.Errorf("removed %d rows, want the 10 completed foreign ones and own", res.Removed)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.a2a_tasks WHERE state = 'TASK_STATE_WORKING'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if left := recountAll(t, conn, schema); left != 10 || n != 10 {
		t.Errorf("%d rows left (%d working), want the 10 working ones", left, n)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

func recountAll(t testing.TB, conn *pgx.Conn, schema string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM `+schema+`.a2a_tasks`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// R2: one server at a time sweeps a schema. The advisory lock is held
// until released, or until its session ends (a server that died).
func TestRetentionLock(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	ctx := context.Background()
	open := func() *pgstore.Store {
		s, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	other, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: pgtest.Schema(t, dsn)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	releaseA, ok, err := a.TryRetentionLock(ctx)
	if err != nil || !ok {
		t.Fatalf("first lock: %v %v", ok, err)
	}
	if _, ok, err := b.TryRetentionLock(ctx); err != nil || ok {
		t.Fatalf("second server got the lock while the first holds it: %v %v", ok, err)
	}
	releaseOther, ok, err := other.TryRetentionLock(ctx)
	if err != nil || !ok {
		t.Fatalf("another schema's lock: %v %v", ok, err)
	}
	releaseOther()
	releaseA()
	releaseB, ok, err := b.TryRetentionLock(ctx)
	if err != nil || !ok {
		t.Fatalf("lock after release: %v %v", ok, err)
	}
	// b's session dies (the server waits for its end): the lock goes
	// with it.
	conn := connect(t, dsn)
	var killed bool
	if err := conn.QueryRow(ctx, `SELECT bool_and(pg_terminate_backend(pid, 10000)) FROM pg_locks
WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the lock holder: %v %v", killed, err)
	}
	release, ok, err := a.TryRetentionLock(ctx)
	if err != nil || !ok {
		t.Fatalf("the lock of a dead session was not freed: %v %v", ok, err)
	}
	release()
	releaseB() // its connection is gone: this must not fail or hang
}

// R2 when the retention lock's connection dies: the session lock ends
// with it, without a word, and another server may take it and sweep
// beside this one. RetentionLockHeld (engine/retention's LockWatcher,
// asked before each batch) says so: nil while the session holds the
// lock, an error once its backend was terminated (review by helper-40:
// before, the holder had no way to learn it, and swept on).
func TestRetentionLockHeld(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	open := func() *pgstore.Store {
		s, err := pgstore.Open(ctx, dsn, pgstore.Options{CountRollupInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	if err := a.RetentionLockHeld(ctx); err == nil {
		t.Fatal("a store holding no retention lock says it holds one")
	}
	release, ok, err := a.TryRetentionLock(ctx)
	if err != nil || !ok {
		t.Fatalf("acquired %v, %v", ok, err)
	}
	defer release()
	if err := a.RetentionLockHeld(ctx); err != nil {
		t.Fatalf("while held: %v", err)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend(pid, 10000) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND classid = x'61326172'::int::oid AND objsubid = 2
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the lock's backend: %v, %v", killed, err)
	}
	if err := a.RetentionLockHeld(ctx); err == nil {
		t.Error("the lock's session was terminated, yet RetentionLockHeld says it holds")
	}
	releaseB, ok, err := b.TryRetentionLock(ctx) // what another server may now do
	if err != nil || !ok {
		t.Fatalf("another server after the loss: acquired %v, %v", ok, err)
	}
	releaseB()
}

var _ retention.LockWatcher = (*pgstore.Store)(nil)
