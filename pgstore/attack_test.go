package pgstore_test

import (
	"context"
	"testing"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// insertSQL inserts one working task in context c1, owner o1, by SQL.
const insertSQL = `INSERT INTO a2a_tasks (id, context_id, revision, state, owner) VALUES ($1, 'c1', 1, 'TASK_STATE_WORKING', 'o1')`

// txExec runs sql in tx or fails t.
func txExec(t testing.TB, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	if _, err := tx.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// C5, L8 (issue 53): a fold run by hand inside a transaction that has
// already written (so holds a transaction ID, which its own snapshot does
// not list as running) must not put that transaction below its watermark:
// the rows the transaction writes after the fold are still counted.
func TestFoldInsideWritingTransaction(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn, other := connect(t, dsn), connect(t, dsn)
	lifecycleWrites(t, s, conn, "a")
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	txExec(t, tx, insertSQL, "before")
	// A later transaction ends, so the snapshot's xmax passes ours.
	execSQL(t, other, insertSQL, "other")
	txExec(t, tx, `SELECT a2a_task_counts_fold()`)
	txExec(t, tx, insertSQL, "after")
	txExec(t, tx, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE id = 'a1'`)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkShapes(t, s, conn)
	fold(t, s)
	checkShapes(t, s, conn)
}

// C5, L8 (issue 53): rows written inside savepoints carry the top-level
// transaction's ID (what the folds' snapshots list), released and rolled
// back savepoints alike, while folds run between them; the rolled-back
// rows are never counted and the rest are counted once.
func TestTotalsSubtransactionsAcrossFolds(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn, w := connect(t, dsn), connect(t, dsn)
	lifecycleWrites(t, s, conn, "a")
	tx, err := w.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	txExec(t, tx, `SAVEPOINT s1`)
	txExec(t, tx, insertSQL, "sub1")
	var top, sub string
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text, (SELECT xact::text FROM a2a_task_count_deltas ORDER BY xact DESC LIMIT 1)`).Scan(&top, &sub); err != nil {
		t.Fatal(err)
	}
	if top != sub {
		t.Fatalf("a row written in a savepoint records %s, the top-level transaction is %s", sub, top)
	}
	txExec(t, tx, `RELEASE SAVEPOINT s1`)
	lifecycleWrites(t, s, conn, "b")
	fold(t, s)
	txExec(t, tx, `SAVEPOINT s2`)
	txExec(t, tx, insertSQL, "sub2")
	txExec(t, tx, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE id = 'a2'`)
	txExec(t, tx, `ROLLBACK TO SAVEPOINT s2`)
	txExec(t, tx, `SAVEPOINT s3`)
	txExec(t, tx, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE id = 'a4'`)
	txExec(t, tx, `RELEASE SAVEPOINT s3`)
	lifecycleWrites(t, s, conn, "c")
	fold(t, s)
	checkShapes(t, s, conn)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkShapes(t, s, conn)
	fold(t, s)
	checkShapes(t, s, conn)
}

// L8, C5: TRUNCATE is not MVCC-safe — a snapshot taken before it commits
// sees a2a_tasks empty afterwards, and a REPEATABLE READ transaction that
// truncates removes rows committed after its own snapshot. The counters
// must agree in both: a total read in a snapshot held across another
// session's TRUNCATE equals a recount there, and a TRUNCATE in a
// REPEATABLE READ transaction whose snapshot missed a commit leaves no
// count of that commit behind.
func TestTruncateAcrossSnapshots(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn, other := connect(t, dsn), connect(t, dsn)
	lifecycleWrites(t, s, conn, "a")
	fold(t, s)
	lifecycleWrites(t, s, conn, "b")

	held, err := other.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	txExec(t, held, `SELECT 1`) // the snapshot, a2a_tasks not yet locked
	execSQL(t, conn, `TRUNCATE a2a_tasks`)
	if err := totalsInSnapshot(s, held, "snapshot held across TRUNCATE"); err != nil {
		t.Error(err)
	}
	if err := held.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	checkShapes(t, s, conn)

	lifecycleWrites(t, s, conn, "c")
	rr, err := other.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Rollback(ctx)
	txExec(t, rr, `SELECT 1`)
	execSQL(t, conn, insertSQL, "late") // committed after rr's snapshot
	txExec(t, rr, `TRUNCATE a2a_tasks`)
	if err := rr.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkShapes(t, s, conn)
}

// C5, L8 (issue 53): a fold called in a REPEATABLE READ transaction whose
// snapshot predates another fold's commit and later writes either fails
// or folds only what its snapshot saw, and a second fold while one holds
// the lock takes nothing: totals stay exact either way.
func TestFoldStaleSnapshotAndSecondFold(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn, other := connect(t, dsn), connect(t, dsn)
	lifecycleWrites(t, s, conn, "a")
	stale, err := other.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Rollback(ctx)
	txExec(t, stale, `SELECT 1`)
	lifecycleWrites(t, s, conn, "b")
	fold(t, s)
	execSQL(t, conn, insertSQL, "c")
	var n int64
	if err := stale.QueryRow(ctx, `SELECT a2a_task_counts_fold()`).Scan(&n); err != nil {
		t.Logf("stale fold failed: %v", err)
	} else if err := stale.Commit(ctx); err != nil {
		t.Logf("stale fold's commit failed: %v", err)
	}
	stale.Rollback(ctx)
	checkShapes(t, s, conn)

	first, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx)
	txExec(t, first, `SELECT a2a_task_counts_fold()`)
	if err := conn.QueryRow(ctx, `SELECT a2a_task_counts_fold()`).Scan(&n); err != nil || n != -1 {
		t.Fatalf("a second fold while one holds the lock: %d, %v", n, err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkShapes(t, s, conn)
	fold(t, s)
	checkShapes(t, s, conn)
}
