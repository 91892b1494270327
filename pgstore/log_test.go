package pgstore_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"

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
	if _, err := conn.Exec(ctx, `DROP TABLE a2a_task_deletions`); err != nil {
		t.Fatal(err)
	}
	_, err = pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true, Log: true})
	if !errors.Is(err, pgstore.ErrSchema) || !strings.Contains(err.Error(), pgstore.DeletionsMigrationFile) {
		t.Fatalf("Open with Log on an external schema without the deletions table: %v; want ErrSchema naming %s", err, pgstore.DeletionsMigrationFile)
	}
	migration, err := os.ReadFile(strings.TrimPrefix(pgstore.DeletionsMigrationFile, "pgstore/"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, string(migration)); err != nil {
		t.Fatalf("%s: %v", pgstore.DeletionsMigrationFile, err)
	}
	s, err = pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true, Log: true})
	if err != nil {
		t.Fatalf("Open with Log on an external schema after %s: %v", pgstore.DeletionsMigrationFile, err)
	}
	s.Close()
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
