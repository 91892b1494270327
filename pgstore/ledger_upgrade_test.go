package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
)

// Issue 20: a database of the previous release — counters kept by the
// upsert triggers of migration 003, with counted tasks — upgrades. An
// external schema is refused at startup, naming migration 004, until it
// runs it; a managed store installs the ledger at startup. Either way
// every total stays exact, and the old triggers are gone.
func TestLedgerUpgradesOldCounters(t *testing.T) {
	ctx := context.Background()
	for _, managed := range []bool{false, true} {
		t.Run(fmt.Sprint("managed=", managed), func(t *testing.T) {
			dsn := pgtest.DSN(t)
			conn := connect(t, dsn)
			execSQL(t, conn, pgstore.TableDDL("public"))
			for _, f := range []string{"migrations/001_ordering_indexes.sql", migration003} {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				execSQL(t, conn, string(b))
			}
			// Written under the old triggers: counted in a2a_task_counts directly.
			execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner)
SELECT 'old' || i, 'c' || (i % 3), 1, 'TASK_STATE_WORKING', 'o' || (i % 2) FROM generate_series(1, 50) i`)
			execSQL(t, conn, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE id LIKE 'old1%'`)
			s := upgradeCounts(t, dsn, conn, managed)
			checkShapes(t, s, conn)
			checkTotal(t, s, engine.ListRequest{Status: a2a.TaskStateCompleted}, 11)
			// New writes go to the ledger, on top of the old base.
			must(t)(s.CreateOwned(ctx, task("new", "c1", a2a.TaskStateWorking), "o1"))
			execSQL(t, conn, `DELETE FROM a2a_tasks WHERE id = 'old2'`)
			if ledgerRows(t, conn) != 2 {
				t.Fatalf("ledger rows %d, want 2", ledgerRows(t, conn))
			}
			checkShapes(t, s, conn)
			fold(t, s)
			checkShapes(t, s, conn)
		})
	}
}

// Issue 31: a database whose counters an earlier release kept in 16
// shards per (kind, name, state), with deltas of several shards still
// pending, upgrades to one shard. An external schema is refused at
// startup, naming migration 004, until it runs it again; a managed store
// reinstalls the functions at startup. Either way the base is recounted
// into shard 0, totals stay exact and the drift check finds nothing.
func TestCountsUpgradeToOneShard(t *testing.T) {
	ctx := context.Background()
	for _, managed := range []bool{false, true} {
		t.Run(fmt.Sprint("managed=", managed), func(t *testing.T) {
			dsn := pgtest.DSN(t)
			old := openNoRollup(t, dsn)
			conn := connect(t, dsn)
			for _, stmt := range pgstore.CountFunctionsSQL(16) {
				execSQL(t, conn, stmt)
			}
			execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner)
SELECT 'old' || i, 'c' || (i % 3), 1, 'TASK_STATE_WORKING', 'o' || (i % 2) FROM generate_series(1, 80) i`)
			execSQL(t, conn, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE id LIKE 'old1%'`)
			var shards, pending int
			if err := conn.QueryRow(ctx, `SELECT (SELECT count(DISTINCT shard) FROM a2a_task_counts),
	(SELECT count(DISTINCT shard) FROM (SELECT shard FROM a2a_task_count_deltas UNION ALL SELECT shard FROM a2a_task_count_moves) AS l)`).Scan(&shards, &pending); err != nil {
				t.Fatal(err)
			}
			if shards < 2 || pending < 2 {
				t.Fatalf("the old release's counters: %d shards in the base, %d pending; want several of each", shards, pending)
			}
			old.Close()
			s := upgradeCounts(t, dsn, conn, managed)
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM a2a_task_counts WHERE shard <> 0`).Scan(&shards); err != nil {
				t.Fatal(err)
			}
			if shards != 0 {
				t.Fatalf("%d base rows outside shard 0 after the upgrade", shards)
			}
			checkShapes(t, s, conn)
			checkTotal(t, s, engine.ListRequest{Status: a2a.TaskStateCompleted}, 11)
			must(t)(s.Replace(ctx, task("old2", "c2", a2a.TaskStateCompleted), 0))
			fold(t, s)
			checkShapes(t, s, conn)
			checkTotal(t, s, engine.ListRequest{Status: a2a.TaskStateCompleted}, 12)
		})
	}
}

// upgradeCounts checks that an external schema's startup on the counters
// of an earlier release fails, naming migration 009, then upgrades: by
// running 009 and opening the external schema, or (managed) by opening
// the store. The store returned folds only when asked; t closes it.
func upgradeCounts(t *testing.T, dsn string, conn *pgx.Conn, managed bool) *pgstore.Store {
	t.Helper()
	ctx := context.Background()
	_, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true})
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.CountTriggersMigrationFile) {
		t.Fatalf("external startup on the counters of an earlier release: %v", err)
	}
	if !managed {
		b, err := os.ReadFile(migration009)
		if err != nil {
			t.Fatal(err)
		}
		execSQL(t, conn, string(b))
		runMigration006(t, conn) // the status indexes, also missing from an earlier release
	}
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: !managed, CountRollupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
