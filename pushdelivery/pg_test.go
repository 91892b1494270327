package pushdelivery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/a2astore/a2astore/pushdelivery"
	"github.com/a2astore/a2astore/pushdelivery/outboxtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newPool opens a pool on dsn closed at cleanup; app names its sessions.
func newPool(t testing.TB, dsn, app string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// openPG makes a store and an outbox in a fresh schema over pool.
func openPG(t testing.TB, pool *pgxpool.Pool, schema string, clock func() time.Time) (*pushdelivery.PG, *pgstore.Store) {
	t.Helper()
	ctx := context.Background()
	if schema == "" {
		schema = pgtest.Schema(t, pgtest.DSN(t))
	}
	s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: schema, Log: true})
	if err != nil {
		t.Fatal(err)
	}
	o, err := pushdelivery.NewPG(ctx, pool, pushdelivery.PGOptions{Schema: schema, Lease: outboxtest.Lease, Rescan: outboxtest.Rescan, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return o, s
}

func TestPGConformance(t *testing.T) {
	dsn := pgtest.DSN(t)
	pool := newPool(t, dsn, "conformance")
	outboxtest.Run(t, func(t *testing.T, clock func() time.Time) (pushdelivery.Outbox, engine.Store) {
		o, s := openPG(t, pool, pgtest.Schema(t, dsn), clock)
		return o, s
	})
}

// TestPGConformanceRepeatableRead: the suite, the 16-config cap under
// concurrent saves included, on sessions whose default isolation is
// REPEATABLE READ (before, 23 configs got through: the count's snapshot
// was taken before the lock).
func TestPGConformanceRepeatableRead(t *testing.T) {
	dsn := pgtest.DSN(t)
	pool := isoPool(t, dsn, "conformance-rr", "repeatable read")
	outboxtest.Run(t, func(t *testing.T, clock func() time.Time) (pushdelivery.Outbox, engine.Store) {
		o, s := openPG(t, pool, pgtest.Schema(t, dsn), clock)
		return o, s
	})
}

// isoPool opens a pool on dsn whose sessions, of application app,
// default to isolation level iso; closed at cleanup.
func isoPool(t *testing.T, dsn, app, iso string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = iso
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var got string
	if err := pool.QueryRow(context.Background(), "SHOW default_transaction_isolation").Scan(&got); err != nil || got != iso {
		t.Fatalf("session isolation %q, %v; want %q", got, err, iso)
	}
	return pool
}

// TestPGWaitersUnderStrictIsolation (SPEC N2): a Release, a DueNow and a
// Delete that wait for a row another transaction is updating do their
// work once it commits, on sessions whose default isolation is
// REPEATABLE READ or SERIALIZABLE: they run READ COMMITTED and re-check
// the row. Before, each ran in its session's default and failed with a
// serialization error: the released record stayed leased until its
// lease ended, the recovered destination's record kept waiting for its
// backoff, the delete was refused.
func TestPGWaitersUnderStrictIsolation(t *testing.T) {
	for _, iso := range []string{"repeatable read", "serializable"} {
		t.Run("iso="+iso, func(t *testing.T) {
			ctx := context.Background()
			dsn := pgtest.DSN(t)
			schema := pgtest.Schema(t, dsn)
			o, s := openPG(t, isoPool(t, dsn, "strict", iso), schema, time.Now)
			locker := newPool(t, dsn, "locker")
			now := time.Now()
			// behind saves task's config c behind its task, due at next.
			behind := func(task a2a.TaskID, next time.Time) {
				newTask(t, s, task)
				if err := o.Save(ctx, &pushdelivery.Record{TaskID: task, Config: a2a.PushConfig{ID: "c", URL: "http://h.example/" + string(task)},
					Dest: "http://h.example", NextAt: next}); err != nil {
					t.Fatal(err)
				}
			}
			// whileUpdated runs op while another transaction updates
			// task's row, and commits that transaction once op waits
			// for it; it returns op's error.
			whileUpdated := func(task a2a.TaskID, op func() error) error {
				tx, err := locker.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if _, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s.a2a_push_configs SET attempts = attempts WHERE task_id = $1`, schema), task); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- op() }()
				waitForLockWait(t, locker, "strict")
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				return <-done
			}

			behind("rel", now)
			l, err := o.Claim(ctx, now, nil)
			if err != nil || l == nil {
				t.Fatalf("claim: %v, %v", l, err)
			}
			_ = whileUpdated("rel", func() error { l.Release(ctx); return nil })
			if l, err := o.Claim(ctx, now, nil); err != nil || l == nil || l.Record().TaskID != "rel" {
				t.Errorf("claim after the release: %v, %v; want the released record, not its lease waited out", l, err)
			} else {
				l.Release(ctx)
			}
			if err := o.Delete(ctx, "rel", "c"); err != nil {
				t.Fatal(err)
			}

			behind("due", now.Add(time.Hour))
			var n int
			if err := whileUpdated("due", func() (err error) { n, err = o.DueNow(ctx, "http://h.example", now); return err }); err != nil || n != 1 {
				t.Errorf("DueNow: %d, %v; want the one record made due", n, err)
			}

			if err := whileUpdated("due", func() error { return o.Delete(ctx, "due", "c") }); err != nil {
				t.Errorf("delete: %v", err)
			}
			if _, err := o.Get(ctx, "due", "c"); !errors.Is(err, pushdelivery.ErrNotFound) {
				t.Errorf("after the delete: %v, want ErrNotFound", err)
			}
		})
	}
}

// Two pools (two instances) claiming at once never share a record.
func TestPGTwoPoolsNeverShare(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	a, s := openPG(t, newPool(t, dsn, "a"), schema, time.Now)
	b, _ := openPG(t, newPool(t, dsn, "b"), schema, time.Now)
	ctx := context.Background()
	want := 0
	for i := range 8 {
		id := a2a.TaskID(fmt.Sprintf("t%d", i))
		newTask(t, s, id)
		for j := range 12 {
			if err := a.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: fmt.Sprint(j)}}); err != nil {
				t.Fatal(err)
			}
			want++
		}
	}
	seen := outboxtest.ClaimConcurrently(t, time.Now(), 8, a, b)
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s claimed %d times", k, n)
		}
	}
	if len(seen) != want {
		t.Errorf("claimed %d records, want %d", len(seen), want)
	}
}

// A claimer whose connections die right after Claim holds the record
// until the lease ends; then the other instance claims it, and the dead
// claimer's late Commit is refused.
func TestPGTerminatedClaimerLosesLease(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	ctx := context.Background()
	poolA, poolB := newPool(t, dsn, "claimer-a"), newPool(t, dsn, "claimer-b")
	a, s := openPG(t, poolA, schema, time.Now)
	b, _ := openPG(t, poolB, schema, time.Now)
	newTask(t, s, "t1")
	if err := b.Save(ctx, &pushdelivery.Record{TaskID: "t1", Config: a2a.PushConfig{ID: "c"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	la, err := a.Claim(ctx, now, nil)
	if err != nil || la == nil {
		t.Fatalf("claim: %v, %v", la, err)
	}
	var killed int
	if err := poolB.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'claimer-a'`).Scan(&killed); err != nil || killed == 0 {
		t.Fatalf("terminate: %d backends, %v", killed, err)
	}
	if l, err := b.Claim(ctx, now.Add(outboxtest.Lease), nil); l != nil || err != nil {
		t.Fatalf("claimed under a live lease: %v, %v", l, err)
	}
	lb, err := b.Claim(ctx, now.Add(outboxtest.Lease+time.Second), nil)
	if err != nil || lb == nil {
		t.Fatalf("claim after the lease: %v, %v", lb, err)
	}
	r := la.Record()
	r.Delivered = 1
	// The first use of a killed connection may fail; a retried Commit must
	// then find the lease lost.
	for i := 0; i < 5 && !errors.Is(err, pushdelivery.ErrLeaseLost); i++ {
		err = la.Commit(ctx, r)
	}
	if !errors.Is(err, pushdelivery.ErrLeaseLost) {
		t.Fatalf("late commit: %v, want ErrLeaseLost", err)
	}
	if got, _ := b.Get(ctx, "t1", "c"); got.Delivered != 0 {
		t.Fatalf("late commit changed the record: delivered %d", got.Delivered)
	}
	if err := lb.Commit(ctx, r); err != nil {
		t.Fatal(err)
	}
}

// pgEnv is a store and an outbox in a fresh schema, on a pool of their
// own.
type pgEnv struct {
	dsn, schema string
	pool        *pgxpool.Pool
	o           *pushdelivery.PG
	s           *pgstore.Store
}

// fresh opens a pgEnv whose pool's sessions are of application app.
func fresh(t testing.TB, app string) *pgEnv {
	t.Helper()
	return freshAt(t, app, time.Now)
}

// freshAt is fresh with the outbox on clock.
func freshAt(t testing.TB, app string, clock func() time.Time) *pgEnv {
	t.Helper()
	e := &pgEnv{dsn: pgtest.DSN(t)}
	e.schema = pgtest.Schema(t, e.dsn)
	e.pool = newPool(t, e.dsn, app)
	e.o, e.s = openPG(t, e.pool, e.schema, clock)
	return e
}

// completed makes task id and completes it (revision 2).
func completed(t *testing.T, s *pgstore.Store, id a2a.TaskID) {
	t.Helper()
	newTask(t, s, id)
	if _, err := s.Replace(context.Background(), &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, 0); err != nil {
		t.Fatal(err)
	}
}

// finishedClaim makes task t1, completes it, saves config c on it and
// claims it at now: a lease at the task's terminal revision, returned.
func finishedClaim(t *testing.T, o *pushdelivery.PG, s *pgstore.Store, now time.Time) pushdelivery.Lease {
	t.Helper()
	ctx := context.Background()
	completed(t, s, "t1")
	if err := o.Save(ctx, &pushdelivery.Record{TaskID: "t1", Config: a2a.PushConfig{ID: "c"}, NextAt: now}); err != nil {
		t.Fatal(err)
	}
	l, err := o.Claim(ctx, now, nil)
	if err != nil || l == nil || l.Revision() != 2 {
		t.Fatalf("claim: %v, %v; want a lease at revision 2", l, err)
	}
	return l
}

// finished is a fresh schema's store and outbox, on a pool of its own,
// with finishedClaim's lease.
type finished struct {
	*pgEnv
	l   pushdelivery.Lease
	now time.Time
}

func newFinished(t *testing.T, app string) *finished {
	t.Helper()
	f := &finished{pgEnv: fresh(t, app), now: time.Now()}
	f.l = finishedClaim(t, f.o, f.s, f.now)
	return f
}

// begin opens a transaction on a new pool of application app, rolled
// back at cleanup unless committed.
func (f *finished) begin(t *testing.T, app string) (pgx.Tx, *pgxpool.Pool) {
	t.Helper()
	pool := newPool(t, f.dsn, app)
	tx, err := pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	return tx, pool
}

// commitDone commits l delivered up to its revision, Done, due at now.
func commitDone(t *testing.T, l pushdelivery.Lease, now time.Time) {
	t.Helper()
	r := l.Record()
	r.Delivered, r.Done, r.NextAt = l.Revision(), true, now
	if err := l.Commit(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// foreignWrite moves task t1 on by SQL, on db (a pool or an open
// transaction).
func foreignWrite(t *testing.T, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, schema string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), fmt.Sprintf(`UPDATE %s.a2a_tasks SET revision = revision + 1, state = 'TASK_STATE_WORKING' WHERE id = 't1'`, schema)); err != nil {
		t.Fatal(err)
	}
}

// TestPGCommitDoneBehindWithoutTouch: a write committed between a claim
// at the terminal revision and the commit that sets Done keeps the record
// due, even with no Touch and before the next rescan (the commit reads
// the task's revision).
func TestPGCommitDoneBehindWithoutTouch(t *testing.T) {
	f := newFinished(t, "commit-done")
	foreignWrite(t, f.pool, f.schema)
	commitDone(t, f.l, f.now)
	if l, err := f.o.Claim(context.Background(), f.now, nil); err != nil || l == nil || l.Revision() != 3 {
		t.Fatalf("claim after a write the commit did not see: %v, %v; want a lease at revision 3", l, err)
	}
}

// TestPGCommitDuringWriteReopenedByRescan: a commit that sets Done while a
// write to the task is in flight does not see it, and the record is Done
// behind the task; with no Touch of the task, the next rescan reopens it.
func TestPGCommitDuringWriteReopenedByRescan(t *testing.T) {
	ctx := context.Background()
	f := newFinished(t, "commit-done")
	tx, _ := f.begin(t, "writer")
	foreignWrite(t, tx, f.schema)
	commitDone(t, f.l, f.now)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := f.o.Get(ctx, "t1", "c"); err != nil || !r.Done {
		t.Fatalf("record %+v, %v; want Done (the commit did not see the write)", r, err)
	}
	if l, err := f.o.Claim(ctx, f.now.Add(outboxtest.Rescan-time.Second), nil); l != nil || err != nil {
		t.Fatalf("claimed before the rescan, untouched: %v, %v", l, err)
	}
	if l, err := f.o.Claim(ctx, f.now.Add(outboxtest.Rescan), nil); err != nil || l == nil || l.Revision() != 3 {
		t.Fatalf("claim at the rescan: %v, %v; want a lease at revision 3", l, err)
	}
}

// TestPGClaimDespiteReopenFailure: a reopen that fails (here: a touched ID
// PostgreSQL cannot take) is logged, and the claim goes on; before, every
// Claim returned the reopen's error and no record was claimed.
func TestPGClaimDespiteReopenFailure(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	o, s := openPG(t, newPool(t, dsn, "reopen-fails"), pgtest.Schema(t, dsn), time.Now)
	newTask(t, s, "t1")
	now := time.Now()
	if err := o.Save(ctx, &pushdelivery.Record{TaskID: "t1", Config: a2a.PushConfig{ID: "c"}, NextAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.Depth(ctx, now); err != nil { // the first rescan, done
		t.Fatal(err)
	}
	o.TouchUnchecked("bad\x00id")
	if l, err := o.Claim(ctx, now, nil); err != nil || l == nil {
		t.Fatalf("claim with a failing reopen: %v, %v; want the due record", l, err)
	}
}

// TestPGTouchKeptWhileLeased: a Touch is not used up by a reopen while
// the task's record is leased. The holder's commit may store Done without
// seeing the write that touched the task (here it took its snapshot, then
// waited for a lock on the row, as behind a concurrent Save); the next
// reopen, after it, clears that Done. Before, the Touch was spent on the
// reopen that found the leased row not Done, and the record waited for
// the rescan (a reviewer: a minute).
func TestPGTouchKeptWhileLeased(t *testing.T) {
	ctx := context.Background()
	f := newFinished(t, "kept-while-leased")
	o, l, now := f.o, f.l, f.now
	tx, locker := f.begin(t, "locker")
	if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT 1 FROM %s.a2a_push_configs WHERE task_id = 't1' FOR UPDATE`, f.schema)); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	go func() {
		r := l.Record()
		r.Delivered, r.Done, r.NextAt = l.Revision(), true, now
		committed <- l.Commit(ctx, r)
	}()
	waitForLockWait(t, locker, "kept-while-leased")
	foreignWrite(t, locker, f.schema)
	o.Touch("t1")
	if l, err := o.Claim(ctx, now, nil); l != nil || err != nil {
		t.Fatalf("claim while leased and locked: %v, %v", l, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if l, err := o.Claim(ctx, now, nil); err != nil || l == nil || l.Revision() != 3 {
		t.Fatalf("claim after the commit: %v, %v; want a lease at revision 3", l, err)
	}
}

// waitForLockWait waits until a session of application app waits on a
// lock (seen through pool).
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, app string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatalf("waiting for %s to wait on a lock: %v", app, err)
		}
		if n > 0 {
			return
		}
	}
}

// TestPGRescanInBatches: a rescan reads the Done records a batch per call
// (here 2), so that no Claim or Depth waits for all of them (a reviewer:
// a rescan of 1e5 records over 1e6 tasks took 1.2 s in one statement);
// each call reopens the next batch's records whose task moved on, and the
// rescan ends after its last batch.
func TestPGRescanInBatches(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	e := fresh(t, "rescan-batches")
	o, s, pool, schema := e.o, e.s, e.pool, e.schema
	for i := range 5 {
		id := a2a.TaskID(fmt.Sprint("t", i))
		completed(t, s, id)
		if err := o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c"}, NextAt: now, Delivered: 2, Done: true}); err != nil {
			t.Fatal(err)
		}
	}
	pending := func(at time.Time) int {
		n, _, err := o.Depth(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	pending(now) // the first rescan, in one batch
	o.SetRescanBatch(2)
	if _, err := pool.Exec(ctx, fmt.Sprintf(`UPDATE %s.a2a_tasks SET revision = revision + 1`, schema)); err != nil {
		t.Fatal(err)
	}
	var got []int
	for i := range 5 {
		got = append(got, pending(now.Add(outboxtest.Rescan+time.Duration(i)*time.Second)))
	}
	if !slices.Equal(got, []int{2, 4, 5, 5, 5}) {
		t.Fatalf("records due after each call %v, want [2 4 5 5 5]", got)
	}
}

// TestPGReopenSkipsLockedRows: a reopen does not wait for a row another
// transaction holds (a reviewer: an open transaction on a Done row hung
// every claim of the instance); the touched task stays touched, and the
// first claim after the lock is gone reopens its record.
func TestPGReopenSkipsLockedRows(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	e := fresh(t, "skips-locked")
	o, s, pool, schema := e.o, e.s, e.pool, e.schema
	completed(t, s, "t1")
	newTask(t, s, "t2")
	for _, r := range []*pushdelivery.Record{
		{TaskID: "t1", Config: a2a.PushConfig{ID: "c"}, NextAt: now, Delivered: 2, Done: true},
		{TaskID: "t2", Config: a2a.PushConfig{ID: "c"}, NextAt: now.Add(time.Second)},
	} {
		if err := o.Save(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := o.Depth(ctx, now); err != nil { // the first rescan, done
		t.Fatal(err)
	}
	foreignWrite(t, pool, schema)
	tx, err := newPool(t, e.dsn, "locker").Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT 1 FROM %s.a2a_push_configs WHERE task_id = 't1' FOR UPDATE`, schema)); err != nil {
		t.Fatal(err)
	}
	o.Touch("t1")
	// Bounded only so that a reopen waiting on the lock fails the test
	// rather than hanging it.
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if l, err := o.Claim(cctx, now.Add(time.Second), nil); err != nil || l == nil || l.Record().TaskID != "t2" {
		t.Fatalf("claim while t1's row is locked: %v, %v; want t2's record", l, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := o.Claim(ctx, now.Add(time.Second), nil); err != nil || l == nil || l.Record().TaskID != "t1" || l.Revision() != 3 {
		t.Fatalf("claim after the lock: %v, %v; want t1's record at revision 3", l, err)
	}
}
