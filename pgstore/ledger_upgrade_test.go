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
			_, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true})
			if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.CountLedgerMigrationFile) {
				t.Fatalf("external startup on the old counters: %v", err)
			}
			if !managed {
				b, err := os.ReadFile(migration004)
				if err != nil {
					t.Fatal(err)
				}
				execSQL(t, conn, string(b))
			}
			s, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: !managed, CountRollupInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
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
