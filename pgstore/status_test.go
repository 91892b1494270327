package pgstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
)

// C7, P2: migration 006 holds, verbatim and in order, the statements the
// managed schema runs for schema public, and the startup check names it.
func TestMigration006HoldsTheManagedStatements(t *testing.T) {
	var want []string // StatusIndexesDDL quotes the schema; the file writes public as quote_ident does
	for _, stmt := range pgstore.StatusIndexesDDL("public") {
		want = append(want, strings.ReplaceAll(stmt, `"public".`, "public."))
	}
	if got := migrationStatements(t, migration006); !slices.Equal(got, want) {
		t.Fatalf("%s holds\n%q\nwant\n%q", migration006, got, want)
	}
	if filepath.Base(pgstore.StatusIndexesMigrationFile) != filepath.Base(migration006) {
		t.Fatalf("StatusIndexesMigrationFile = %q", pgstore.StatusIndexesMigrationFile)
	}
}

// C7: the managed schema builds the status indexes at startup, and builds
// again one left invalid (an interrupted CREATE INDEX CONCURRENTLY), which
// CheckInvariants reports meanwhile.
func TestManagedStatusIndexes(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defs := indexDefs(t, conn, "public")
	for _, name := range []string{"idx_a2a_tasks_state_updated", "idx_a2a_tasks_owner_state_updated"} {
		if !strings.Contains(strings.Join(defs, "\n"), name) {
			t.Fatalf("index %s not built: %v", name, defs)
		}
	}
	checkInvariants(t, s)

	execSQL(t, conn, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'public.idx_a2a_tasks_state_updated'::regclass`)
	if err := s.CheckInvariants(); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "(state, updated_at") {
		t.Fatalf("CheckInvariants with an invalid state index: %v", err)
	}
	s2, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var valid bool
	if err := conn.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'public.idx_a2a_tasks_state_updated'::regclass`).Scan(&valid); err != nil || !valid {
		t.Fatalf("state index after a managed start: valid %v, %v", valid, err)
	}
	checkInvariants(t, s2)
}
