package pebblestore

// Recovery directories set through Options.Tune (Pebble's way to retire
// a WAL failover secondary) are kept beside the guard's own.

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"

	"github.com/a2astore/a2astore/internal/pebblelog"
)

func TestGuardTuneRecoveryDirsKept(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	withFailover := func(o *pebble.Options) {
		o.WALFailover = &pebble.WALFailoverOptions{Secondary: wal.Dir{FS: fs, Dirname: "secondary"}}
	}
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}, Tune: withFailover})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, task("t1", "c", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Failover retired the way Pebble documents it.
	retired := func(o *pebble.Options) {
		o.WALRecoveryDirs = append(o.WALRecoveryDirs, wal.Dir{FS: fs, Dirname: "secondary"})
	}
	s, err = Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}, Tune: retired})
	if err != nil {
		t.Fatalf("open with the old secondary in WALRecoveryDirs: %v", err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, "t1"); err != nil {
		t.Error(err)
	}
}
