package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
)

// countedShapes are the counted shapes of a total (every filter without a
// status time), with the recount each must equal.
var countedShapes = []struct {
	req   engine.ListRequest
	where string
	args  []any
}{
	{engine.ListRequest{}, "true", nil},
	{engine.ListRequest{Status: a2a.TaskStateWorking}, "state = $1", []any{"TASK_STATE_WORKING"}},
	{engine.ListRequest{ContextID: "c1"}, "context_id = $1", []any{"c1"}},
	{engine.ListRequest{ContextID: "c1", Status: a2a.TaskStateCompleted}, "context_id = $1 AND state = $2", []any{"c1", "TASK_STATE_COMPLETED"}},
	{engine.ListRequest{Owner: "o1"}, "owner = $1", []any{"o1"}},
	{engine.ListRequest{Owner: "o1", Status: a2a.TaskStateWorking}, "owner = $1 AND state = $2", []any{"o1", "TASK_STATE_WORKING"}},
	{engine.ListRequest{Owner: "o1", ContextID: "c1"}, "owner = $1 AND context_id = $2", []any{"o1", "c1"}},
	{engine.ListRequest{Owner: "o1", ContextID: "c1", Status: a2a.TaskStateWorking}, "owner = $1 AND context_id = $2 AND state = $3", []any{"o1", "c1", "TASK_STATE_WORKING"}},
}

// totalsInSnapshot runs, in tx, the statement List runs for each counted
// shape's total (after the same SET LOCAL) and a recount of a2a_tasks,
// and returns an error where they differ: both read tx's snapshot.
func totalsInSnapshot(s *pgstore.Store, tx pgx.Tx, what string) error {
	ctx := context.Background()
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		return err
	}
	for _, c := range countedShapes {
		req := c.req
		req.IncludeTotalSize = true
		_, _, sql, args, err := s.ListSQL(&req)
		if err != nil {
			return err
		}
		var total, rows, want int64
		if err := tx.QueryRow(ctx, sql, args...).Scan(&total, &rows); err != nil {
			return fmt.Errorf("%s: %+v: %w", what, c.req, err)
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM a2a_tasks WHERE "+c.where, c.args...).Scan(&want); err != nil {
			return err
		}
		if total != want {
			return fmt.Errorf("%s: %+v: total %d, recount in the same snapshot %d", what, c.req, total, want)
		}
	}
	return nil
}

// C5, L8 (issue 53): while a REPEATABLE READ snapshot stays open the whole
// time (it keeps every row the folds delete), writers churn tasks through
// the store and by SQL — creates, state flips, context and owner moves,
// deletes, writes rolled back — and folds run between them. Every total,
// read in fresh snapshots as it goes and in the held snapshot itself,
// equals a recount from its own snapshot; at the end CheckInvariants
// finds no drift and no ledger row below the watermark.
func TestTotalsUnderHeldSnapshot(t *testing.T) {
	ctx := context.Background()
	seed, rng := testRand(t)
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn, held := connect(t, dsn), connect(t, dsn)
	lifecycleWrites(t, s, conn, "pre")
	fold(t, s)

	heldTx, err := held.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer heldTx.Rollback(ctx)
	if err := totalsInSnapshot(s, heldTx, "held snapshot, at its start"); err != nil {
		t.Fatal(err)
	}

	const writers, rounds, tasks = 4, 30, 40
	states := []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateCompleted}
	seeds := make([]uint64, writers)
	for w := range seeds {
		seeds[w] = rng.Uint64()
	}
	t.Logf("writers' seeds derive from %d", seed)
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, writers+1)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- churnCounted(ctx, s, dsn, fmt.Sprint("w", w, "-"), seeds[w]+uint64(round), tasks, states)
			}()
		}
		wg.Add(1)
		go func() { // folds while the writers write
			defer wg.Done()
			for range 3 {
				if _, err := s.FoldCounts(ctx); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
		// Totals in fresh snapshots, while the writers and the folds run.
		for i := range 3 {
			err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
				return totalsInSnapshot(s, tx, fmt.Sprintf("round %d, fresh snapshot %d", round, i))
			})
			if err != nil {
				t.Error(err)
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := totalsInSnapshot(s, heldTx, fmt.Sprintf("held snapshot, round %d", round)); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	fold(t, s)
	checkShapes(t, s, conn)
}

// churnCounted makes counted writes through s and by SQL on a connection of its
// own: it creates tasks prefix0.., flips their states, moves some to
// another context or owner, rolls back a batch of writes, and deletes a
// few.
func churnCounted(ctx context.Context, s *pgstore.Store, dsn, prefix string, seed uint64, tasks int, states []a2a.TaskState) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	r := seed
	next := func(n int) int { // a small LCG: the writers' choices replay from the seed
		r = r*6364136223846793005 + 1442695040888963407
		return int((r >> 33) % uint64(n))
	}
	for i := range tasks {
		id := fmt.Sprint(prefix, next(tasks*2))
		st := states[next(len(states))]
		switch i % 5 {
		case 0: // create (or, by SQL, upsert) with the store
			_, err := s.CreateOwned(ctx, task(id, fmt.Sprint("c", next(3)), st), fmt.Sprint("o", next(3)))
			if err != nil && !isExists(err) {
				return err
			}
		case 1, 2: // a state flip by SQL: a move
			_, err = conn.Exec(ctx, `UPDATE a2a_tasks SET state = $2 WHERE id = $1`, id, string(st))
		case 3: // a context or owner move, then a write rolled back
			_, err = conn.Exec(ctx, `UPDATE a2a_tasks SET context_id = $2, owner = $3 WHERE id = $1`, id, fmt.Sprint("c", next(3)), fmt.Sprint("o", next(3)))
			if err == nil {
				err = rolledBack(ctx, conn, id)
			}
		case 4: // a delete, or an insert by SQL
			if next(2) == 0 {
				_, err = conn.Exec(ctx, `DELETE FROM a2a_tasks WHERE id = $1`, id)
			} else {
				_, err = conn.Exec(ctx, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner) VALUES ($1, 'c1', 1, $2, 'o1') ON CONFLICT (id) DO NOTHING`, id, string(st))
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rolledBack writes in a transaction it rolls back: a move and a create
// whose ledger rows no total may count.
func rolledBack(ctx context.Context, conn *pgx.Conn, id string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE a2a_tasks SET state = 'TASK_STATE_FAILED' WHERE id = $1`, id); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner) VALUES ($1 || '-rb', 'c1', 1, 'TASK_STATE_WORKING', 'o1')`, id)
	return err
}

func isExists(err error) bool { return errors.Is(err, engine.ErrAlreadyExists) }

// totalBuffers is the number of shared buffers (hit and read) the total
// of req reads, as EXPLAIN (ANALYZE, BUFFERS) of its statement reports
// it, run as List runs it (REPEATABLE READ, enable_seqscan off).
func totalBuffers(t testing.TB, s *pgstore.Store, conn *pgx.Conn, req engine.ListRequest) int {
	t.Helper()
	req.IncludeTotalSize = true
	_, _, sql, args, err := s.ListSQL(&req)
	if err != nil {
		t.Fatal(err)
	}
	buffers, _ := analyzeBuffers(t, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, "SET LOCAL enable_seqscan = off", sql, args)
	return buffers
}

// C5 (issue 53): a total reads a bounded number of buffers whatever the
// ledgers' history. With a snapshot held open (so nothing the folds
// delete can be pruned or vacuumed away), thousands of moves and deltas
// are written and folded: they lie dead below the watermark. Each counted
// shape's total then reads at most 4 buffers more than with a few
// hundred dead rows, and at most maxTotalBuffers. Before the watermark, a total read
// both ledgers by sequential scan, dead rows included: this test fails
// on that design (checked by making pendingRows read every ledger row).
func TestTotalBuffersBounded(t *testing.T) {
	const maxTotalBuffers = 24
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn, held := connect(t, dsn), connect(t, dsn)
	execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner)
SELECT 't' || i, 'c' || (i % 3), 1, 'TASK_STATE_WORKING', 'o' || (i % 2) FROM generate_series(1, 50) i`)
	heldTx, err := held.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer heldTx.Rollback(ctx)
	var n int
	if err := heldTx.QueryRow(ctx, "SELECT count(*) FROM a2a_tasks").Scan(&n); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	// flips writes k rounds of one move per task and one delta pair per
	// context move, each statement its own transaction, then folds them.
	flips := func(k int) {
		for i := range k {
			execSQL(t, conn, `UPDATE a2a_tasks SET state = CASE WHEN state = 'TASK_STATE_WORKING' THEN 'TASK_STATE_INPUT_REQUIRED' ELSE 'TASK_STATE_WORKING' END WHERE id = $1`, fmt.Sprint("t", 1+i%50))
			execSQL(t, conn, `UPDATE a2a_tasks SET context_id = $2 WHERE id = $1`, fmt.Sprint("t", 1+i%50), fmt.Sprint("c", i%3))
		}
		fold(t, s)
	}
	flips(200)
	before := make([]int, len(countedShapes))
	for i, c := range countedShapes {
		before[i] = totalBuffers(t, s, conn, c.req)
	}
	flips(3000)
	var pages int
	if err := conn.QueryRow(ctx, `SELECT (pg_relation_size('a2a_task_count_moves') + pg_relation_size('a2a_task_count_deltas')) / 8192`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages < 40 {
		t.Fatalf("the ledgers hold %d pages after the flips; want the dead rows kept by the held snapshot", pages)
	}
	for i, c := range countedShapes {
		after := totalBuffers(t, s, conn, c.req)
		t.Logf("total where %s: %d buffers with 600 ledger rows folded, %d with 9,600 (ledgers %d pages)", c.where, before[i], after, pages)
		// The slack is for the base rows: each fold under the held
		// snapshot adds a version to those it updates (see
		// docs/postgres.md, what a total costs).
		if after > before[i]+4 || after > maxTotalBuffers {
			t.Errorf("total where %s: reads %d buffers after thousands of folded ledger rows, %d before (bound %d): it grows with the ledgers' history",
				c.where, after, before[i], maxTotalBuffers)
		}
	}
	if err := totalsInSnapshot(s, heldTx, "held snapshot"); err != nil {
		t.Fatal(err)
	}
	checkShapes(t, s, conn)
}

// CheckInvariants reports a ledger row below the fold watermark and
// outside its running transactions — no total reads it (here a pending
// delete's delta moved below by hand; no trigger writes one) — though
// base plus ledger still equals a recount.
func TestCheckFindsLedgerRowsBelowWatermark(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn := connect(t, dsn)
	lifecycleWrites(t, s, conn, "a")
	fold(t, s)
	execSQL(t, conn, `DELETE FROM a2a_tasks WHERE id = 'a3'`)
	checkInvariants(t, s)
	execSQL(t, conn, `UPDATE a2a_task_count_deltas SET xact = '1'`)
	err := s.CheckInvariants()
	if !errors.Is(err, pgstore.ErrCountDrift) || !strings.Contains(err.Error(), "below the fold watermark") {
		t.Fatalf("CheckInvariants with a ledger row below the watermark: %v", err)
	}
}

// oldCounters creates a2a_tasks with migrations 001, 003 and counters
// (the counter migration of a release before), then writes 30 tasks, a
// change of state of 11 and a change of context of one under its
// triggers, which leave ledger rows pending.
func oldCounters(t testing.TB, conn *pgx.Conn, counters string) {
	t.Helper()
	execSQL(t, conn, pgstore.TableDDL("public"))
	for _, f := range []string{"migrations/001_ordering_indexes.sql", migration003, counters} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		execSQL(t, conn, string(b))
	}
	execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner)
SELECT 'old' || i, 'c' || (i % 3), 1, 'TASK_STATE_WORKING', 'o' || (i % 2) FROM generate_series(1, 30) i`)
	execSQL(t, conn, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE id LIKE 'old1%'`)
	execSQL(t, conn, `UPDATE a2a_tasks SET context_id = 'c1' WHERE id = 'old2'`)
}

// Issue 53's upgrade: a database of the release before — the ledgers of
// migration 004, without xact, with deltas and moves pending — upgrades,
// external (refused at startup naming 007, then 007 run) or managed (at
// startup); every total stays exact. Then a server of the release before
// folds beside this one (its fold, from 004, takes whatever rows it sees
// and writes no watermark), and this one's totals stay exact: mixed
// versions keep "every delta in the base or in a ledger, once".
func TestWatermarkUpgradesLedger(t *testing.T) {
	ctx := context.Background()
	for _, managed := range []bool{false, true} {
		t.Run(fmt.Sprint("managed=", managed), func(t *testing.T) {
			dsn := pgtest.DSN(t)
			conn := connect(t, dsn)
			oldCounters(t, conn, migration004)
			if ledgerRows(t, conn) == 0 {
				t.Fatal("no pending ledger rows before the upgrade")
			}
			s := upgradeCounts(t, dsn, conn, managed)
			checkShapes(t, s, conn)
			lifecycleWrites(t, s, conn, "new")
			fold(t, s)
			lifecycleWrites(t, s, conn, "newer") // pending above the watermark
			checkShapes(t, s, conn)

			// A server of the release before folds: its fold of 004.
			b, err := os.ReadFile(migration004)
			if err != nil {
				t.Fatal(err)
			}
			file := string(b)
			start := strings.Index(file, "CREATE OR REPLACE FUNCTION public.a2a_task_counts_fold()")
			end := start + strings.Index(file[start:], "$fn$;\n") + len("$fn$")
			if start < 0 || end < start {
				t.Fatal("migration 004 holds no fold function")
			}
			execSQL(t, conn, file[start:end])
			var n int64
			if err := conn.QueryRow(ctx, `SELECT public.a2a_task_counts_fold()`).Scan(&n); err != nil || n <= 0 {
				t.Fatalf("the old fold: %d, %v", n, err)
			}
			lifecycleWrites(t, s, conn, "newest")
			// CheckInvariants would report the old function; the totals,
			// each against a recount in its own snapshot, and through List:
			if err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
				return totalsInSnapshot(s, tx, "after an old server's fold")
			}); err != nil {
				t.Fatal(err)
			}
			checkTotal(t, s, engine.ListRequest{}, recount(t, conn, "true"))
			checkTotal(t, s, engine.ListRequest{Status: a2a.TaskStateWorking}, recount(t, conn, "state = 'TASK_STATE_WORKING'"))
			// This release's functions back (a restart of a managed
			// server, or 009 run again): all of it checks out.
			b, err = os.ReadFile(migration009)
			if err != nil {
				t.Fatal(err)
			}
			execSQL(t, conn, string(b))
			checkShapes(t, s, conn)
		})
	}
}

// A writer whose transaction stays open across folds (idle in
// transaction, after a counted write) is in the folds' running list: its
// rows, below the watermark's upto once it commits, are still counted,
// and then folded once. Fails if a total reads only xact >= upto
// (checked by mutation). (The fold's own exclusion of running
// transactions guards a window this test cannot open: one that commits
// between the fold's snapshot and its delete.)
func TestTotalsCountWritersOpenAcrossFolds(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn, slow := connect(t, dsn), connect(t, dsn)
	lifecycleWrites(t, s, conn, "a")
	fold(t, s)
	tx, err := slow.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner) VALUES ('slow', 'c1', 1, 'TASK_STATE_WORKING', 'o1')`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE id = 'a1'`); err != nil {
		t.Fatal(err)
	}
	// Later transactions commit and are folded past the open one.
	lifecycleWrites(t, s, conn, "b")
	fold(t, s)
	lifecycleWrites(t, s, conn, "c")
	fold(t, s)
	checkShapes(t, s, conn)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkShapes(t, s, conn) // its rows: below upto, read as running
	fold(t, s)
	checkShapes(t, s, conn)
	if n := ledgerRows(t, conn); n != 0 {
		t.Fatalf("%d ledger rows left after the fold", n)
	}
}
