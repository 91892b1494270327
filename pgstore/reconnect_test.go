package pgstore_test

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Issue 20: a pooled connection whose backend was terminated while idle
// does not fail the next read: Get and List (with and without a total)
// run once more on a live connection. The pool never pings here, as it
// would not for a connection idle under a second.
func TestReadAfterIdleBackendTerminated(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	cfg, err := pgstore.PoolConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2 // one for the roll-up's folds, one for the reads
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(ctx, pool, pgstore.Options{CountRollupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must(t)(s.Create(ctx, task("t", "c", a2a.TaskStateWorking)))
	admin := connect(t, dsn)
	for _, read := range []struct {
		name string
		run  func() error
	}{
		{"get", func() error { _, err := s.Get(ctx, "t"); return err }},
		{"list", func() error { _, err := s.List(ctx, &engine.ListRequest{}); return err }},
		{"list with total", func() error {
			resp, err := s.List(ctx, &engine.ListRequest{IncludeTotalSize: true})
			if err == nil && resp.TotalSize != 1 {
				t.Fatalf("total %d", resp.TotalSize)
			}
			return err
		}},
	} {
		t.Run(read.name, func(t *testing.T) {
			// Terminate the backend of every idle pooled connection.
			for _, c := range pool.AcquireAllIdle(ctx) {
				pid := c.Conn().PgConn().PID()
				c.Release()
				var ok bool
				if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok); err != nil || !ok {
					t.Fatalf("terminate %d: %v %v", pid, ok, err)
				}
			}
			if err := read.run(); err != nil {
				t.Fatalf("read after the backend was terminated: %v", err)
			}
		})
	}
}
