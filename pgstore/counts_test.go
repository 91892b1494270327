package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// exec runs sql on conn or fails t.
func execSQL(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// recount counts the rows of a2a_tasks matching where, by scanning.
func recount(t testing.TB, conn *pgx.Conn, where string, args ...any) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM a2a_tasks WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkShapes checks CheckInvariants (every counter against a recount)
// and, through List, a total of each counted shape against a scan.
func checkShapes(t testing.TB, s *pgstore.Store, conn *pgx.Conn) {
	t.Helper()
	checkInvariants(t, s)
	for _, c := range []struct {
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
	} {
		checkTotal(t, s, c.req, recount(t, conn, c.where, c.args...))
	}
}

// Issue 11: every kind of external write keeps the counters exact —
// single and multi-row INSERT, COPY, INSERT … ON CONFLICT, UPDATE of each
// counted column (and of none, and of the key), MERGE, DELETE, TRUNCATE,
// and writes rolled back whole or to a savepoint.
func TestCountsExternalWrites(t *testing.T) {
	ctx := context.Background()
	s, dsn := open(t)
	conn := connect(t, dsn)
	ins := `INSERT INTO a2a_tasks (id, context_id, revision, state, owner) `
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"store writes", func(t *testing.T) {
			for i := range 30 {
				must(t)(s.CreateOwned(ctx, task(fmt.Sprint("s", i), fmt.Sprint("c", i%4), a2a.TaskStateWorking), fmt.Sprint("o", i%3)))
			}
			must(t)(s.Cancel(ctx, "s1"))
			must(t)(s.Replace(ctx, task("s2", "c3", a2a.TaskStateCompleted), 0))
			if err := s.Delete(ctx, "s3"); err != nil {
				t.Fatal(err)
			}
		}},
		{"insert one", func(t *testing.T) {
			execSQL(t, conn, ins+`VALUES ('x1', 'c1', 1, 'TASK_STATE_WORKING', 'o1')`)
		}},
		{"insert many", func(t *testing.T) {
			execSQL(t, conn, ins+`SELECT 'm' || i, 'c' || (i % 5), 1, CASE WHEN i % 2 = 0 THEN 'TASK_STATE_WORKING' ELSE 'TASK_STATE_COMPLETED' END, 'o' || (i % 4)
FROM generate_series(1, 200) i`)
		}},
		{"copy", func(t *testing.T) {
			rows := [][]any{}
			for i := range 150 {
				rows = append(rows, []any{fmt.Sprint("p", i), fmt.Sprint("c", i%6), int64(1), "TASK_STATE_SUBMITTED", fmt.Sprint("o", i%2)})
			}
			if _, err := conn.CopyFrom(ctx, pgx.Identifier{"a2a_tasks"}, []string{"id", "context_id", "revision", "state", "owner"}, pgx.CopyFromRows(rows)); err != nil {
				t.Fatal(err)
			}
		}},
		{"upsert", func(t *testing.T) {
			execSQL(t, conn, ins+`VALUES ('x1', 'c2', 1, 'TASK_STATE_FAILED', 'o2'), ('x2', 'c2', 1, 'TASK_STATE_FAILED', 'o2')
ON CONFLICT (id) DO UPDATE SET state = excluded.state, context_id = excluded.context_id`)
		}},
		{"update state", func(t *testing.T) {
			execSQL(t, conn, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE id LIKE 'm1%'`)
		}},
		{"update context", func(t *testing.T) {
			execSQL(t, conn, `UPDATE a2a_tasks SET context_id = 'c1' WHERE id LIKE 'p%' AND id < 'p5'`)
		}},
		{"update owner", func(t *testing.T) {
			execSQL(t, conn, `UPDATE a2a_tasks SET owner = 'o1' WHERE id LIKE 'm2%'`)
		}},
		{"update to no context and no owner", func(t *testing.T) {
			execSQL(t, conn, `UPDATE a2a_tasks SET context_id = '', owner = '' WHERE id LIKE 'm3%'`)
		}},
		{"update all three", func(t *testing.T) {
			execSQL(t, conn, `UPDATE a2a_tasks SET state = 'TASK_STATE_REJECTED', context_id = 'c9', owner = 'o9' WHERE id LIKE 'p1%'`)
		}},
		{"update nothing counted", func(t *testing.T) {
			execSQL(t, conn, `UPDATE a2a_tasks SET revision = revision + 1, state = state, owner = owner`)
		}},
		{"update key", func(t *testing.T) {
			execSQL(t, conn, `UPDATE a2a_tasks SET id = id || '-renamed', state = 'TASK_STATE_WORKING' WHERE id LIKE 'm4%'`)
		}},
		{"merge", func(t *testing.T) {
			execSQL(t, conn, `MERGE INTO a2a_tasks t
USING (VALUES ('m5', 'TASK_STATE_CANCELED'), ('m6', NULL), ('new-merge', 'TASK_STATE_WORKING')) AS v(id, state)
ON t.id = v.id
WHEN MATCHED AND v.state IS NULL THEN DELETE
WHEN MATCHED THEN UPDATE SET state = v.state
WHEN NOT MATCHED THEN INSERT (id, context_id, revision, state, owner) VALUES (v.id, 'c1', 1, v.state, 'o1')`)
		}},
		{"rolled back", func(t *testing.T) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, sql := range []string{
				ins + `VALUES ('rb', 'c1', 1, 'TASK_STATE_WORKING', 'o1')`,
				`UPDATE a2a_tasks SET state = 'TASK_STATE_FAILED' WHERE id LIKE 'm7%'`,
				`DELETE FROM a2a_tasks WHERE id LIKE 'm8%'`,
			} {
				if _, err := tx.Exec(ctx, sql); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"savepoint", func(t *testing.T) {
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, ins+`VALUES ('kept', 'c1', 1, 'TASK_STATE_WORKING', 'o1')`); err != nil {
				t.Fatal(err)
			}
			sp, err := tx.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sp.Exec(ctx, `DELETE FROM a2a_tasks WHERE context_id = 'c1'`); err != nil {
				t.Fatal(err)
			}
			if err := sp.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"delete", func(t *testing.T) {
			execSQL(t, conn, `DELETE FROM a2a_tasks WHERE context_id = 'c2' OR id LIKE 'm9%'`)
		}},
		{"delete a whole context and owner", func(t *testing.T) {
			execSQL(t, conn, `DELETE FROM a2a_tasks WHERE context_id = 'c9' OR owner = 'o3'`)
			fold(t, s)
			var left int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM a2a_task_counts WHERE name IN ('c9', 'o9')`).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != 0 {
				t.Fatalf("%d counter rows left for an emptied context and owner", left)
			}
		}},
		{"truncate", func(t *testing.T) {
			execSQL(t, conn, `TRUNCATE a2a_tasks`)
			checkTotal(t, s, engine.ListRequest{}, 0)
		}},
		{"after truncate", func(t *testing.T) {
			execSQL(t, conn, ins+`VALUES ('again', 'c1', 1, 'TASK_STATE_WORKING', 'o1')`)
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.run(t)
			checkShapes(t, s, conn)
		})
	}
}

// The counters' guards: a write that bypasses one trigger (dropped,
// disabled, enabled for replicas only, or given a WHEN condition other
// than the update trigger's own, issue 53), an
// altered trigger function, or a write with triggers switched off is
// caught — by the startup check (naming the migration file) or by the
// drift check. A managed startup reinstalls a broken guard with a
// recount; a2a_task_counts_rebuild repairs the counts.
func TestCountGuards(t *testing.T) {
	ctx := context.Background()
	ins := `INSERT INTO a2a_tasks (id, context_id, revision, state, owner) VALUES ('g', 'c1', 1, 'TASK_STATE_WORKING', 'o1')`
	for _, c := range []struct {
		name     string
		breakSQL string // breaks a guard
		write    string // then writes
	}{
		{"insert trigger", `DROP TRIGGER a2a_task_counts_insert ON a2a_tasks`, ins},
		{"delete trigger", `DROP TRIGGER a2a_task_counts_delete ON a2a_tasks`, `DELETE FROM a2a_tasks WHERE id = 'seed'`},
		{"update trigger", `DROP TRIGGER a2a_task_counts_update ON a2a_tasks`, `UPDATE a2a_tasks SET state = 'TASK_STATE_FAILED'`},
		{"update trigger without owner", `CREATE OR REPLACE TRIGGER a2a_task_counts_update AFTER UPDATE OF state, context_id ON a2a_tasks
FOR EACH ROW EXECUTE FUNCTION a2a_task_counts_on_update()`, `UPDATE a2a_tasks SET owner = 'o2'`},
		{"truncate trigger", `DROP TRIGGER a2a_task_counts_truncate ON a2a_tasks`, `TRUNCATE a2a_tasks`},
		{"disabled trigger", `ALTER TABLE a2a_tasks DISABLE TRIGGER a2a_task_counts_insert`, ins},
		{"replica-only trigger", `ALTER TABLE a2a_tasks ENABLE REPLICA TRIGGER a2a_task_counts_insert`, ins},
		{"insert trigger WHEN false", `CREATE OR REPLACE TRIGGER a2a_task_counts_insert AFTER INSERT ON a2a_tasks
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN (false) EXECUTE FUNCTION a2a_task_counts_on_insert()`, ins},
		{"update trigger WHEN owner unchanged", `CREATE OR REPLACE TRIGGER a2a_task_counts_update AFTER UPDATE OF state, context_id, owner ON a2a_tasks
FOR EACH ROW WHEN (OLD.owner = NEW.owner) EXECUTE FUNCTION a2a_task_counts_on_update()`, `UPDATE a2a_tasks SET owner = 'o2'`},
		{"update trigger WHEN blind to owner", `CREATE OR REPLACE TRIGGER a2a_task_counts_update AFTER UPDATE OF id, state, context_id, owner ON a2a_tasks
FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.state IS DISTINCT FROM NEW.state OR OLD.context_id IS DISTINCT FROM NEW.context_id)
EXECUTE FUNCTION a2a_task_counts_on_update()`, `UPDATE a2a_tasks SET owner = 'o2'`},
		{"function body", `CREATE OR REPLACE FUNCTION a2a_task_counts_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$`,
			`DELETE FROM a2a_tasks`},
		{"counter table written", ``, `UPDATE a2a_task_counts SET n = n + 1 WHERE kind = 1`},
		{"zero row left", ``, `INSERT INTO a2a_task_counts VALUES (2, 'nobody', 'TASK_STATE_WORKING', 0, 0)`},
		{"count in another shard", ``, `UPDATE a2a_task_counts SET shard = (shard + 1) % 16 WHERE kind = 2`},
		{"replica role", ``, `SET session_replication_role = replica; ` + ins + `; SET session_replication_role = origin`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, dsn := open(t)
			conn := connect(t, dsn)
			must(t)(s.CreateOwned(ctx, task("seed", "c1", a2a.TaskStateWorking), "o1"))
			fold(t, s) // the seed's counts in the base, for the writes to a2a_task_counts
			checkInvariants(t, s)
			if c.breakSQL != "" {
				execSQL(t, conn, c.breakSQL)
				// Startup sees the broken install and names the migration.
				_, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true})
				if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.OwnerCountsMigrationFile) {
					t.Fatalf("startup with a broken guard: %v", err)
				}
			}
			execSQL(t, conn, c.write)
			err := s.CheckInvariants()
			if c.breakSQL == "" && !errors.Is(err, pgstore.ErrCountDrift) {
				t.Fatalf("drift not found: %v", err)
			}
			if err == nil {
				t.Fatal("CheckInvariants passed with a broken guard")
			}
			t.Logf("caught: %v", err)
			// A managed startup reinstalls a broken guard, recounting; the
			// rebuild makes counts exact when the guards were whole.
			s2, err := pgstore.Open(ctx, dsn, pgstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if c.breakSQL != "" {
				checkInvariants(t, s2)
			}
			execSQL(t, conn, `SELECT a2a_task_counts_rebuild()`)
			checkShapes(t, s2, conn)
		})
	}
}

// A counter trigger enabled ALWAYS fires for ordinary sessions too, so
// startup accepts it; it also counts writes made in replica role.
func TestCountTriggerEnabledAlways(t *testing.T) {
	ctx := context.Background()
	s, dsn := open(t)
	conn := connect(t, dsn)
	must(t)(s.CreateOwned(ctx, task("seed", "c1", a2a.TaskStateWorking), "o1"))
	execSQL(t, conn, `ALTER TABLE a2a_tasks ENABLE ALWAYS TRIGGER a2a_task_counts_insert`)
	ext, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true})
	if err != nil {
		t.Fatalf("startup with an ALWAYS trigger: %v", err)
	}
	defer ext.Close()
	execSQL(t, conn, `SET session_replication_role = replica; `+
		`INSERT INTO a2a_tasks (id, context_id, revision, state, owner) VALUES ('r', 'c1', 1, 'TASK_STATE_WORKING', 'o1'); `+
		`SET session_replication_role = origin`)
	must(t)(ext.CreateOwned(ctx, task("t", "c1", a2a.TaskStateWorking), "o1"))
	checkInvariants(t, ext)
	checkShapes(t, ext, conn)
}

// Issue 20: writers never queue on a counter. While a transaction that
// created a task of owner o in context c1 is open, creates of o in c1 and
// in another context, and a replace of one, go through at once (the
// ledger is appended to, no counter row is locked: they all share o's
// counter rows, and c1's). Tasks created through one session and deleted
// through another leave no base row behind once folded.
func TestCountWritersDoNotQueue(t *testing.T) {
	ctx := context.Background()
	s, dsn := open(t)
	conn := connect(t, dsn)
	other, same, held := "other", "same", "held"
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner) VALUES ($1, 'c1', 1, 'TASK_STATE_SUBMITTED', 'o')`, held); err != nil {
		t.Fatal(err)
	}
	// Were o's counter rows locked by tx, these would wait for it: bound them.
	bounded, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	must(t)(s.CreateOwned(bounded, task(other, "c2", a2a.TaskStateSubmitted), "o"))
	must(t)(s.CreateOwned(bounded, task(same, "c1", a2a.TaskStateSubmitted), "o"))
	must(t)(s.Replace(bounded, task(same, "c1", a2a.TaskStateWorking), 1))
	fold(t, s) // folds what is committed; tx's delta is not, and stays
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s)
	checkTotal(t, s, engine.ListRequest{Owner: "o"}, 3)
	checkTotal(t, s, engine.ListRequest{Owner: "o", ContextID: "c1", Status: a2a.TaskStateWorking}, 1)

	// Created through the pool, deleted through another session: no row
	// of owner o or its contexts is left.
	execSQL(t, conn, `DELETE FROM a2a_tasks WHERE owner = 'o'`)
	fold(t, s)
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM a2a_task_counts WHERE kind > 0`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d owner and context rows left", left)
	}
	checkInvariants(t, s)
}

// fold folds the ledger until it is empty (no writer runs alongside), or
// fails t. FoldCounts returns at once when another fold holds the lock,
// the store's own roll-up among them, whose fold may not have committed
// yet: one call, and a test that read the counters next could find the
// deltas unfolded (seen in CI: "32 counter rows left for an emptied
// context and owner").
func fold(t testing.TB, s *pgstore.Store) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := s.FoldCounts(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := s.LedgerRows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger still holds %d delta rows after folding for 20s", n)
		}
	}
}

// Updates that change no counted column do not touch the ledgers: with
// a2a_task_count_deltas and a2a_task_count_moves locked against writes,
// AppendHistory and a Replace that keeps state, context and owner
// complete, while a Replace that changes the state waits.
func TestCountsSkipUncountedUpdates(t *testing.T) {
	ctx := context.Background()
	s, dsn := open(t)
	must(t)(s.CreateOwned(ctx, task("t", "c", a2a.TaskStateWorking), "o"))
	conn := connect(t, dsn)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE a2a_task_count_deltas, a2a_task_count_moves IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// Were the counters touched, these would wait for the lock: bound them.
	bounded, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	must(t)(s.AppendHistory(bounded, "t", msg("m1", "hello")))
	same := task("t", "c", a2a.TaskStateWorking)
	same.Metadata = map[string]any{"k": "v"}
	must(t)(s.Replace(bounded, same, 0))

	done := make(chan error, 1)
	go func() {
		_, err := s.Replace(ctx, task("t", "c", a2a.TaskStateCompleted), 0)
		done <- err
	}()
	admin := connect(t, dsn)
	waitFor(t, "the state change to wait for the counter lock", func() bool { return len(blocked(t, admin)) == 1 })
	select {
	case err := <-done:
		t.Fatalf("state change did not wait for the counters: %v", err)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, s)
}

// Counter rows are upserted in key order, so single-statement writers that
// move tasks between the same contexts in opposite directions never
// deadlock (PostgreSQL would abort one with 40P01; raw SQL here, so no
// retry hides it).
func TestCountsNoDeadlock(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	const tasks = 8
	for i := range tasks {
		must(t)(s.CreateOwned(ctx, task(fmt.Sprint("t", i), "a", a2a.TaskStateWorking), "o"))
	}
	pool := s.Pool()
	var wg sync.WaitGroup
	errs := make(chan error, tasks)
	for i := range tasks {
		wg.Go(func() {
			id := fmt.Sprint("t", i)
			for j := range 60 {
				// Half the writers go a→b first, half b→a; states swap too.
				to, state := "b", "TASK_STATE_COMPLETED"
				if (i+j)%2 == 0 {
					to, state = "a", "TASK_STATE_WORKING"
				}
				if _, err := pool.Exec(ctx, `UPDATE a2a_tasks SET context_id = $2, state = $3, owner = $4 WHERE id = $1`,
					id, to, state, []string{"o", "p"}[j%2]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			t.Fatalf("deadlock between counter upserts: %v", err)
		}
		t.Fatal(err)
	}
	checkInvariants(t, s)
}

// L8 in one round trip: count and page go as one pipelined batch in a
// REPEATABLE READ transaction. When a statement of it fails, the aborted
// transaction is rolled back and the connection stays in the pool: the
// next List succeeds on the same connection (no new one is opened).
func TestListBatchFailureKeepsConnection(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s, err := pgstore.Open(ctx, dsn+" pool_max_conns=1", pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must(t)(s.Create(ctx, task("t", "c", a2a.TaskStateWorking)))
	checkTotal(t, s, engine.ListRequest{}, 1)
	conns := s.Pool().Stat().NewConnsCount()
	conn := connect(t, dsn)
	execSQL(t, conn, `ALTER TABLE a2a_task_counts RENAME TO moved`)
	_, err = s.List(ctx, &engine.ListRequest{IncludeTotalSize: true})
	wantErr(t, err, engine.ErrInternal)
	execSQL(t, conn, `ALTER TABLE moved RENAME TO a2a_task_counts`)
	checkTotal(t, s, engine.ListRequest{}, 1)
	if n := s.Pool().Stat().NewConnsCount(); n != conns {
		t.Fatalf("the pool opened %d new connections after the failed List", n-conns)
	}
}

// Issue 31: a statement inserting or deleting at least 64 rows (a bulk
// load, a retention batch) adds its counts to the base at once, so that no
// total scans a ledger it left; smaller statements append to the ledger.
// The counters stay exact either way.
func TestBulkStatementsLeaveNoBacklog(t *testing.T) {
	ctx := context.Background()
	s, dsn := open(t)
	conn := connect(t, dsn)
	if _, err := s.FoldCounts(ctx); err != nil {
		t.Fatal(err)
	}
	pending := func() (n int64) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM a2a_task_count_deltas`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner)
SELECT 'b' || i, 'c' || (i % 7), 1, 'TASK_STATE_WORKING', 'o' || (i % 3) FROM generate_series(1, 1000) i`)
	if n := pending(); n != 0 {
		t.Fatalf("a 1000-row insert left %d ledger rows", n)
	}
	execSQL(t, conn, `DELETE FROM a2a_tasks WHERE id LIKE 'b%' AND (substr(id, 2)::int) <= 500`)
	if n := pending(); n != 0 {
		t.Fatalf("a 500-row delete left %d ledger rows", n)
	}
	execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner) VALUES ('small', 'c1', 1, 'TASK_STATE_WORKING', 'o1')`)
	if n := pending(); n == 0 {
		t.Fatal("a one-row insert wrote to the base: the ledger is for small writes")
	}
	execSQL(t, conn, `DELETE FROM a2a_tasks WHERE context_id = 'c3'`) // every c3 task: ≥ 64, context rows to zero
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	resp, err := s.List(ctx, &engine.ListRequest{IncludeTotalSize: true, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	var want int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM a2a_tasks`).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if resp.TotalSize != want {
		t.Fatalf("total %d, recount %d", resp.TotalSize, want)
	}
}

// Issue 31: a change of state alone (a task's lifecycle: context and
// owner kept) appends one row to the moves ledger, which only totals by
// state read; a change of context (or owner) appends two to the deltas
// ledger. Every total stays exact before and after the fold, which
// empties both.
func TestStateMovesLedger(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s := openNoRollup(t, dsn)
	conn := connect(t, dsn)
	ledgers := func() (deltas, moves int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM a2a_task_count_deltas), (SELECT count(*) FROM a2a_task_count_moves)`).Scan(&deltas, &moves); err != nil {
			t.Fatal(err)
		}
		return deltas, moves
	}
	must(t)(s.CreateOwned(ctx, task("t1", "c1", a2a.TaskStateSubmitted), "o1"))
	must(t)(s.CreateOwned(ctx, task("t2", "c1", a2a.TaskStateWorking), "o1"))
	must(t)(s.CreateOwned(ctx, task("t3", "c3", a2a.TaskStateSubmitted), "o3")) // moves of another context and owner
	fold(t, s)
	must(t)(s.Replace(ctx, task("t1", "c1", a2a.TaskStateWorking), 0))
	must(t)(s.Replace(ctx, task("t1", "c1", a2a.TaskStateCompleted), 0))
	must(t)(s.Replace(ctx, task("t3", "c3", a2a.TaskStateWorking), 0))
	if d, m := ledgers(); d != 0 || m != 3 {
		t.Fatalf("three changes of state alone: %d delta rows, %d move rows; want 0 and 3 (a move is one row)", d, m)
	}
	checkShapes(t, s, conn)
	must(t)(s.Replace(ctx, task("t2", "c2", a2a.TaskStateCompleted), 0))
	execSQL(t, conn, `UPDATE a2a_tasks SET owner = 'o2' WHERE id = 't1'`)
	if d, m := ledgers(); d != 4 || m != 3 {
		t.Fatalf("a change of context and one of owner: %d delta rows, %d move rows; want 4 and 3", d, m)
	}
	checkShapes(t, s, conn)
	checkTotal(t, s, engine.ListRequest{Status: a2a.TaskStateCompleted}, 2)
	checkTotal(t, s, engine.ListRequest{Owner: "o1", Status: a2a.TaskStateWorking}, 0)
	fold(t, s)
	if d, m := ledgers(); d != 0 || m != 0 {
		t.Fatalf("after the fold: %d deltas, %d moves pending", d, m)
	}
	checkShapes(t, s, conn)
	checkTotal(t, s, engine.ListRequest{Status: a2a.TaskStateCompleted}, 2)
}
