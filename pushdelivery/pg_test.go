package pushdelivery_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/a2astore/a2astore/pushdelivery"
	"github.com/a2astore/a2astore/pushdelivery/outboxtest"
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

// finishedClaim makes task t1, completes it, saves config c on it and
// claims it at now: a lease at the task's terminal revision, returned.
func finishedClaim(t *testing.T, o *pushdelivery.PG, s *pgstore.Store, now time.Time) pushdelivery.Lease {
	t.Helper()
	ctx := context.Background()
	newTask(t, s, "t1")
	if _, err := s.Replace(ctx, &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := o.Save(ctx, &pushdelivery.Record{TaskID: "t1", Config: a2a.PushConfig{ID: "c"}, NextAt: now}); err != nil {
		t.Fatal(err)
	}
	l, err := o.Claim(ctx, now, nil)
	if err != nil || l == nil || l.Revision() != 2 {
		t.Fatalf("claim: %v, %v; want a lease at revision 2", l, err)
	}
	return l
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
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	pool := newPool(t, dsn, "commit-done")
	now := time.Now()
	o, s := openPG(t, pool, schema, time.Now)
	l := finishedClaim(t, o, s, now)
	foreignWrite(t, pool, schema)
	commitDone(t, l, now)
	if l, err := o.Claim(context.Background(), now, nil); err != nil || l == nil || l.Revision() != 3 {
		t.Fatalf("claim after a write the commit did not see: %v, %v; want a lease at revision 3", l, err)
	}
}

// TestPGCommitDuringWriteReopenedByRescan: a commit that sets Done while a
// write to the task is in flight does not see it, and the record is Done
// behind the task; with no Touch of the task, the next rescan reopens it.
func TestPGCommitDuringWriteReopenedByRescan(t *testing.T) {
	dsn := pgtest.DSN(t)
	schema := pgtest.Schema(t, dsn)
	ctx := context.Background()
	pool := newPool(t, dsn, "commit-done")
	now := time.Now()
	o, s := openPG(t, pool, schema, time.Now)
	l := finishedClaim(t, o, s, now)
	tx, err := newPool(t, dsn, "writer").Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	foreignWrite(t, tx, schema)
	commitDone(t, l, now)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := o.Get(ctx, "t1", "c"); err != nil || !r.Done {
		t.Fatalf("record %+v, %v; want Done (the commit did not see the write)", r, err)
	}
	if l, err := o.Claim(ctx, now.Add(outboxtest.Rescan-time.Second), nil); l != nil || err != nil {
		t.Fatalf("claimed before the rescan, untouched: %v, %v", l, err)
	}
	if l, err := o.Claim(ctx, now.Add(outboxtest.Rescan), nil); err != nil || l == nil || l.Revision() != 3 {
		t.Fatalf("claim at the rescan: %v, %v; want a lease at revision 3", l, err)
	}
}
