package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/a2astore/a2astore/pushdelivery"
)

// report writes check lines and counts the failed ones.
type report struct {
	out    io.Writer
	failed int
}

func (r *report) ok(format string, args ...any) { fmt.Fprintf(r.out, "ok    "+format+"\n", args...) }
func (r *report) fail(format string, args ...any) {
	r.failed++
	fmt.Fprintf(r.out, "FAIL  "+format+"\n", args...)
}

// err is the check's outcome: nil, or how many checks failed.
func (r *report) err() error {
	if r.failed == 0 {
		return nil
	}
	return fmt.Errorf("%d check(s) failed", r.failed)
}

// hasPebble reports whether dir holds a Pebble database (a MANIFEST).
func hasPebble(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	return len(m) > 0
}

// openPebble opens the existing store in dir, refusing to create one or to
// upgrade an old format (the server does that).
func openPebble(dir string) (*pebblestore.Store, error) {
	if dir == "" {
		return nil, usagef("-pebble-dir is required")
	}
	if !hasPebble(dir) {
		return nil, usagef("no Pebble database in %s", dir)
	}
	s, err := pebblestore.Open(dir, pebblestore.Options{Log: true, NoUpgrade: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		if errors.Is(err, pebblestore.ErrLocked) {
			return nil, usagef("%v (is a server running on it? back it up with backup -server and work on the backup)", err)
		}
		return nil, err
	}
	return s, nil
}

// pgPool connects to dsn (-pg-dsn).
func pgPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	if dsn == "" {
		return nil, usagef("-pg-dsn is required")
	}
	cfg, err := pgstore.PoolConfig(dsn)
	if err != nil {
		return nil, usagef("-pg-dsn: %v", err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// openPG opens the store on pool without changing the schema, with the log
// when the schema has its table, and no roll-up; it fails when a migration
// that store requires is missing (with the log: the log's 008 and 010 too).
func openPG(ctx context.Context, pool *pgxpool.Pool, schema string) (*pgstore.Store, []pgstore.Migration, error) {
	migs, err := pgstore.InspectSchema(ctx, pool, schema)
	if err != nil {
		return nil, nil, err
	}
	log := logApplied(migs)
	for _, m := range migs {
		if !m.Applied && m.Required(log) {
			return nil, migs, fmt.Errorf("schema %s lacks %s (%s): run migrate up", schema, m.File, m.Missing)
		}
	}
	s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: schema, ExternalSchema: true,
		Log: log, CountRollupInterval: -1})
	return s, migs, err
}

// migrationState is what status and check say of m for a store with the
// task log (log) or without (SPEC H1): "applied"; "missing" when that
// store refuses to start without it (pgstore.Migration.Required); else
// "optional" when no store needs it, or "not used" when only a store with
// the log does. why is what the catalog lacks, and why it matters.
func migrationState(m pgstore.Migration, log bool) (state, why string) {
	switch {
	case m.Applied:
		return "applied", ""
	case m.Required(log) && m.Need == pgstore.NeedLog:
		return "missing", m.Missing + " (needed with the task log, which every a2astore-server keeps)"
	case m.Required(log):
		return "missing", m.Missing
	case m.Need == pgstore.NeedLog:
		return "not used", m.Missing + " (needed only with the task log; every a2astore-server keeps it)"
	default:
		return "optional", m.Missing + " (no store needs it; a store that manages its schema adds it)"
	}
}

// taskCount is the store's number of tasks.
func taskCount(ctx context.Context, s engine.Store) (int, error) {
	resp, err := s.List(ctx, &engine.ListRequest{PageSize: 1, IncludeTotalSize: true})
	if err != nil {
		return 0, err
	}
	return resp.TotalSize, nil
}

// pushOrphanAge is how old a push configuration of a task that is gone
// may be before check reports it: a2astore-server sweeps those older than
// 10 minutes every minute.
const pushOrphanAge = 15 * time.Minute

func runCheck(ctx context.Context, o *options, out io.Writer) error {
	r := &report{out: out}
	switch o.backend {
	case "pebble":
		s, err := openPebble(o.pebbleDir)
		if err != nil {
			return err
		}
		defer s.Close()
		fmt.Fprintf(out, "pebble %s\n", o.pebbleDir)
		checkStore(ctx, r, s, "keyspace: one record, body and index keys per task, counters against a recount, task log against its tasks")
	case "pg":
		pool, err := pgPool(ctx, o.pgDSN)
		if err != nil {
			return err
		}
		defer pool.Close()
		fmt.Fprintf(out, "pg schema %s\n", o.pgSchema)
		s, migs, err := openPG(ctx, pool, o.pgSchema)
		for _, m := range migs {
			switch state, why := migrationState(m, logApplied(migs)); state {
			case "applied":
				r.ok("migration %s", m.File)
			case "missing":
				r.fail("migration %s: %s", m.File, why)
			default:
				fmt.Fprintf(out, "-     migration %s not applied, %s: %s\n", m.File, state, why)
			}
		}
		if err != nil {
			if r.failed > 0 {
				return r.err()
			}
			return err
		}
		defer s.Close()
		checkStore(ctx, r, s, "rows, ordering indexes, counters against a recount, task log against its tasks")
		if err := checkPushOrphans(ctx, r, pool, o.pgSchema); err != nil {
			return err
		}
	case "":
		return usagef("-backend is required (pebble or pg)")
	case "mem":
		return usagef("backend mem lives in a server's process: nothing to check from outside")
	default:
		return usagef("unknown backend %q (want pebble or pg)", o.backend)
	}
	return r.err()
}

// checkStore runs the store's CheckInvariants and counts its tasks.
func checkStore(ctx context.Context, r *report, s engine.Checker, what string) {
	if err := s.CheckInvariants(); err != nil {
		r.fail("invariants (%s): %v", what, err)
	} else {
		r.ok("invariants (%s)", what)
	}
	if es, ok := s.(engine.Store); ok {
		if n, err := taskCount(ctx, es); err != nil {
			r.fail("count tasks: %v", err)
		} else {
			fmt.Fprintf(r.out, "tasks %d\n", n)
		}
	}
}

// checkPushOrphans reports push configurations whose task is gone and that
// a sweep should have removed.
func checkPushOrphans(ctx context.Context, r *report, pool *pgxpool.Pool, schema string) error {
	push := pgx.Identifier{schema, "a2a_push_configs"}.Sanitize()
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, push).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		fmt.Fprintln(r.out, "-     push configs: no table (no server with -push ran here)")
		return nil
	}
	var young, old int64
	err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE p.created_at >= now() - $1::interval), count(*) FILTER (WHERE p.created_at < now() - $1::interval)
FROM `+push+` p WHERE NOT EXISTS (SELECT 1 FROM `+pgx.Identifier{schema, "a2a_tasks"}.Sanitize()+` t WHERE t.id = p.task_id)`,
		pushOrphanAge.String()).Scan(&young, &old)
	if err != nil {
		return err
	}
	if old > 0 {
		r.fail("push configs: %d of tasks that are gone, older than %v (no server sweeps them: run a2astore-server with -push on this database)", old, pushOrphanAge)
	} else {
		r.ok("push configs: none of a task gone for longer than %v (%d younger, left to the sweep)", pushOrphanAge, young)
	}
	return nil
}

// printMigrations writes a line per migration (migrationState) for a
// store with the task log (log) or without, and counts those missing.
func printMigrations(out io.Writer, migs []pgstore.Migration, log bool) (missing int) {
	for _, m := range migs {
		state, why := migrationState(m, log)
		if state == "applied" {
			fmt.Fprintf(out, "applied   %s\n", m.File)
			continue
		}
		if state == "missing" {
			missing++
		}
		fmt.Fprintf(out, "%-9s %s: %s\n", state, m.File, why)
	}
	return missing
}

func runMigrateStatus(ctx context.Context, o *options, out io.Writer) error {
	pool, err := pgPool(ctx, o.pgDSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	migs, err := pgstore.InspectSchema(ctx, pool, o.pgSchema)
	if err != nil {
		return err
	}
	if n := printMigrations(out, migs, o.log); n > 0 {
		store := "a store with the task log (every a2astore-server)"
		if !o.log {
			store = "a store without the task log"
		}
		return fmt.Errorf("%d migration(s) missing that %s requires: run migrate up, or the files", n, store)
	}
	return nil
}

func runMigrateUp(ctx context.Context, o *options, out io.Writer) error {
	pool, err := pgPool(ctx, o.pgDSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	s, err := pgstore.New(ctx, pool, pgstore.Options{Schema: o.pgSchema, Log: o.log, CountRollupInterval: -1})
	if err != nil {
		return err
	}
	_ = s.Close()
	migs, err := pgstore.InspectSchema(ctx, pool, o.pgSchema)
	if err != nil {
		return err
	}
	printMigrations(out, migs, o.log)
	return nil
}

func runCountsRebuild(ctx context.Context, o *options, out io.Writer) error {
	pool, err := pgPool(ctx, o.pgDSN)
	if err != nil {
		return err
	}
	defer pool.Close()
	s, _, err := openPG(ctx, pool, o.pgSchema)
	if err != nil {
		return err
	}
	defer s.Close()
	start := time.Now()
	if err := s.RebuildCounts(ctx); err != nil {
		return err
	}
	drift, err := s.CountDrifts(ctx, 10)
	if err != nil {
		return err
	}
	if len(drift) > 0 {
		return fmt.Errorf("counters still differ from a recount after the rebuild: %v", drift)
	}
	fmt.Fprintf(out, "rebuilt the task counters in %v; they equal a recount\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// emptyOrMissing fails unless dir is missing or an empty directory.
func emptyOrMissing(dir, what string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return usagef("%s %s: %v", what, dir, err)
	case len(entries) > 0:
		return usagef("%s %s is not empty", what, dir)
	}
	return nil
}

func runBackup(ctx context.Context, o *options, out io.Writer) error {
	switch {
	case o.server != "" && (o.pebbleDir != "" || o.to != ""):
		return usagef("-server takes a backup under the server's -backup-dir: give -name, not -pebble-dir or -to")
	case o.server != "":
		return backupServer(ctx, o, out)
	case o.pebbleDir == "" || o.to == "":
		return usagef("-pebble-dir and -to are required (or -server)")
	}
	for _, dir := range []string{o.to, outboxBackup(o.to)} {
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			return usagef("-to: %s already exists", dir)
		}
	}
	s, err := openPebble(o.pebbleDir)
	if err != nil {
		return err
	}
	defer s.Close()
	start := time.Now()
	pushDir := o.pushDir
	if pushDir == "" {
		pushDir = filepath.Clean(o.pebbleDir) + ".push"
	}
	if hasPebble(pushDir) { // first: Delivered never above its task's revision (Local.Checkpoint)
		ob, err := pushdelivery.OpenPebble(pushDir, s, pushdelivery.LocalOptions{Logger: pebblelog.Quiet{}})
		if err != nil {
			return fmt.Errorf("push outbox: %w", err)
		}
		err = ob.Checkpoint(outboxBackup(o.to))
		_ = ob.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "backup of the push outbox %s in %s\n", pushDir, outboxBackup(o.to))
	}
	if err := s.Checkpoint(o.to); err != nil {
		return err
	}
	fmt.Fprintf(out, "backup of %s in %s (%v)\n", o.pebbleDir, o.to, time.Since(start).Round(time.Millisecond))
	return nil
}

// outboxBackup is where the backup in dir keeps its push outbox: beside
// it, as a2astore-server keeps the outbox beside the store.
func outboxBackup(dir string) string { return filepath.Clean(dir) + ".push" }

func runRestore(ctx context.Context, o *options, out io.Writer) error {
	if o.from == "" || o.pebbleDir == "" {
		return usagef("-from and -pebble-dir are required")
	}
	if !hasPebble(o.from) {
		return usagef("-from %s holds no Pebble database", o.from)
	}
	if err := emptyOrMissing(o.pebbleDir, "-pebble-dir"); err != nil {
		return err
	}
	if err := wholeManifests(o.from); err != nil {
		return err
	}
	dirs := map[string]string{o.from: o.pebbleDir} // backup → restored
	if pushFrom := outboxBackup(o.from); hasPebble(pushFrom) {
		pushTo := o.pushDir
		if pushTo == "" {
			pushTo = filepath.Clean(o.pebbleDir) + ".push"
		}
		if err := emptyOrMissing(pushTo, "-push-dir"); err != nil {
			return err
		}
		dirs[pushFrom] = pushTo
	}
	var undos []func()
	undo := func() {
		for _, u := range undos {
			u()
		}
	}
	for from, to := range dirs {
		undos = append(undos, undoer(to))
		if err := copyTree(from, to); err != nil {
			undo()
			return fmt.Errorf("copy: %w", err)
		}
	}
	if err := tablesNamed(o.from, o.pebbleDir); err != nil {
		undo()
		return err
	}
	s, err := openPebble(o.pebbleDir)
	if err != nil {
		undo()
		return fmt.Errorf("the restored store does not open (removed): %w", err)
	}
	r := &report{out: out}
	checkStore(ctx, r, s, "keyspace, counters, task log")
	if pushTo, ok := dirs[outboxBackup(o.from)]; ok {
		if ob, err := pushdelivery.OpenPebble(pushTo, s, pushdelivery.LocalOptions{Logger: pebblelog.Quiet{}}); err != nil {
			r.fail("push outbox %s: %v", pushTo, err)
		} else {
			_ = ob.Close()
			r.ok("push outbox %s: every record reads", pushTo)
		}
	}
	_ = s.Close()
	if err := r.err(); err != nil {
		undo()
		return fmt.Errorf("the restored store fails its check (removed): %w", err)
	}
	for from, to := range dirs {
		fmt.Fprintf(out, "restored %s into %s\n", from, to)
	}
	return nil
}

// wholeManifests fails unless every MANIFEST in the backup dir (and its
// push outbox's) reads to its end. Pebble's Open takes a MANIFEST that
// ends in a corrupt record for one torn by a crash and drops that record:
// the tables it added are lost, and a store restored from such a backup
// opened empty and passed its check. A backup is a checkpoint, written
// and synced whole: any corrupt record in it is damage.
func wholeManifests(dir string) error {
	for _, d := range []string{dir, outboxBackup(dir)} {
		files, _ := filepath.Glob(filepath.Join(d, "MANIFEST-*"))
		for _, f := range files {
			if err := readRecords(f); err != nil {
				return usagef("-from %s: %s is corrupt (%v): the backup is damaged; nothing was restored", dir, f, err)
			}
		}
	}
	return nil
}

// tablesNamed fails unless every table of the backup in from, restored
// into to, is one its MANIFEST names (pebblestore.LiveTables, read-only):
// a checkpoint holds exactly those. A MANIFEST that lost its last records
// whole reads cleanly (wholeManifests cannot tell), and Pebble opened it
// as a version without the tables they added: an empty store that passed
// its check, or a log replayed over the tables that a compaction then
// panicked on.
func tablesNamed(from, to string) error {
	live, err := pebblestore.LiveTables(to, pebblelog.Quiet{})
	if err != nil {
		return fmt.Errorf("the restored store does not open (removed): %w", err)
	}
	named := make(map[string]bool, len(live))
	for _, t := range live {
		named[t] = true
	}
	tables, _ := filepath.Glob(filepath.Join(from, "*.sst"))
	for _, t := range tables {
		if !named[filepath.Base(t)] {
			return usagef("-from %s: table %s is not in the backup's MANIFEST, which lost records: the backup is damaged; nothing was restored", from, filepath.Base(t))
		}
	}
	return nil
}

// readRecords reads every record of the Pebble record file name.
func readRecords(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	rr := record.NewReader(f, 0)
	for {
		r, err := rr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
	}
}

// undoer returns what removes a restore's copy into dir: dir itself when
// it did not exist, else what was put in it (it was empty).
func undoer(dir string) func() {
	_, err := os.Stat(dir)
	created := errors.Is(err, fs.ErrNotExist)
	return func() {
		if created {
			_ = os.RemoveAll(dir)
			return
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// copyTree copies the regular files and directories under src into dst
// (created if missing), syncing each file and directory.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return nil
		case d.Name() == "LOCK":
			return nil // Pebble's lock file: the restored store takes its own
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file", p)
		}
		return copyFile(p, target)
	})
}

func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	outf, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := outf.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := io.Copy(outf, in); err != nil {
		return err
	}
	return outf.Sync()
}

// backupServer asks a running a2astore-server for a checkpoint under its
// -backup-dir (POST /backup on its metrics listener).
func backupServer(ctx context.Context, o *options, out io.Writer) error {
	u, err := url.Parse(o.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("-server %q: want the metrics listener's base URL, like http://127.0.0.1:9464", o.server)
	}
	u = u.JoinPath("backup")
	if o.name != "" {
		u.RawQuery = url.Values{"name": {o.name}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusCreated:
		var got struct{ Path string }
		if err := json.Unmarshal(body, &got); err != nil {
			return fmt.Errorf("server answer %q: %w", body, err)
		}
		fmt.Fprintf(out, "backup in %s (on the server's machine)\n", got.Path)
		return nil
	case http.StatusBadRequest, http.StatusConflict:
		return usagef("server: %s", strings.TrimSpace(string(body)))
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return usagef("server %s takes no backups: start it with -backend pebble and -backup-dir", o.server)
	}
	return fmt.Errorf("server: %s: %s", resp.Status, strings.TrimSpace(string(body)))
}
