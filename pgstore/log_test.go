package pgstore_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/tasklog"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
)

// TestLogNotify: with Options.LogNotify every logged write NOTIFYs the
// channel in its transaction, and a write that fails notifies nothing.
func TestLogNotify(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{Log: true, LogNotify: "k7_test"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close(ctx)
	if _, err := ln.Exec(ctx, "LISTEN k7_test"); err != nil {
		t.Fatal(err)
	}
	next := func(what string) string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := ln.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification after %s: %v", what, err)
		}
		return n.Payload
	}
	rec, err := s.Create(ctx, task("n1", "c", a2a.TaskStateWorking))
	if err != nil {
		t.Fatal(err)
	}
	if p := next("Create"); p != "en1" {
		t.Fatalf("Create notified %q, want %q", p, "en1")
	}
	// A conflict writes nothing and must notify nothing: the next
	// notification is the Cancel's.
	if _, err := s.Replace(ctx, task("n1", "c", a2a.TaskStateCompleted), rec.Revision+1); !errors.Is(err, engine.ErrRevisionConflict) {
		t.Fatalf("conflicting Replace: %v", err)
	}
	if _, err := s.AppendHistory(ctx, "n1", msg("m1", "hi")); err != nil {
		t.Fatal(err)
	}
	if p := next("AppendHistory"); p != "en1" {
		t.Fatalf("AppendHistory notified %q", p)
	}
	if _, err := s.Cancel(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if p := next("Cancel"); p != "en1" {
		t.Fatalf("Cancel notified %q", p)
	}
	long := a2a.TaskID(strings.Repeat("x", 1024))
	if _, err := s.Create(ctx, task(string(long), "c", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	if p := next("Create of a long ID"); p != "e"+string(long) {
		t.Fatalf("long ID notified %d bytes", len(p))
	}
}

// TestLogExternalSchema: a store with its log on, on an externally managed
// schema without the log table, refuses to start and names the migration.
func TestLogExternalSchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{}) // installs the tables, no log
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true, Log: true})
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.LogMigrationFile) {
		t.Fatalf("Open with Log on an external schema without the log table: %v; want ErrSchema naming %s", err, pgstore.LogMigrationFile)
	}
	s, err = pgstore.Open(ctx, dsn, pgstore.Options{Log: true}) // managed: creates it
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true, Log: true})
	if err != nil {
		t.Fatalf("Open with Log on an external schema with the log table: %v", err)
	}
	s.Close()
	// A schema at 005 without 008: the deletions table is required too,
	// and the shipped file installs it.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	requireMigration(t, conn, dsn, `DROP TABLE a2a_task_deletions`, pgstore.DeletionsMigrationFile)
	// A schema at 008 without 010 (a release before the log's trace,
	// H2): the trace column is required too, and the shipped file adds
	// it; a managed store adds it itself.
	requireMigration(t, conn, dsn, `ALTER TABLE a2a_task_log DROP COLUMN trace`, pgstore.LogTraceMigrationFile)
	if _, err := conn.Exec(ctx, `ALTER TABLE a2a_task_log DROP COLUMN trace`); err != nil {
		t.Fatal(err)
	}
	s, err = pgstore.Open(ctx, dsn, pgstore.Options{Log: true})
	if err != nil {
		t.Fatalf("managed Open of a log table without the trace column: %v", err)
	}
	s.Close()
	s, err = pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true, Log: true})
	if err != nil {
		t.Fatalf("Open with Log on an external schema after a managed Open added the trace column: %v", err)
	}
	s.Close()
	// InspectSchema (a2astore-admin migrate status) tells the column.
	traceMigration := func() pgstore.Migration {
		t.Helper()
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		migs, err := pgstore.InspectSchema(ctx, pool, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range migs {
			if m.File == pgstore.LogTraceMigrationFile {
				return m
			}
		}
		t.Fatalf("InspectSchema lists no %s: %+v", pgstore.LogTraceMigrationFile, migs)
		return pgstore.Migration{}
	}
	if m := traceMigration(); !m.Applied || m.Need != pgstore.NeedLog || !m.Required(true) || m.Required(false) {
		t.Errorf("with the trace column: %+v, want applied, required by a store with the log only", m)
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE a2a_task_log DROP COLUMN trace`); err != nil {
		t.Fatal(err)
	}
	if m := traceMigration(); m.Applied || m.Missing != "column a2a_task_log.trace" {
		t.Errorf("without the trace column: %+v", m)
	}
}

// requireMigration undoes a migration of the log with undo, then checks
// that a store with its log on, on an externally managed schema, refuses
// to start naming file, and starts once file ran (twice: running it again
// is harmless).
func requireMigration(t *testing.T, conn *pgx.Conn, dsn, undo, file string) {
	t.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, undo); err != nil {
		t.Fatal(err)
	}
	_, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true, Log: true})
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), file) {
		t.Fatalf("Open with Log on an external schema after %q: %v; want ErrSchema naming %s", undo, err, file)
	}
	migration, err := os.ReadFile(strings.TrimPrefix(file, "pgstore/"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := conn.Exec(ctx, string(migration)); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true, Log: true})
	if err != nil {
		t.Fatalf("Open with Log on an external schema after %s: %v", file, err)
	}
	s.Close()
}

// TestLogTrace (H2): each logged write (Create, Replace, AppendHistory,
// Cancel) made under a sampled span keeps that span's traceparent with
// its log entry, and ReadLog and Export return it; a write under no span,
// or an unsampled one, stores NULL. A stored value that is no
// traceparent (written by hand, damaged) reads as none, never as a
// parent; Import carries a valid trace and refuses a malformed one,
// writing nothing.
func TestLogTrace(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{Log: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	span := func(sid string, flags trace.TraceFlags) context.Context {
		id, _ := trace.SpanIDFromHex(sid)
		return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: id, TraceFlags: flags}))
	}
	tp := func(sid string) string { return "00-0af7651916cd43dd8448eb211c80319c-" + sid + "-01" }

	rec, err := s.Create(span("0000000000000001", trace.FlagsSampled), task("tr", "c", a2a.TaskStateWorking))
	if err != nil {
		t.Fatal(err)
	}
	if rec, err = s.Replace(span("0000000000000002", 0), task("tr", "c", a2a.TaskStateWorking), rec.Revision); err != nil { // unsampled
		t.Fatal(err)
	}
	if rec, err = s.Replace(ctx, task("tr", "c", a2a.TaskStateWorking), rec.Revision); err != nil { // no span
		t.Fatal(err)
	}
	if _, err = s.AppendHistory(span("0000000000000004", trace.FlagsSampled), "tr", msg("m1", "hi")); err != nil {
		t.Fatal(err)
	}
	if _, err = s.Cancel(span("0000000000000005", trace.FlagsSampled), "tr"); err != nil {
		t.Fatal(err)
	}
	want := []string{tp("0000000000000001"), "", "", tp("0000000000000004"), tp("0000000000000005")}
	traces := func() []string {
		t.Helper()
		log, err := s.ReadLog(ctx, "tr", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range log {
			out = append(out, l.Trace)
		}
		return out
	}
	if got := traces(); !slices.Equal(got, want) {
		t.Fatalf("log traces %q, want %q", got, want)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var nulls int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM a2a_task_log WHERE task_id = 'tr' AND trace IS NULL`).Scan(&nulls); err != nil || nulls != 2 {
		t.Fatalf("%d NULL traces (%v), want 2: no span or an unsampled one stores nothing", nulls, err)
	}
	exported := func() []string {
		t.Helper()
		page, err := s.Export(ctx, nil, 10)
		if err != nil || len(page) != 1 {
			t.Fatalf("Export: %d tasks, %v", len(page), err)
		}
		var out []string
		for _, l := range page[0].Log {
			out = append(out, l.Trace)
		}
		return out
	}
	if got := exported(); !slices.Equal(got, want) {
		t.Fatalf("exported traces %q, want %q", got, want)
	}

	// Values that are no traceparent of ours read as none.
	for i, bad := range []string{
		"garbage",
		strings.ToUpper(tp("0000000000000001")),
		"00-00000000000000000000000000000000-0000000000000001-01",
		tp("0000000000000001") + ",tenant=text-SECRET",
		"01-0af7651916cd43dd8448eb211c80319c-0000000000000001-01",
	} {
		if _, err := conn.Exec(ctx, `UPDATE a2a_task_log SET trace = $1 WHERE task_id = 'tr' AND revision = 1`, bad); err != nil {
			t.Fatal(err)
		}
		if got := traces()[0]; got != "" {
			t.Errorf("%d: stored trace %q read as %q, want none", i, bad, got)
		}
		if got := exported()[0]; got != "" {
			t.Errorf("%d: stored trace %q exported as %q, want none", i, bad, got)
		}
	}

	// Import keeps a valid trace and refuses a malformed one.
	page, err := s.Export(ctx, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pgstore.Open(ctx, pgtest.DSN(t), pgstore.Options{Log: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	bad := slices.Clone(page)
	bad[0].Log = slices.Clone(page[0].Log)
	bad[0].Log[1].Trace = "garbage"
	if err := other.Import(ctx, bad); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("Import of a malformed trace: %v, want ErrInvalidArgument", err)
	}
	if _, err := other.Get(ctx, "tr"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a refused Import wrote the task: %v", err)
	}
	if err := other.Import(ctx, page); err != nil {
		t.Fatal(err)
	}
	log, err := other.ReadLog(ctx, "tr", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range log {
		if l.Trace != page[0].Log[i].Trace {
			t.Errorf("imported entry %d: trace %q, want %q", l.Revision, l.Trace, page[0].Log[i].Trace)
		}
	}
	if log[3].Trace != tp("0000000000000004") {
		t.Errorf("imported entry 4: trace %q", log[3].Trace)
	}
}

// TestTrimmerDatabaseClock: the log retention service trims by the
// database server's clock, which stamps the log, not by the clock of the
// server it runs on. Against a caller clock two days ahead, a task
// written a moment ago keeps its log; against one two days behind, a
// task idle for two hours by the database's clock loses it.
func TestTrimmerDatabaseClock(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{Log: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Create(ctx, task("fresh", "c", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	logOf := func(id a2a.TaskID) int {
		log, err := s.ReadLog(ctx, id, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(log)
	}
	ahead := tasklog.NewTrimmer(s, time.Hour, func() time.Time { return time.Now().Add(48 * time.Hour) }, nil)
	if err := ahead.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if n := logOf("fresh"); n != 1 {
		t.Fatalf("a trimmer whose clock is two days ahead trimmed the log of a task written a moment ago (%d entries left)", n)
	}

	if _, err := s.Create(ctx, task("idle", "c", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE a2a_task_log SET at = at - interval '2 hours' WHERE task_id = 'idle'`,
		`UPDATE a2a_tasks SET updated_at = updated_at - interval '2 hours' WHERE id = 'idle'`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	behind := tasklog.NewTrimmer(s, time.Hour, func() time.Time { return time.Now().Add(-48 * time.Hour) }, nil)
	if err := behind.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if n := logOf("idle"); n != 0 {
		t.Fatalf("a trimmer whose clock is two days behind kept the log of a task idle for two hours (%d entries)", n)
	}
	if n := logOf("fresh"); n != 1 {
		t.Fatalf("the fresh task's log: %d entries, want 1", n)
	}
}
