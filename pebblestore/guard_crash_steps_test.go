package pebblestore

// A crash before every mutating
// filesystem operation of the first Open of this build — the lock, the
// unguarded pebble.Open, the format check, A2ASTORE-SCAN-PENDING, the close,
// the guarded pebble.Open, the scan, the marker removal, and the Close —
// for a new directory, a format-1 database and a format-2 database left
// unguarded by the pre-guard build into which the format-1 release wrote.
// Each crash image is taken twice: losing every unsynced write, and keeping
// all of them (process crash). For each image:
//   - if its OPTIONS records the guarded WAL directory, the old release must
//     be refused by the guard;
//   - if the old release opens it, it creates a task in format 1 (as the
//     format-1 release does);
//   - this build's next Open must succeed, the invariants hold, every task
//     (the old release's included) is listed with its owner;
//   - after that Open the old release is refused.
// (TestRepairCrash and TestUpgradeCrash crash after scan batches only.)

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/a2astore/a2astore/internal/pebblelog"
)

func TestGuardCrashAtEveryOp(t *testing.T) {
	seed := testSeed(t)
	scenarios := []struct {
		name  string
		build func(t testing.TB, fs *vfs.MemFS) map[string][]a2a.TaskID
	}{
		{"new directory", func(t testing.TB, fs *vfs.MemFS) map[string][]a2a.TaskID {
			return map[string][]a2a.TaskID{}
		}},
		{"format 1", func(t testing.TB, fs *vfs.MemFS) map[string][]a2a.TaskID {
			recs, want := upgradeSet(40, seed)
			writeV1(t, fs, "db", recs)
			return want
		}},
		{"format 2 unguarded, old release wrote", func(t testing.TB, fs *vfs.MemFS) map[string][]a2a.TaskID {
			recs, want := upgradeSet(40, seed)
			writeV1(t, fs, "db", recs[:20])
			upgradeUnguarded(t, fs, "db")
			writeV1(t, fs, "db", recs[20:])
			return want
		}},
	}
	type image struct {
		what string
		fs   *vfs.MemFS
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			base := vfs.NewCrashableMem()
			want := sc.build(t, base)
			var mu sync.Mutex
			var images []image
			rec := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				what := fmt.Sprintf("crash before op %d (%v %s)", len(images)/2, op.Kind, op.Path)
				images = append(images,
					image{what + ", unsynced writes lost", base.CrashClone(vfs.CrashCloneCfg{})},
					image{what + ", unsynced writes kept", base.CrashClone(vfs.CrashCloneCfg{
						UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(seed, uint64(len(images))))})})
				return nil
			})
			s, err := Open("db", Options{FS: errorfs.Wrap(base, rec), Logger: pebblelog.Quiet{}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			all := images
			images = nil
			mu.Unlock()
			t.Logf("%d crash images", len(all))
			for _, im := range all {
				c := im.fs
				want := maps2(want)
				guarded := false
				if w, _, err := recordedWAL("db", c); err == nil && w == walDir {
					guarded = true
				}
				if db, err := oldOpen(c, "db"); err == nil {
					if guarded {
						t.Errorf("%s: the old release opens a database whose OPTIONS is guarded", im.what)
					}
					b := db.NewBatch()
					putV1(t, b, oldTask("late-old", "ctx-z", 1_900_000_000_000_000, "zed"))
					if err := b.Commit(pebble.Sync); err != nil {
						t.Fatalf("%s: old release write: %v", im.what, err)
					}
					b.Close()
					if err := db.Close(); err != nil {
						t.Fatalf("%s: old release close: %v", im.what, err)
					}
					want["zed"] = append(want["zed"], "late-old")
				} else if guarded && !strings.Contains(err.Error(), "WALRecoveryDirs") {
					t.Errorf("%s: the old release fails, but not on the guard: %v", im.what, err)
				}
				s, err := Open("db", Options{FS: c, Logger: pebblelog.Quiet{}})
				if err != nil {
					t.Fatalf("%s: reopen: %v", im.what, err)
				}
				if err := s.CheckInvariants(); err != nil {
					t.Errorf("%s: invariants: %v", im.what, err)
				}
				checkOwners(t, s, want)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				oldRefuses(t, c, "db", im.what+", after this build's Open")
				if t.Failed() {
					t.Fatal(im.what)
				}
			}
		})
	}
}
