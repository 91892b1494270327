package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Stored times a cursor cannot represent (S5: 0..MaxInt64 µs since the
// epoch), as an external writer may leave them, and the edges that it can.
var (
	outOfRange = map[string]string{
		"pre":  "1969-12-31 23:59:59.999999+00",
		"ninf": "-infinity",
		"inf":  "infinity",
		"late": "294247-01-10 04:00:54.775808+00", // MaxInt64 µs + 1
	}
	inRangeEdges = map[string]string{
		"zero": "1970-01-01 00:00:00+00",
		"top":  "294247-01-10 04:00:54.775807+00", // MaxInt64 µs
	}
)

// insertAt writes tasks with the given updated_at values by raw SQL, as an
// external writer would.
func insertAt(t testing.TB, conn *pgx.Conn, table string, rows map[string]string) error {
	t.Helper()
	for id, at := range rows {
		_, err := conn.Exec(context.Background(), `INSERT INTO `+table+` (id, context_id, revision, state, updated_at)
VALUES ($1, 'c', 1, 'TASK_STATE_WORKING', $2::timestamptz)`, id, at)
		if err != nil {
			return err
		}
	}
	return nil
}

// externalTable creates public.a2a_tasks as an externally managed schema:
// the table from TableDDL, then the shipped migrations 001, 003, 004, 007
// and 006 (not the optional 002, so rows out of the cursor range can be
// written).
func externalTable(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	stmts := []string{pgstore.TableDDL("public")}
	for _, f := range []string{"migrations/001_ordering_indexes.sql", migration003, migration004, migration007, migration009} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, string(b))
	}
	for _, stmt := range stmts {
		if _, err := conn.Exec(context.Background(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	runMigration006(t, conn) // the status indexes, outside a transaction block
}

// S5, T4, L1: rows whose updated_at lies outside what a cursor can
// represent (an external writer's, on an externally managed schema) never
// make a List fail, nor make it hand out a token it then rejects: Lists
// leave them out (totals read from the counters still count them). Get shows them with the cursor clamped into range;
// a mutation moves a row from before 1970 into range, and a row at or
// beyond the maximum is at its maximum: mutations fail with ErrInternal and
// change nothing (S5).
func TestUpdatedAtOutOfRange(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	externalTable(t, conn)
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 4 {
		must(t)(s.Create(ctx, task(fmt.Sprint("t", i), "c", a2a.TaskStateWorking)))
	}
	for _, rows := range []map[string]string{outOfRange, inRangeEdges} {
		if err := insertAt(t, conn, "public.a2a_tasks", rows); err != nil {
			t.Fatal(err)
		}
	}

	want := []a2a.TaskID{"top", "t3", "t2", "t1", "t0", "zero"}
	for _, req := range []engine.ListRequest{
		{PageSize: 1},
		{PageSize: 2, IncludeTotalSize: true},
		{ContextID: "c", PageSize: 1, IncludeTotalSize: true},
		{Status: a2a.TaskStateWorking, PageSize: 3, Projection: engine.ProjectionLight},
		{PageSize: 100, IncludeTotalSize: true},
	} {
		var got []a2a.TaskID
		var last *engine.Cursor
		for page := 0; ; page++ {
			resp, err := s.List(ctx, &req)
			if err != nil {
				t.Fatalf("%+v, page %d: %v", req, page, err)
			}
			// Totals come from the trigger-kept counters, which count
			// every row: the out-of-range rows too, while they exist
			// (startup and CheckInvariants report them as a fault).
			if wantTotal := len(want) + len(outOfRange); req.IncludeTotalSize && resp.TotalSize != wantTotal {
				t.Errorf("%+v: total %d, want %d", req, resp.TotalSize, wantTotal)
			}
			for i, c := range resp.TaskCursors {
				if last != nil && last.Compare(c) >= 0 {
					t.Fatalf("%+v: cursor %+v does not follow %+v", req, c, *last)
				}
				last = &resp.TaskCursors[i]
				got = append(got, c.ID)
			}
			if resp.NextPageToken == "" {
				break
			}
			if _, err := engine.DecodeToken(resp.NextPageToken); err != nil {
				t.Fatalf("%+v: next token %q: %v", req, resp.NextPageToken, err)
			}
			req.PageToken = resp.NextPageToken
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: listed %v, want %v", req, got, want)
		}
	}

	// Get clamps the cursor into range.
	for id, at := range map[a2a.TaskID]int64{"pre": 0, "ninf": 0, "zero": 0, "inf": math.MaxInt64, "late": math.MaxInt64, "top": math.MaxInt64} {
		r, err := s.Get(ctx, id)
		if err != nil || r.Cursor != (engine.Cursor{UpdatedAt: at, ID: id}) {
			t.Errorf("Get(%s) = %+v, %v; want cursor at %d", id, r.Cursor, err, at)
		}
	}

	// At or beyond the maximum: no mutation, nothing changed (S5).
	for _, id := range []a2a.TaskID{"inf", "late", "top"} {
		before := must(t)(s.Get(ctx, id))
		_, err := s.Replace(ctx, task(string(id), "c", a2a.TaskStateCompleted), 0)
		wantErr(t, err, engine.ErrInternal)
		_, err = s.Replace(ctx, task(string(id), "c", a2a.TaskStateCompleted), 1)
		wantErr(t, err, engine.ErrInternal)
		_, err = s.Cancel(ctx, id)
		wantErr(t, err, engine.ErrInternal)
		_, err = s.AppendHistory(ctx, id, msg("m", "x"))
		wantErr(t, err, engine.ErrInternal)
		after := must(t)(s.Get(ctx, id))
		if after.Revision != before.Revision || after.Task.Status.State != a2a.TaskStateWorking || len(after.Task.History) != 0 {
			t.Errorf("%s changed by failed mutations: %+v", id, after)
		}
	}
	// Before 1970: the next mutation moves the task into range, and lists
	// show it from then on.
	r := must(t)(s.Replace(ctx, task("pre", "c", a2a.TaskStateWorking), 0))
	first, err := s.List(ctx, &engine.ListRequest{PageSize: 2})
	if err != nil || r.Cursor.UpdatedAt <= 0 || len(first.Tasks) != 2 || first.Tasks[1].ID != "pre" {
		t.Fatalf("after replacing the 1969 task: %+v; first page %v, %v", r.Cursor, first, err)
	}
	if err := s.Delete(ctx, "ninf"); err != nil {
		t.Fatal(err)
	}

	// Startup names the rows left and the fix, on external and managed
	// schemas alike.
	for _, opts := range []pgstore.Options{{ExternalSchema: true}, {}} {
		_, err := pgstore.Open(ctx, dsn, opts)
		if !errors.Is(err, pgstore.ErrSchema) {
			t.Fatalf("Open %+v with out-of-range rows: %v, want ErrSchema", opts, err)
		}
		for _, part := range []string{`2 rows`, `"inf"`, `"late"`, `UPDATE "public"."a2a_tasks" SET updated_at = clock_timestamp()`} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("Open %+v: %q does not say %s", opts, err, part)
			}
		}
	}
	if _, err := conn.Exec(ctx, `DELETE FROM public.a2a_tasks WHERE id IN ('inf', 'late')`); err != nil {
		t.Fatal(err)
	}
	s2, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true})
	if err != nil {
		t.Fatalf("Open once the rows are gone: %v", err)
	}
	s2.Close()
}

// A managed schema refuses stored times a cursor cannot represent, from
// any writer, with a CHECK constraint; the edges of the range are fine.
func TestManagedSchemaRefusesOutOfRangeTimes(t *testing.T) {
	s, dsn := open(t)
	conn := connect(t, dsn)
	for id, at := range outOfRange {
		err := insertAt(t, conn, "public.a2a_tasks", map[string]string{id: at})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			t.Errorf("insert at %s: %v, want a check violation", at, err)
		}
	}
	if err := insertAt(t, conn, "public.a2a_tasks", inRangeEdges); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// The top row is at its maximum: the constraint is what refuses its
	// next time.
	_, err := s.Replace(context.Background(), task("top", "c", a2a.TaskStateCompleted), 0)
	wantErr(t, err, engine.ErrInternal)
}

// The shipped optional migration for external schemas adds the managed
// schema's constraint, idempotently; then the table refuses such times.
func TestTimeRangeMigration(t *testing.T) {
	b, err := os.ReadFile("migrations/002_updated_at_range.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(b), "\n"+pgstore.TimeRangeDDL("public")+";\n") {
		t.Fatalf("migration file differs from TimeRangeDDL:\n%s\nwant it to end with:\n%s;", b, pgstore.TimeRangeDDL("public"))
	}
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn := connect(t, dsn)
	externalTable(t, conn)
	for range 2 {
		if _, err := conn.Exec(ctx, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	var pgErr *pgconn.PgError
	if err := insertAt(t, conn, "public.a2a_tasks", map[string]string{"inf": "infinity"}); !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Fatalf("insert at infinity after the migration: %v, want a check violation", err)
	}
	if err := insertAt(t, conn, "public.a2a_tasks", inRangeEdges); err != nil {
		t.Fatal(err)
	}
}
