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
