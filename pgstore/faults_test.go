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
	"github.com/jackc/pgx/v5/pgxpool"
)

// waitFor polls cond until it holds; it fails t after a generous bound so
// a broken build cannot hang the run.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		<-tick.C
	}
}

// blocked returns the pids of other sessions of this database whose
// statement on a2a_tasks waits for a lock.
func blocked(t *testing.T, conn *pgx.Conn) []int32 {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND state = 'active' AND wait_event_type = 'Lock' AND query LIKE '%a2a_tasks%'`)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// running counts other sessions of this database with a statement on
// a2a_tasks still active.
func running(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), `
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND state = 'active' AND query LIKE '%a2a_tasks%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// lockTable holds an ACCESS EXCLUSIVE lock on a2a_tasks on its own
// connection, so every statement on the table waits, until the returned
// function is called.
func lockTable(t *testing.T, dsn string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, dsn)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE a2a_tasks IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

func seed(t *testing.T, s *pgstore.Store, n int) {
	t.Helper()
	for i := range n {
		must(t)(s.Create(context.Background(), task(fmt.Sprint("t", i), "c", a2a.TaskStateWorking)))
	}
}

// A backend killed while it serves a List or a write: the call fails with
// ErrInternal (no driver text), the write is not applied, and the next
// calls succeed on a fresh connection.
func TestTerminateBackend(t *testing.T) {
	ctx := context.Background()
	s, dsn := open(t)
	seed(t, s, 5)
	admin := connect(t, dsn)

	calls := []struct {
		name string
		call func() error
	}{
		{"list", func() error {
			_, err := s.List(ctx, &engine.ListRequest{IncludeTotalSize: true})
			return err
		}},
		{"list_no_total", func() error {
			_, err := s.List(ctx, &engine.ListRequest{})
			return err
		}},
		{"replace", func() error {
			tk := task("t1", "other", a2a.TaskStateCompleted)
			_, err := s.Replace(ctx, tk, 1)
			return err
		}},
		{"append", func() error {
			_, err := s.AppendHistory(ctx, "t1", msg("m-killed", "x"))
			return err
		}},
		{"cancel", func() error {
			_, err := s.Cancel(ctx, "t1")
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			release := lockTable(t, dsn)
			done := make(chan error, 1)
			go func() { done <- c.call() }()
			var pids []int32
			waitFor(t, "the call to wait on the table lock", func() bool {
				pids = blocked(t, admin)
				return len(pids) == 1
			})
			var ok bool
			if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pids[0]).Scan(&ok); err != nil || !ok {
				t.Fatalf("terminate: %v %v", ok, err)
			}
			if strings.HasPrefix(c.name, "list") {
				// A read runs once more on a live connection (reconnect.go):
				// kill that attempt too; there is no third.
				first := pids[0]
				waitFor(t, "the retried read to wait on the table lock", func() bool {
					pids = blocked(t, admin)
					return len(pids) == 1 && pids[0] != first
				})
				if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pids[0]).Scan(&ok); err != nil || !ok {
					t.Fatalf("terminate: %v %v", ok, err)
				}
			}
			err := <-done
			release()
			if !errors.Is(err, engine.ErrInternal) {
				t.Fatalf("call on a killed backend: %v, want ErrInternal", err)
			}
			if strings.Contains(err.Error(), "SQLSTATE") || strings.Contains(err.Error(), "terminat") {
				t.Fatalf("driver text in error: %q", err)
			}
			r := must(t)(s.Get(ctx, "t1"))
			if r.Revision != 1 || r.Task.ContextID != "c" || r.Task.Status.State != a2a.TaskStateWorking || len(r.Task.History) != 0 {
				t.Fatalf("killed write was applied: %+v", r)
			}
			resp, err := s.List(ctx, &engine.ListRequest{IncludeTotalSize: true})
			if err != nil || len(resp.Tasks) != 5 || resp.TotalSize != 5 {
				t.Fatalf("list after kill: %v, %+v", err, resp)
			}
			// The same write now succeeds once; undo it for the next case.
			if err := c.call(); err != nil {
				t.Fatalf("%s after kill: %v", c.name, err)
			}
			tk := task("t1", "c", a2a.TaskStateWorking)
			if err := s.Delete(ctx, "t1"); err != nil {
				t.Fatal(err)
			}
			must(t)(s.Create(ctx, tk))
		})
	}
}

// A context deadline during a List that cannot progress (its table is
// locked) returns the deadline error and cancels the statement on the
// server: no query of the store is left running.
func TestDeadlineDuringList(t *testing.T) {
	s, dsn := open(t)
	seed(t, s, 3)
	admin := connect(t, dsn)
	for _, total := range []bool{false, true} {
		t.Run(fmt.Sprint("total=", total), func(t *testing.T) {
			release := lockTable(t, dsn)
			defer release()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := s.List(ctx, &engine.ListRequest{IncludeTotalSize: total})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("List past its deadline: %v", err)
			}
			t.Logf("List returned %v after a 200ms deadline", time.Since(start).Round(time.Millisecond))
			// The table is still locked, so only a server-side cancel can
			// have ended the statement.
			waitFor(t, "no store query left running", func() bool { return running(t, admin) == 0 })
			release()
			resp, err := s.List(context.Background(), &engine.ListRequest{IncludeTotalSize: true})
			if err != nil || resp.TotalSize != 3 {
				t.Fatalf("list after deadline: %v %+v", err, resp)
			}
		})
	}
}

// onePool returns a pool of one connection configured by PoolConfig, and a
// store on it holding two tasks.
func onePool(t *testing.T, dsn string) (*pgxpool.Pool, *pgstore.Store) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgstore.PoolConfig(dsn + " pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seed(t, s, 2)
	return pool, s
}

// A call whose context ended while its statement ran leaves no connection
// behind for others: pgx's cancel request for it may reach the server late,
// and on a reused connection it would cancel another caller's statement.
// The statement is still cancelled on the server (TestDeadlineDuringList);
// the connection is closed as the call returns — none waits idle in the
// pool, where a caller that was never cancelled would have to skip it (and
// pgxpool fails an Acquire that meets more such connections than the pool
// holds) — and the next call gets a new one.
func TestCancelledConnectionIsDropped(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool, s := onePool(t, dsn)
	backend := func() int32 {
		t.Helper()
		var pid int32
		if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	before := backend()
	// A call that completes keeps its connection.
	if _, err := s.Get(ctx, "t0"); err != nil {
		t.Fatal(err)
	}
	if pid := backend(); pid != before {
		t.Fatalf("a completed call replaced the connection (backend %d, then %d)", before, pid)
	}
	admin := connect(t, dsn)
	release := lockTable(t, dsn)
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.List(lctx, &engine.ListRequest{})
		done <- err
	}()
	waitFor(t, "the List to wait for the lock", func() bool { return len(blocked(t, admin)) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled List: %v", err)
	}
	if idle := pool.Stat().IdleConns(); idle != 0 {
		t.Fatalf("the cancelled call's connection went back to the pool: %d idle", idle)
	}
	release()
	if pid := backend(); pid == before {
		t.Fatalf("the connection of a cancelled call (backend %d) was reused", pid)
	}
}

// Pool exhaustion: with every connection taken, calls wait for one only
// until their context's deadline.
func TestPoolExhaustion(t *testing.T) {
	ctx := context.Background()
	pool, s := onePool(t, pgtest.DSN(t))
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func(context.Context) error{
		"list": func(ctx context.Context) error {
			_, err := s.List(ctx, &engine.ListRequest{IncludeTotalSize: true})
			return err
		},
		"get": func(ctx context.Context) error {
			_, err := s.Get(ctx, "t0")
			return err
		},
		"create": func(ctx context.Context) error {
			_, err := s.Create(ctx, task("new", "c", a2a.TaskStateWorking))
			return err
		},
	} {
		dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := call(dctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s with the pool exhausted: %v, want deadline exceeded", name, err)
		}
	}
	held.Release()
	if _, err := s.Get(ctx, "t0"); err != nil {
		t.Fatalf("get after release: %v", err)
	}
	if _, err := s.Get(ctx, "new"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("create that timed out in the pool was applied: %v", err)
	}
}

// L5, L8: while writers insert into a context, a page large enough to hold
// the whole context always has exactly TotalSize tasks: count and page come
// from one snapshot.
func TestCountPageConsistent(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t)
	const writers, perWriter = 4, 24 // 96 tasks: one page of 100 holds them all
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if _, err := s.Create(ctx, task(fmt.Sprintf("w%d-%d", w, i), "ctx", a2a.TaskStateWorking)); err != nil {
					errs <- err
					return
				}
				// Churn that moves tasks in list order too.
				if _, err := s.AppendHistory(ctx, a2a.TaskID(fmt.Sprintf("w%d-%d", w, i/2)), msg(fmt.Sprint("m", i), "x")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var pages int
	var mismatch error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, proj := range []engine.Projection{engine.ProjectionFull, engine.ProjectionLight} {
				resp, err := s.List(ctx, &engine.ListRequest{ContextID: "ctx", PageSize: 100, IncludeTotalSize: true, Projection: proj})
				if err != nil {
					errs <- err
					return
				}
				pages++
				if len(resp.Tasks) != resp.TotalSize && mismatch == nil {
					mismatch = fmt.Errorf("page of %d tasks with TotalSize %d", len(resp.Tasks), resp.TotalSize)
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if mismatch != nil {
		t.Fatal(mismatch)
	}
	resp, err := s.List(ctx, &engine.ListRequest{ContextID: "ctx", PageSize: 100, IncludeTotalSize: true})
	if err != nil || len(resp.Tasks) != writers*perWriter || resp.TotalSize != writers*perWriter {
		t.Fatalf("final page: %v %d/%d", err, len(resp.Tasks), resp.TotalSize)
	}
	t.Logf("%d consistent pages while writing", pages)
}
