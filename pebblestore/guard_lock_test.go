package pebblestore

// A failed Open or Close releases the store's reference to the directory
// lock: after a fatal error inside pebble.Open (Pebble drops its own
// reference only), and after a Close whose database Close failed, the
// same process can open the store again.

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/a2astore/a2astore/internal/pebblelog"
)

func TestGuardFatalOpenReleasesLock(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	armed.Store(true)
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, ".log") {
			// ENOENT on the WAL create: Pebble calls Logger.Fatalf (MustExist).
			return &os.PathError{Op: "create", Path: op.Path, Err: os.ErrNotExist}
		}
		return nil
	}))
	if s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}}); err == nil {
		s.Close()
		t.Fatal("the injected fault did not fail Open")
	} else {
		t.Logf("first Open: %v", err)
	}
	armed.Store(false) // the fault is gone (say, the directory was restored)
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatalf("reopen in the same process after the fault cleared: %v (the failed Open kept the directory lock)", err)
	}
	s.Close()
}

func TestGuardCloseErrorReleasesLock(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !armed.Load() || !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			return errorfs.ErrInjected // the WAL's final sync in DB.Close fails
		}
		return nil
	}))
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(context.Background(), task("t1", "c", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if err := s.Close(); err == nil {
		t.Fatal("the injected WAL sync fault did not fail Close")
	} else {
		t.Logf("Close: %v", err)
	}
	armed.Store(false)
	s, err = Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatalf("reopen after a failed Close: %v (Close kept the directory lock)", err)
	}
	defer s.Close()
	if _, err := s.Get(context.Background(), "t1"); err != nil {
		t.Errorf("t1 after reopen: %v", err)
	}
}
