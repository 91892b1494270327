package pebblestore

// A store created in directories that do not exist yet survives a crash:
// Open creates them and syncs each new directory's parent (Pebble's Open
// syncs only the parent of the store directory once that exists).

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/internal/pebblelog"
)

func TestGuardNestedDirDurable(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	const dir = "data/a2a/db" // neither data nor data/a2a exists yet
	s, err := Open(dir, Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, task("t1", "c", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err) // acknowledged: synced to the WAL (NoSync is false)
	}
	// Power loss right after the acknowledged Create: only synced file data
	// and synced directory entries survive.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{FS: crashed, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, "t1"); err != nil {
		t.Fatalf("acknowledged Create lost after a crash: %v "+
			"(data and data/a2a were created by lockDir's MkdirAll and their entries never synced)", err)
	}
}
