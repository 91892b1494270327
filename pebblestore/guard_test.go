package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// The releases before the rollback guard are emulated by oldOpen: the
// Pebble options their Open used (commit 732c0ca for format 1; the format-2
// build before the guard used the same), and the format-1 release's
// Creates by writeV1 (which opens the database with oldOpen, whatever it
// holds, and writes with putV1, which TestV1WriterMatchesFixture checks
// against the fixture written by the format-1 code itself).

// oldRefuses checks that a release before the guard cannot open the
// database in dir on fs.
func oldRefuses(t testing.TB, fs vfs.FS, dir, what string) {
	t.Helper()
	db, err := oldOpen(fs, dir)
	if err == nil {
		db.Close()
		t.Errorf("%s: a release before the guard opens the database", what)
		return
	}
	if !strings.Contains(err.Error(), "WALRecoveryDirs") {
		t.Errorf("%s: a release before the guard fails to open it, but not for its log directory: %v", what, err)
	}
}

// upgradeUnguarded upgrades the format-1 database in dir on fs as the
// format-2 build before the guard did: in place, with the log in the store
// directory, so that any older release could still open it.
func upgradeUnguarded(t testing.TB, fs vfs.FS, dir string) {
	t.Helper()
	db, err := oldOpen(fs, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{db: db, logger: pebblelog.Quiet{}}
	if err := s.upgradeFromV1(dir, defaultUpgradeOwnerKey); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// oldTask is a task an older release created through OwnerPolicy for
// owner (in metadata; "" = none).
func oldTask(id, ctx string, at int64, owner string) engine.Record {
	tk := task(id, ctx, a2a.TaskStateWorking)
	if owner != "" {
		tk.Metadata = map[string]any{"a2astore.owner": owner}
	}
	return engine.Record{Task: tk, Revision: 1, Cursor: engine.Cursor{UpdatedAt: at, ID: a2a.TaskID(id)}}
}

// TestRollbackGuard (review of issue 15): a release before format 2 opened
// on a format-2 database wrote format-1 records into it, which this build
// then failed to list or read. Now a database this build opened — a new
// one, or one it upgraded — cannot be opened by such a release at all; and
// a format-2 database last opened without the guard (upgraded by the
// format-2 build before it, then opened by the format-1 release, which
// created tasks) is repaired by Open: the tasks the old release wrote are
// upgraded like the others, with their owners from metadata, before
// anything is served. A refused Open (NoUpgrade) leaves the database to
// the older releases.
func TestRollbackGuard(t *testing.T) {
	ctx := context.Background()
	t.Run("upgraded", func(t *testing.T) {
		dir := copyFixture(t)
		s, err := Open(dir, Options{Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		oldRefuses(t, vfs.Default, dir, "upgraded database")
		s = openStore(t, vfs.Default, dir, nil) // and this build still opens it
		checkOwners(t, s, fixtureOwners)
	})
	t.Run("new", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "db")
		s, err := Open(dir, Options{Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, task("t1", "c", a2a.TaskStateWorking)); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		oldRefuses(t, vfs.Default, dir, "new database")
	})
	t.Run("rolled back before the guard", func(t *testing.T) {
		dir := copyFixture(t)
		upgradeUnguarded(t, vfs.Default, dir)
		writeV1(t, vfs.Default, dir, []engine.Record{ // the format-1 release creates two tasks
			oldTask("created-by-old-release", "ctx-a", 1_800_000_000_000_000, "alice"),
			oldTask("old-unowned", "ctx-b", 1_800_000_000_000_001, "")})
		log := &recordingLogger{}
		s, err := Open(dir, Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		if !log.contains("2 tasks written in format 1 after the upgrade") {
			t.Errorf("no repair in the log: %q", log.lines)
		}
		mustCheck(t, s)
		want := maps2(fixtureOwners)
		want["alice"] = append([]a2a.TaskID{"created-by-old-release"}, want["alice"]...)
		want[""] = append([]a2a.TaskID{"old-unowned"}, want[""]...)
		checkOwners(t, s, want)
		for _, req := range []engine.ListRequest{{}, {ContextID: "ctx-a"}, {Owner: "alice", ContextID: "ctx-a"}} {
			if _, err := s.List(ctx, &req); err != nil {
				t.Errorf("List(%+v): %v", req, err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		oldRefuses(t, vfs.Default, dir, "repaired database")
		log = &recordingLogger{}
		s, err = Open(dir, Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if log.contains("checking it for tasks written in format 1") {
			t.Error("a guarded database was scanned again")
		}
	})
	t.Run("refused", func(t *testing.T) {
		dir := copyFixture(t)
		if _, err := Open(dir, Options{NoUpgrade: true, Logger: pebblelog.Quiet{}}); err == nil {
			t.Fatal("NoUpgrade opened a format-1 database")
		}
		db, err := oldOpen(vfs.Default, dir)
		if err != nil {
			t.Fatalf("after a refused Open, the format-1 release cannot open its database: %v", err)
		}
		db.Close()
	})
}

// TestRepairCrash interrupts the repair of a format-2 database last opened
// without the guard (into which an older release wrote format-1 tasks)
// after each of its batches with a crash. The guard is already in place
// (no older release opens the crashed database) and the next Open finishes
// the repair: the invariants hold and every owner lists exactly its tasks.
func TestRepairCrash(t *testing.T) {
	seed := testSeed(t)
	recs, want := upgradeSet(120, seed)
	rng := rand.New(rand.NewPCG(seed, 6))
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	fs := vfs.NewCrashableMem()
	writeV1(t, fs, "db", recs[:40])
	upgradeUnguarded(t, fs, "db")
	writeV1(t, fs, "db", recs[40:]) // the format-1 release creates the others
	var crashed []*vfs.MemFS
	withUpgradeChunks(t, 16, func() {
		crashed = append(crashed, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(seed, uint64(len(crashed))))}))
	})
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	checkOwners(t, s, want)
	s.Close()
	if len(crashed) != (80+15)/16 {
		t.Fatalf("%d repair batches, want %d", len(crashed), (80+15)/16)
	}
	withUpgradeChunks(t, 16, nil)
	for i, c := range crashed {
		what := fmt.Sprintf("crash after batch %d", i+1)
		oldRefuses(t, c, "db", what)
		s, err := Open("db", Options{FS: c, Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatalf("%s: reopen: %v", what, err)
		}
		mustCheck(t, s)
		checkOwners(t, s, want)
		s.Close()
		if t.Failed() {
			t.Fatal(what)
		}
	}
}

// TestFormat1ValueError: a format-1 value met where format 2 is read (a
// task a release before format 2 wrote in a way the guard cannot see)
// fails with an error that says what it is and what to do; Open with
// Options.RepairFormat1 then upgrades it.
func TestFormat1ValueError(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	b := s.db.NewBatch()
	putV1(t, b, oldTask("v1", "c", 1_800_000_000_000_000, "alice"))
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	b.Close()
	ctx := context.Background()
	_, getErr := s.Get(ctx, "v1")
	_, listErr := s.List(ctx, &engine.ListRequest{})
	for _, err := range []error{getErr, listErr} {
		if !errors.Is(err, engine.ErrInternal) || !strings.Contains(err.Error(), "format-1 value") || !strings.Contains(err.Error(), "RepairFormat1") {
			t.Errorf("%v: want an internal error naming the format-1 value and RepairFormat1", err)
		}
	}
	if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), "format-1 value") {
		t.Errorf("CheckInvariants: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}, RepairFormat1: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustCheck(t, s)
	checkOwners(t, s, map[string][]a2a.TaskID{"alice": {"v1"}})
}
