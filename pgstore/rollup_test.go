package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
)

// openNoRollup opens a store on dsn that runs no roll-up service.
func openNoRollup(t testing.TB, dsn string) *pgstore.Store {
	return openRollup(t, dsn, -1)
}

// openRollup opens a store on dsn whose roll-up folds every interval
// (none when negative).
func openRollup(t testing.TB, dsn string, interval time.Duration) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{CountRollupInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ledgerRows is the number of pending delta rows.
func ledgerRows(t testing.TB, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM a2a_task_count_deltas) + (SELECT count(*) FROM a2a_task_count_moves)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// lifecycleWrites makes counted writes of every kind: creates in several
// contexts, owners and states, state and context changes, a delete, and a
// multi-row statement by SQL.
func lifecycleWrites(t testing.TB, s *pgstore.Store, conn *pgx.Conn, prefix string) {
	t.Helper()
	ctx := context.Background()
	for i := range 40 {
		id := fmt.Sprint(prefix, i)
		rec := must(t)(s.CreateOwned(ctx, task(id, fmt.Sprint("c", i%3), a2a.TaskStateSubmitted), fmt.Sprint("o", i%2)))
		if i%3 != 0 {
			must(t)(s.Replace(ctx, task(id, fmt.Sprint("c", i%4), a2a.TaskStateWorking), rec.Revision))
		}
	}
	if err := s.Delete(ctx, a2a.TaskID(prefix+"5")); err != nil {
		t.Fatal(err)
	}
	execSQL(t, conn, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE id LIKE $1`, prefix+"1%")
}

// Issue 20: a fold that dies halfway — its backend terminated, or its
// context cancelled, after the fold statement and before the commit —
// rolls back whole: every total stays exact, the ledger keeps its deltas,
// and the next fold counts them once (nothing double-counted).
func TestFoldKilledHalfway(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn := connect(t, dsn)
	lifecycleWrites(t, s, conn, "a")
	fold(t, s)
	lifecycleWrites(t, s, conn, "b") // pending deltas on top of a base
	pending := ledgerRows(t, conn)
	if pending == 0 {
		t.Fatal("no pending deltas")
	}
	checkShapes(t, s, conn)

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		hook func(context.Context, pgx.Tx) error
	}{
		{"backend terminated", ctx, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
			return err
		}},
		{"context cancelled", cctx, func(ctx context.Context, tx pgx.Tx) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}},
		{"fold failed", ctx, func(context.Context, pgx.Tx) error { return errors.New("injected") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s.SetFoldHook(c.hook)
			defer s.SetFoldHook(nil)
			if n, err := s.FoldCounts(c.ctx); err == nil {
				t.Fatalf("the killed fold succeeded, folding %d", n)
			}
			if got := ledgerRows(t, conn); got != pending {
				t.Fatalf("ledger rows %d after a killed fold, want %d", got, pending)
			}
			checkShapes(t, s, conn)
		})
	}
	n, err := s.FoldCounts(ctx)
	if err != nil || n != int64(pending) {
		t.Fatalf("fold: %d, %v; want %d", n, err, pending)
	}
	checkShapes(t, s, conn)
	if n, err := s.FoldCounts(ctx); err != nil || n != 0 {
		t.Fatalf("second fold: %d, %v", n, err)
	}
	checkShapes(t, s, conn)
}

// A ledger longer than one fold transaction folds in several, each exact:
// statements of distinct groups (each under the bulk size, whose counts
// would go to the base at once), each its own transaction, leave more
// than FoldBatch delta rows. (A fold takes whole writer transactions,
// issue 53: its watermark is a transaction ID.)
func TestFoldBatches(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn := connect(t, dsn)
	rows := pgstore.FoldBatch*2 + 7
	appendDeltas(t, conn, "m", rows)
	if got := ledgerRows(t, conn); got != rows {
		t.Fatalf("ledger rows %d, want %d (one per distinct context)", got, rows)
	}
	batches := 0
	s.SetFoldHook(func(context.Context, pgx.Tx) error { batches++; return nil })
	fold(t, s)
	if batches != 3 || ledgerRows(t, conn) != 0 {
		t.Fatalf("%d fold transactions, %d rows left; want 3, 0", batches, ledgerRows(t, conn))
	}
	checkShapes(t, s, conn)
}

// appendDeltas appends k delta rows by SQL, in statements of 50 distinct
// new tasks each (under the bulk size, whose counts go to the base at
// once), each its own transaction (a fold takes whole transactions; 50
// divides FoldBatch): tasks prefix1 to prefixk.
func appendDeltas(t testing.TB, conn *pgx.Conn, prefix string, k int) {
	t.Helper()
	execSQL(t, conn, appendDeltasSQL(prefix, k))
}

func appendDeltasSQL(prefix string, k int) string {
	return fmt.Sprintf(`DO $$ BEGIN
FOR k IN 0..%[1]d / 50 LOOP
	INSERT INTO a2a_tasks (id, context_id, revision, state, owner)
	SELECT '%[2]s' || i, '%[2]s' || i, 1, 'TASK_STATE_WORKING', 'o' || (i %% 3) FROM generate_series(k * 50 + 1, least((k + 1) * 50, %[1]d)) i;
	COMMIT;
END LOOP; END $$`, k, prefix)
}

// FoldCounts folds as many rows as were pending when it began and
// returns, even while writers append deltas as fast as it folds them (issue 31: with
// four writers on two cores they append faster than one fold takes them,
// and a fold that chased the ledger never returned). Here every fold
// transaction is followed by a whole batch of new deltas.
func TestFoldCountsReturnsUnderWriters(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn, writer := connect(t, dsn), connect(t, dsn)
	pending := pgstore.FoldBatch*2 + 7
	appendDeltas(t, conn, "m", pending)
	batches := 0
	s.SetFoldHook(func(context.Context, pgx.Tx) error {
		batches++
		if batches > 4 {
			return errors.New("FoldCounts keeps folding the deltas of writes made after it was called")
		}
		appendDeltas(t, writer, fmt.Sprint("w", batches, "-"), pgstore.FoldBatch) // committed: the next fold sees them
		return nil
	})
	n, err := s.FoldCounts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The third fold takes the 7 rows left and the writer's transactions
	// up to the one holding the batch's last row, whole.
	if batches != 3 || n < int64(3*pgstore.FoldBatch) || n >= int64(3*pgstore.FoldBatch+50) {
		t.Fatalf("folded %d deltas in %d transactions; want %d (plus at most one writer transaction's 50) in 3 (the %d pending at the call, then a batch's worth)",
			n, batches, 3*pgstore.FoldBatch, pending)
	}
	if left := ledgerRows(t, conn); left != pending+3*pgstore.FoldBatch-int(n) {
		t.Fatalf("%d delta rows left, want %d", left, pending+3*pgstore.FoldBatch-int(n))
	}
	s.SetFoldHook(nil)
	checkShapes(t, s, conn)
}

// The roll-up folds on at once after a call of FoldCounts that folded a
// full batch or more, without waiting for its interval: FoldCounts
// returns with what was pending at its call folded, and writers may have
// appended more meanwhile. Here the interval is an hour and the deltas
// appended during the first call are left for the second.
func TestRollupFoldsOnAfterFullCall(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openRollup(t, dsn, time.Hour)
	conn, writer := connect(t, dsn), connect(t, dsn)
	appendDeltas(t, conn, "m", pgstore.FoldBatch*2+7)
	var folds atomic.Int32
	s.SetFoldHook(func(ctx context.Context, _ pgx.Tx) error {
		if folds.Add(1) == 2 {
			// More than the third fold takes: it stops after the
			// transaction of the batch's last row.
			_, err := writer.Exec(ctx, appendDeltasSQL("w", pgstore.FoldBatch+50))
			return err
		}
		return nil
	})
	// A total that scans more than FoldOnReadRows pending rows wakes it.
	if _, err := s.List(ctx, &engine.ListRequest{IncludeTotalSize: true, PageSize: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the roll-up to fold the ledger empty", func() bool { return ledgerRows(t, conn) == 0 })
	if n := folds.Load(); n != 4 {
		t.Fatalf("%d fold transactions, want 4 (3 in the first call, 1 for the 50 rows left)", n)
	}
	checkShapes(t, s, conn)
}

// Of several servers on one database one folds at a time: while one
// server's fold is open, another's finds the lock taken and skips; the
// rebuild and TRUNCATE wait for it. Once it commits, the other folds what
// is left.
func TestFoldOneServerAtATime(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	a := openNoRollup(t, dsn)
	b := openNoRollup(t, dsn)
	conn := connect(t, dsn)
	lifecycleWrites(t, a, conn, "a")
	inFold, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	a.SetFoldHook(func(context.Context, pgx.Tx) error {
		close(inFold)
		<-release
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := a.FoldCounts(ctx)
		done <- err
	}()
	<-inFold
	lifecycleWrites(t, b, conn, "b") // writers do not wait for a fold
	if n, err := b.FoldCounts(ctx); err != nil || n != 0 {
		t.Fatalf("fold beside another: %d, %v; want a skip", n, err)
	}
	rebuilt := make(chan error, 1)
	go func() {
		_, err := b.Pool().Exec(ctx, `SELECT a2a_task_counts_rebuild()`)
		rebuilt <- err
	}()
	admin := connect(t, dsn)
	waitFor(t, "the rebuild to wait for the fold", func() bool {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event = 'advisory' AND query LIKE '%a2a_task_counts_rebuild%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	once.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-rebuilt; err != nil {
		t.Fatal(err)
	}
	checkShapes(t, b, conn)
	lifecycleWrites(t, b, conn, "c")
	fold(t, b)
	checkShapes(t, b, conn)
}

// The service: New starts it and it folds on its cadence (the ledger
// empties without anyone calling FoldCounts); Close stops it, cancelling
// a fold in flight, which rolls back; the counts stay exact.
func TestRollupService(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{CountRollupInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dsn)
	lifecycleWrites(t, s, conn, "a")
	waitFor(t, "the roll-up to fold the ledger", func() bool { return ledgerRows(t, conn) == 0 })
	checkShapes(t, s, conn)

	inFold := make(chan struct{}, 1) // the first fold to reach the hook signals
	s.SetFoldHook(func(ctx context.Context, _ pgx.Tx) error {
		select {
		case inFold <- struct{}{}:
		default:
		}
		<-ctx.Done() // held open until Close cancels it
		return ctx.Err()
	})
	lifecycleWrites(t, s, conn, "b")
	<-inFold
	pending := ledgerRows(t, conn)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ledgerRows(t, conn); got != pending {
		t.Fatalf("ledger rows %d after Close cancelled a fold, want %d", got, pending)
	}
	other := openNoRollup(t, dsn)
	checkShapes(t, other, conn)
	fold(t, other)
	checkShapes(t, other, conn)
}

// Issue 31: a total that scans a long ledger wakes the roll-up, so that
// writes the store never sees (SQL here; other processes) leave a backlog
// for one fold, not for a whole interval. The interval is an hour: only
// the reader's wake can fold in time.
func TestTotalWakesRollup(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openRollup(t, dsn, time.Hour)
	conn := connect(t, dsn)
	for i := range 150 { // fewer counted writes than wake the roll-up
		must(t)(s.Create(ctx, task(fmt.Sprint("w", i), "c", a2a.TaskStateWorking)))
	}
	// A row trigger: two delta rows per task, whatever the statement's
	// size (a change of context: a change of state alone would go to the
	// moves ledger, which this total does not read).
	execSQL(t, conn, `UPDATE a2a_tasks SET context_id = 'c2' WHERE id LIKE 'w%'`)
	if n := ledgerRows(t, conn); n <= pgstore.FoldOnReadRows {
		t.Fatalf("setup: %d pending delta rows, want more than %d", n, pgstore.FoldOnReadRows)
	}
	resp, err := s.List(ctx, &engine.ListRequest{IncludeTotalSize: true, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if resp.TotalSize != 150 {
		t.Fatalf("total %d, want 150", resp.TotalSize)
	}
	waitFor(t, "the total to have the roll-up fold the ledger", func() bool { return ledgerRows(t, conn) == 0 })
	checkShapes(t, s, conn)
}
