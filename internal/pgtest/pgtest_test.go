package pgtest_test

import (
	"context"
	"testing"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Each DSN is its own database: a table made through one is invisible
// through the other.
func TestDSNIsolated(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.DSN(t), pgtest.DSN(t)
	if a == b {
		t.Fatalf("two DSN calls returned the same database: %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("table created in one test database is visible in another")
	}
	var fsync string
	if err := ca.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	t.Logf("fsync=%s", fsync)
}

func BenchmarkDSN(b *testing.B) {
	for b.Loop() {
		pgtest.DSN(b)
	}
}

// A standby of the replicated cluster has the primary's writes once it
// has replayed them, keeps its old data while its replay is paused, and
// comes back after it was killed.
func TestReplicated(t *testing.T) {
	ctx := context.Background()
	r := pgtest.Replicated(t)
	p, standbys := r.DSN(t)
	if len(standbys) != pgtest.Standbys {
		t.Fatalf("%d standby DSNs, want %d", len(standbys), pgtest.Standbys)
	}
	exec := func(dsn, sql string) {
		t.Helper()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	count := func(dsn string) int {
		t.Helper()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec(p, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)")
	r.WaitReplayed(t)
	for i, s := range standbys {
		if n := count(s); n != 1 {
			t.Fatalf("standby %d: %d rows, want 1", i, n)
		}
	}
	r.Standby(0).PauseReplay(t)
	r.Standby(1).Kill(t)
	exec(p, "INSERT INTO t VALUES (2)")
	r.WaitReplayed(t) // skips the paused and the killed standby
	if n := count(standbys[0]); n != 1 {
		t.Fatalf("paused standby: %d rows, want 1", n)
	}
	r.Standby(1).Start(t)
	r.Standby(0).ResumeReplay(t)
	r.WaitReplayed(t)
	for i, s := range standbys {
		if n := count(s); n != 2 {
			t.Fatalf("standby %d after resume/restart: %d rows, want 2", i, n)
		}
	}
}
