package pgstore_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
)

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// indexDefs returns the definitions of the indexes on schema.a2a_tasks.
func indexDefs(t testing.TB, conn *pgx.Conn, schema string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		`SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = ($1 || '.a2a_tasks')::regclass ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

// P2: startup creates table and indexes idempotently, also when several
// stores start at once on an empty database.
func TestStartupConcurrentIdempotent(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	for _, schema := range []string{"public", "other schema"} {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema})
				if err == nil {
					s.Close()
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("concurrent startup in %q: %v", schema, err)
			}
		}
		s, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: schema})
		if err != nil {
			t.Fatalf("repeated startup: %v", err)
		}
		s.Close()
		conn := connect(t, dsn)
		var q string // the schema as pg_get_indexdef spells it
		if err := conn.QueryRow(ctx, "SELECT quote_ident($1)", schema).Scan(&q); err != nil {
			t.Fatal(err)
		}
		defs := indexDefs(t, conn, q)
		want := []string{
			`CREATE INDEX idx_a2a_tasks_context_updated ON ` + q + `.a2a_tasks USING btree (context_id, updated_at DESC, id COLLATE "C" DESC)`,
			`CREATE INDEX idx_a2a_tasks_owner_context_updated ON ` + q + `.a2a_tasks USING btree (owner, context_id, updated_at DESC, id COLLATE "C" DESC)`,
			`CREATE INDEX idx_a2a_tasks_owner_state_updated ON ` + q + `.a2a_tasks USING btree (owner, state, updated_at DESC, id COLLATE "C" DESC)`,
			`CREATE INDEX idx_a2a_tasks_owner_updated ON ` + q + `.a2a_tasks USING btree (owner, updated_at DESC, id COLLATE "C" DESC)`,
			`CREATE INDEX idx_a2a_tasks_state_updated ON ` + q + `.a2a_tasks USING btree (state, updated_at DESC, id COLLATE "C" DESC)`,
			`CREATE INDEX idx_a2a_tasks_updated ON ` + q + `.a2a_tasks USING btree (updated_at DESC, id COLLATE "C" DESC)`,
			`CREATE UNIQUE INDEX a2a_tasks_pkey ON ` + q + `.a2a_tasks USING btree (id)`,
		}
		if strings.Join(defs, "\n") != strings.Join(want, "\n") {
			t.Fatalf("indexes in %q:\n%s\nwant:\n%s", schema, strings.Join(defs, "\n"), strings.Join(want, "\n"))
		}
	}
}

// P2, P3: an externally managed schema is checked, not changed. Without the
// ordering indexes startup fails naming the migration; after running the
// shipped migration file it succeeds.
func TestExternalSchemaMigration(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	ext := pgstore.Options{ExternalSchema: true}

	// No table at all.
	_, err := pgstore.Open(ctx, dsn, ext)
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "001_ordering_indexes.sql") {
		t.Fatalf("no table: error = %v", err)
	}

	// A table as an older release made it: every column, no ordering
	// indexes, updated_at defaulting to now().
	if _, err := conn.Exec(ctx, pgstore.TableDDL("public")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE public.a2a_tasks ALTER COLUMN updated_at SET DEFAULT now()`); err != nil {
		t.Fatal(err)
	}
	// Indexes with the right names but wrong definitions do not count.
	if _, err := conn.Exec(ctx, `CREATE INDEX idx_a2a_tasks_updated ON public.a2a_tasks (updated_at, id);
CREATE INDEX idx_a2a_tasks_context_updated ON public.a2a_tasks (context_id, updated_at DESC, id DESC)`); err != nil {
		t.Fatal(err)
	}
	_, err = pgstore.Open(ctx, dsn, ext)
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.MigrationFile) ||
		!strings.Contains(err.Error(), `(updated_at DESC, id COLLATE "C" DESC)`) {
		t.Fatalf("wrong indexes: error = %v", err)
	}
	if _, err := conn.Exec(ctx, `DROP INDEX idx_a2a_tasks_updated, idx_a2a_tasks_context_updated`); err != nil {
		t.Fatal(err)
	}
	// One of two is not enough.
	if _, err := conn.Exec(ctx, `CREATE INDEX other_name ON public.a2a_tasks (updated_at DESC, id COLLATE "C" DESC)`); err != nil {
		t.Fatal(err)
	}
	_, err = pgstore.Open(ctx, dsn, ext)
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "context_id") {
		t.Fatalf("one index: error = %v", err)
	}
	if _, err := conn.Exec(ctx, `DROP INDEX other_name`); err != nil {
		t.Fatal(err)
	}

	// Existing rows keep their updated_at (P2).
	if _, err := conn.Exec(ctx, `INSERT INTO public.a2a_tasks (id, revision, state, updated_at) VALUES ('old', 1, 'TASK_STATE_WORKING', '2001-02-03 04:05:06.789012+00')`); err != nil {
		t.Fatal(err)
	}

	migration, err := os.ReadFile("migrations/001_ordering_indexes.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, string(migration)); err != nil {
		t.Fatalf("migration: %v", err)
	}
	// Running it twice is harmless.
	if _, err := conn.Exec(ctx, string(migration)); err != nil {
		t.Fatalf("migration again: %v", err)
	}
	// The owner column and the counters come with the second file.
	_, err = pgstore.Open(ctx, dsn, ext)
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.OwnerCountsMigrationFile) {
		t.Fatalf("without %s: error = %v", pgstore.OwnerCountsMigrationFile, err)
	}
	runMigration003(t, conn)
	s, err := pgstore.Open(ctx, dsn, ext)
	if err != nil {
		t.Fatalf("after migration: %v", err)
	}
	s.Close()

	// The status indexes (C7) come with 006: without them, or with one of
	// the right name but the wrong definition, or invalid (an interrupted
	// CREATE INDEX CONCURRENTLY), startup names the file.
	execSQL(t, conn, `DROP INDEX idx_a2a_tasks_state_updated`)
	_, err = pgstore.Open(ctx, dsn, ext)
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.StatusIndexesMigrationFile) ||
		!strings.Contains(err.Error(), `(state, updated_at DESC, id COLLATE "C" DESC)`) || strings.Contains(err.Error(), "(owner, state") {
		t.Fatalf("without the state index: error = %v", err)
	}
	execSQL(t, conn, `CREATE INDEX idx_a2a_tasks_state_updated ON public.a2a_tasks (state, updated_at, id)`)
	if _, err = pgstore.Open(ctx, dsn, ext); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.StatusIndexesMigrationFile) {
		t.Fatalf("with a wrong state index: error = %v", err)
	}
	execSQL(t, conn, `DROP INDEX idx_a2a_tasks_state_updated`)
	runMigration006(t, conn)
	runMigration006(t, conn) // twice is harmless
	execSQL(t, conn, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'public.idx_a2a_tasks_owner_state_updated'::regclass`)
	if _, err = pgstore.Open(ctx, dsn, ext); !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), "(owner, state, updated_at DESC") {
		t.Fatalf("with an invalid owner+state index: error = %v", err)
	}
	execSQL(t, conn, `UPDATE pg_index SET indisvalid = true WHERE indexrelid = 'public.idx_a2a_tasks_owner_state_updated'::regclass`)
	s, err = pgstore.Open(ctx, dsn, ext)
	if err != nil {
		t.Fatalf("after migration 006: %v", err)
	}
	defer s.Close()
	r, err := s.Get(ctx, "old")
	if err != nil {
		t.Fatal(err)
	}
	if r.Cursor.UpdatedAt != 981173106789012 {
		t.Fatalf("migrated row's time = %d, want 981173106789012", r.Cursor.UpdatedAt)
	}
	if def := updatedAtDefault(t, conn, "public.a2a_tasks"); def != "clock_timestamp()" {
		t.Fatalf("updated_at default after migration = %q", def)
	}
}

// updatedAtDefault returns the default expression of table's updated_at.
func updatedAtDefault(t testing.TB, conn *pgx.Conn, table string) string {
	t.Helper()
	var def string
	if err := conn.QueryRow(context.Background(), `SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef d
JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
WHERE d.adrelid = $1::regclass AND a.attname = 'updated_at'`, table).Scan(&def); err != nil {
		t.Fatal(err)
	}
	return def
}

// P2: a managed schema installs the clock_timestamp() default also on a
// table an older release created with DEFAULT now(), and keeps its rows'
// times; starting again changes nothing.
func TestManagedSchemaInstallsDefault(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	for _, stmt := range []string{
		`CREATE SCHEMA "old schema"`,
		pgstore.TableDDL("old schema"),
		`ALTER TABLE "old schema".a2a_tasks ALTER COLUMN updated_at SET DEFAULT now()`,
		`INSERT INTO "old schema".a2a_tasks (id, revision, state, updated_at) VALUES ('old', 1, 'TASK_STATE_WORKING', '2001-02-03 04:05:06.789012+00')`,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		s, err := pgstore.Open(ctx, dsn, pgstore.Options{Schema: "old schema"})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(ctx, "old")
		s.Close()
		if err != nil || r.Cursor.UpdatedAt != 981173106789012 {
			t.Fatalf("existing row after a managed start: %+v, %v; want its time 981173106789012 kept", r.Cursor, err)
		}
		if def := updatedAtDefault(t, conn, `"old schema".a2a_tasks`); def != "clock_timestamp()" {
			t.Fatalf("updated_at default after a managed start = %q, want clock_timestamp()", def)
		}
	}
}

// The shipped migration holds exactly P2's statements.
func TestMigrationFileIsP2(t *testing.T) {
	b, err := os.ReadFile("migrations/001_ordering_indexes.sql")
	if err != nil {
		t.Fatal(err)
	}
	const p2 = `ALTER TABLE public.a2a_tasks ALTER COLUMN updated_at SET DEFAULT clock_timestamp();
CREATE INDEX IF NOT EXISTS idx_a2a_tasks_updated
  ON public.a2a_tasks (updated_at DESC, id COLLATE "C" DESC);
CREATE INDEX IF NOT EXISTS idx_a2a_tasks_context_updated
  ON public.a2a_tasks (context_id, updated_at DESC, id COLLATE "C" DESC);
`
	if string(b) != p2 {
		t.Fatalf("migration file differs from P2:\n%s", b)
	}
}
