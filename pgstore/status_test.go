package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
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

// C7: servers of this release starting at once on the table of the
// previous release (no status indexes), while a writer goes on: one
// builds the indexes CONCURRENTLY, the others start without waiting, none
// fails or deadlocks, writes are not refused, and once all have started
// the indexes are there and valid.
func TestStatusIndexesConcurrentUpgrade(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	w, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 200 {
		must(t)(w.CreateOwned(ctx, task(fmt.Sprint("t", i), "c", a2a.TaskStateWorking), "o"))
	}
	execSQL(t, conn, `DROP INDEX idx_a2a_tasks_state_updated, idx_a2a_tasks_owner_state_updated`)

	stop := make(chan struct{})
	wrote := make(chan error, 1)
	go func() { // a writer throughout
		for i := 0; ; i++ {
			select {
			case <-stop:
				wrote <- nil
				return
			default:
			}
			if _, err := w.CreateOwned(ctx, task(fmt.Sprint("w", i), "c", a2a.TaskStateInputRequired), "o"); err != nil {
				wrote <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.Open(ctx, dsn, pgstore.Options{})
			if err == nil {
				_, err = s.List(ctx, &engine.ListRequest{Owner: "o", Status: a2a.TaskStateInputRequired})
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-wrote; err != nil {
		t.Fatalf("writer during the builds: %v", err)
	}
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent startup: %v", err)
		}
	}
	checkInvariants(t, w)
}
