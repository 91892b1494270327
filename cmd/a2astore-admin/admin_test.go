package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/pgstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// admin runs the command and returns its exit status and output.
func admin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// tree lists every file under dir with its size, to show nothing changed.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", p, err)
			return nil
		}
		info, _ := d.Info()
		fmt.Fprintf(&b, "%s %v %d\n", p, d.IsDir(), info.Size())
		return nil
	})
	return b.String()
}

// seedPebble makes a Pebble store in dir with n tasks.
func seedPebble(t *testing.T, dir string, n int) {
	t.Helper()
	s, err := pebblestore.Open(dir, pebblestore.Options{Log: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seedTasks(t, s, n)
}

func seedTasks(t *testing.T, s engine.Store, n int) {
	t.Helper()
	for i := range n {
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%03d", i)), ContextID: fmt.Sprintf("c%d", i%4),
			Status: a2a.TaskStatus{State: a2a.TaskStateWorking}, Metadata: map[string]any{"i": float64(i)}}
		if _, err := s.Create(t.Context(), task); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBadInput (X1): unknown commands and backends, missing flags, a
// backup target that exists, a restore or copy target that is not empty,
// a copy between a store and itself, or a source that holds no database:
// each exits 2 with a message naming the problem, and the directories
// involved are as they were (none created). TestCopyRefusals has the
// refusals that need a database.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	src, full, empty := filepath.Join(dir, "src"), filepath.Join(dir, "full"), filepath.Join(dir, "empty")
	seedPebble(t, src, 3)
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "keep"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	if err := os.MkdirAll(filepath.Join(dir, "b2.push"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "Usage"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"migrate", "sideways"}, `unknown command "migrate sideways"`},
		{[]string{"check"}, "-backend is required"},
		{[]string{"check", "-backend", "mysql"}, `unknown backend "mysql"`},
		{[]string{"check", "-backend", "mem"}, "nothing to check"},
		{[]string{"check", "-backend", "pebble"}, "-pebble-dir is required"},
		{[]string{"check", "-backend", "pebble", "-pebble-dir", missing}, "no Pebble database in " + missing},
		{[]string{"check", "-backend", "pebble", "-pebble-dir", src, "extra"}, "unexpected arguments"},
		{[]string{"check", "-backend", "pebble", "-no-such-flag"}, "flag provided but not defined"},
		{[]string{"migrate", "status"}, "-pg-dsn is required"},
		{[]string{"migrate", "up", "-pg-dsn", "port=notanumber"}, "-pg-dsn"},
		{[]string{"counts", "rebuild"}, "-pg-dsn is required"},
		{[]string{"backup", "-pebble-dir", src}, "-pebble-dir and -to are required"},
		{[]string{"backup", "-pebble-dir", src, "-to", full}, "already exists"},
		{[]string{"backup", "-pebble-dir", missing, "-to", filepath.Join(dir, "b")}, "no Pebble database"},
		{[]string{"backup", "-pebble-dir", src, "-to", filepath.Join(dir, "b2")}, "b2.push already exists"},
		{[]string{"backup", "-server", "ftp://host"}, "metrics listener's base URL"},
		{[]string{"backup", "-server", "http://127.0.0.1:1", "-to", full}, "-server takes a backup"},
		{[]string{"restore", "-from", src}, "-from and -pebble-dir are required"},
		{[]string{"restore", "-from", src, "-pebble-dir", full}, "is not empty"},
		{[]string{"restore", "-from", empty, "-pebble-dir", missing}, "holds no Pebble database"},
		{[]string{"copy"}, "-from is required"},
		{[]string{"copy", "-from", "mysql", "-to", "pebble", "-to-pebble-dir", missing}, `unknown backend -from "mysql"`},
		{[]string{"copy", "-from", "pebble", "-from-pebble-dir", src, "-to", "sqlite"}, `unknown backend -to "sqlite"`},
		{[]string{"copy", "-from", "mem", "-to", "pebble", "-to-pebble-dir", missing}, "lives in a server's process"},
		{[]string{"copy", "-from", "pebble", "-from-pebble-dir", src}, "-to is required"},
		{[]string{"copy", "-from", "pebble", "-to", "pebble", "-to-pebble-dir", missing}, "-from-pebble-dir is required"},
		{[]string{"copy", "-from", "pg", "-to", "pebble", "-to-pebble-dir", missing}, "-from-pg-dsn is required"},
		{[]string{"copy", "-from", "pebble", "-from-pebble-dir", src, "-to", "pg"}, "-to-pg-dsn is required"},
		{[]string{"copy", "-from", "pebble", "-from-pebble-dir", src, "-to", "pebble", "-to-pebble-dir", src + "/"}, "name the same store"},
		{[]string{"copy", "-from", "pebble", "-from-pebble-dir", src, "-to", "pebble", "-to-pebble-dir", missing, "-batch", "0"}, "-batch 0"},
		{[]string{"copy", "-from", "pebble", "-from-pebble-dir", src, "-to", "pebble", "-to-pebble-dir", full}, "is not empty"},
		{[]string{"copy", "-from", "pebble", "-from-pebble-dir", missing, "-to", "pebble", "-to-pebble-dir", filepath.Join(dir, "new")}, "no Pebble database in " + missing},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			before := tree(t, dir)
			code, out, errOut := admin(t, c.args...)
			if code != exitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit %d and %q", code, errOut, out, exitUsage, c.want)
			}
			if after := tree(t, dir); after != before {
				t.Errorf("bad input changed the directories:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
}

// TestPebbleBackupRestoreCheck (X1): backup of a directory no server
// holds, restore into a new directory, check there: the restored store
// has every task, and check says so (exit 0). A store a server holds
// (locked) is refused with advice. Checked by restoring with the copy's
// files truncated: the restore fails, exits 1 and leaves no directory.
func TestPebbleBackupRestoreCheck(t *testing.T) {
	dir := t.TempDir()
	src, bk, dst := filepath.Join(dir, "src"), filepath.Join(dir, "bk"), filepath.Join(dir, "dst")
	seedPebble(t, src, 25)
	if code, out, errOut := admin(t, "backup", "-pebble-dir", src, "-to", bk); code != exitOK {
		t.Fatalf("backup: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := admin(t, "restore", "-from", bk, "-pebble-dir", dst); code != exitOK || !strings.Contains(out, "tasks 25") {
		t.Fatalf("restore: %d %s %s", code, out, errOut)
	}
	code, out, errOut := admin(t, "check", "-backend", "pebble", "-pebble-dir", dst)
	if code != exitOK || !strings.Contains(out, "ok    invariants") || !strings.Contains(out, "tasks 25") {
		t.Fatalf("check: %d %s %s", code, out, errOut)
	}
	t.Logf("check says:\n%s", out)

	held, err := pebblestore.Open(dst, pebblestore.Options{Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := admin(t, "check", "-backend", "pebble", "-pebble-dir", dst); code != exitUsage || !strings.Contains(errOut, "is a server running on it?") {
		t.Errorf("check of a held store: %d %s", code, errOut)
	}
	held.Close()

	// A damaged backup: every sstable and log emptied.
	bad := filepath.Join(dir, "bad")
	if code, _, errOut := admin(t, "backup", "-pebble-dir", src, "-to", bad); code != exitOK {
		t.Fatal(errOut)
	}
	files, _ := filepath.Glob(filepath.Join(bad, "MANIFEST-*"))
	for _, f := range files {
		if err := os.Truncate(f, 0); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(dir, "target")
	if code, _, errOut := admin(t, "restore", "-from", bad, "-pebble-dir", target); code != exitProblems {
		t.Errorf("restore of a damaged backup: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("a failed restore left %s: %v", target, err)
	}
}

// TestBackupRestoreKeepsOutbox (X1): backup takes the store's push
// outbox (dir.push) beside the store's checkpoint, restore puts it back
// beside the restored store: every configuration with its delivery state
// is there, as is every task. A restore target for the outbox that is not
// empty is refused, changing nothing.
func TestBackupRestoreKeepsOutbox(t *testing.T) {
	dir := t.TempDir()
	src, bk, dst := filepath.Join(dir, "src"), filepath.Join(dir, "bk"), filepath.Join(dir, "dst")
	makeRichPebble(t, src, 40, 3)
	want := dumpPebble(t, src)
	if !strings.Contains(want, "push {") {
		t.Fatal("the source has no push configurations")
	}
	mustAdmin(t, "backup", "-pebble-dir", src, "-to", bk)
	if err := os.MkdirAll(dst+".push", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst+".push", "keep"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := admin(t, "restore", "-from", bk, "-pebble-dir", dst); code != exitUsage || !strings.Contains(errOut, "-push-dir") {
		t.Fatalf("restore over a full outbox directory: %d %s", code, errOut)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left %s: %v", dst, err)
	}
	if err := os.RemoveAll(dst + ".push"); err != nil {
		t.Fatal(err)
	}
	out := mustAdmin(t, "restore", "-from", bk, "-pebble-dir", dst)
	if !strings.Contains(out, "ok    push outbox") {
		t.Fatalf("restore says:\n%s", out)
	}
	sameDump(t, "the restored store", dumpPebble(t, dst), want)
}

// TestPGMigrateCheckCounts (X1): on an empty database migrate status
// reports the missing migrations (exit 1), migrate up applies them, and
// status then reports none missing; check passes on a store with tasks,
// reports counters written around their triggers (exit 1, naming the
// drift), and passes again after counts rebuild; push configurations of
// a task gone longer than the sweep's grace fail check.
func TestPGMigrateCheckCounts(t *testing.T) {
	dsn := pgtest.DSN(t)
	if code, out, _ := admin(t, "migrate", "status", "-pg-dsn", dsn); code != exitProblems || !strings.Contains(out, "missing   "+pgstore.MigrationFile) {
		t.Fatalf("status of an empty database: %d\n%s", code, out)
	}
	if code, out, _ := admin(t, "check", "-backend", "pg", "-pg-dsn", dsn); code != exitProblems || !strings.Contains(out, "FAIL  migration") {
		t.Fatalf("check of an empty database: %d\n%s", code, out)
	}
	if code, out, errOut := admin(t, "migrate", "up", "-pg-dsn", dsn); code != exitOK || strings.Contains(out, "missing") {
		t.Fatalf("migrate up: %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := admin(t, "migrate", "status", "-pg-dsn", dsn); code != exitOK || strings.Contains(out, "missing") {
		t.Fatalf("status after up: %d\n%s", code, out)
	}

	s, err := pgstore.Open(t.Context(), dsn, pgstore.Options{Log: true})
	if err != nil {
		t.Fatal(err)
	}
	seedTasks(t, s, 10)
	s.Close()
	if code, out, errOut := admin(t, "check", "-backend", "pg", "-pg-dsn", dsn); code != exitOK || !strings.Contains(out, "tasks 10") {
		t.Fatalf("check: %d\n%s%s", code, out, errOut)
	}

	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(`SET session_replication_role = replica`) // triggers off: the counters miss this delete
	exec(`DELETE FROM a2a_tasks WHERE id = 't003'`)
	exec(`SET session_replication_role = DEFAULT`)
	code, out, _ := admin(t, "check", "-backend", "pg", "-pg-dsn", dsn)
	if code != exitProblems || !strings.Contains(out, "FAIL  invariants") || !strings.Contains(out, "differ from a recount") {
		t.Fatalf("check with a drift: %d\n%s", code, out)
	}
	t.Logf("check says:\n%s", out)
	if code, out, errOut := admin(t, "counts", "rebuild", "-pg-dsn", dsn); code != exitOK {
		t.Fatalf("counts rebuild: %d\n%s%s", code, out, errOut)
	}
	if code, out, _ := admin(t, "check", "-backend", "pg", "-pg-dsn", dsn); code != exitOK {
		t.Fatalf("check after the rebuild: %d\n%s", code, out)
	}

	exec(`CREATE TABLE a2a_push_configs (task_id text NOT NULL, id text NOT NULL, created_at timestamptz NOT NULL)`)
	exec(`INSERT INTO a2a_push_configs VALUES ('t001', 'live', now() - interval '1 day'), ('gone', 'young', now()), ('gone', 'old', now() - interval '1 day')`)
	if code, out, _ := admin(t, "check", "-backend", "pg", "-pg-dsn", dsn); code != exitProblems || !strings.Contains(out, "push configs: 1 of tasks that are gone") {
		t.Fatalf("check with an old orphan push config: %d\n%s", code, out)
	}
}

// TestMigrateStatusTellsOpen (H1): with each migration that migrate
// status lists undone in turn, status calls the schema ready (exit 0)
// exactly when a store of the kind it judges starts on it as an
// externally managed schema, and marks the migration missing exactly when
// that store refuses to start: by default a store with the task log, as
// every a2astore-server opens (so 005, 008 and 010 are missing, never
// optional); with -log=false one without. check, which opens the store
// with the log when the table is there, fails on the log's migrations
// then.
func TestMigrateStatusTellsOpen(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	logged := map[string]bool{pgstore.LogMigrationFile: true, pgstore.DeletionsMigrationFile: true, pgstore.LogTraceMigrationFile: true}
	for _, c := range []struct{ file, undo string }{
		{pgstore.MigrationFile, `DROP INDEX idx_a2a_tasks_updated`},
		{"pgstore/migrations/002_updated_at_range.sql", `ALTER TABLE a2a_tasks DROP CONSTRAINT a2a_tasks_updated_at_range`},
		{pgstore.CountTriggersMigrationFile, `DROP TRIGGER a2a_task_counts_update ON a2a_tasks`},
		{pgstore.LogMigrationFile, `DROP TABLE a2a_task_log`},
		{pgstore.StatusIndexesMigrationFile, `DROP INDEX idx_a2a_tasks_state_updated`},
		{pgstore.DeletionsMigrationFile, `DROP TABLE a2a_task_deletions`},
		{pgstore.LogTraceMigrationFile, `ALTER TABLE a2a_task_log DROP COLUMN trace`},
	} {
		if code, out, errOut := admin(t, "migrate", "up", "-pg-dsn", dsn); code != exitOK {
			t.Fatalf("migrate up: %d\n%s%s", code, out, errOut)
		}
		if code, out, errOut := admin(t, "migrate", "status", "-pg-dsn", dsn); code != exitOK {
			t.Fatalf("status after up: %d\n%s%s", code, out, errOut)
		}
		if _, err := conn.Exec(ctx, c.undo); err != nil {
			t.Fatal(err)
		}
		for _, log := range []bool{true, false} {
			s, openErr := pgstore.Open(ctx, dsn, pgstore.Options{ExternalSchema: true, Log: log, CountRollupInterval: -1})
			if openErr == nil {
				s.Close()
			}
			args := []string{"migrate", "status", "-pg-dsn", dsn}
			if !log {
				args = append(args, "-log=false")
			}
			code, out, errOut := admin(t, args...)
			var line string
			for l := range strings.Lines(out) {
				if strings.Contains(l, c.file) {
					line = strings.TrimSpace(l)
				}
			}
			switch {
			case (openErr == nil) != (code == exitOK):
				t.Errorf("after %q, a store with Log=%v opens: %v; status (-log=%v) exits %d:\n%s%s", c.undo, log, openErr, log, code, out, errOut)
			case openErr != nil && !strings.HasPrefix(line, "missing "):
				t.Errorf("after %q, a store with Log=%v refuses to start (%v); status (-log=%v) says %q", c.undo, log, openErr, log, line)
			case openErr == nil && strings.HasPrefix(line, "missing "):
				t.Errorf("after %q, a store with Log=%v starts; status (-log=%v) says %q", c.undo, log, log, line)
			case log && logged[c.file] && !strings.Contains(line, "task log"):
				t.Errorf("status says %q: want why (the task log)", line)
			}
		}
		if c.file == pgstore.DeletionsMigrationFile || c.file == pgstore.LogTraceMigrationFile {
			if code, out, _ := admin(t, "check", "-backend", "pg", "-pg-dsn", dsn); code != exitProblems || !strings.Contains(out, "FAIL  migration "+c.file) {
				t.Errorf("check with the log table, after %q: %d\n%s", c.undo, code, out)
			}
		}
	}
}
