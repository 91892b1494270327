package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
)

// Ready reports whether the store can serve now, reading no task (SPEC
// H1, a readiness probe): it fails once the store is closed or has failed
// (a fatal Pebble error, see Store), or when the format key cannot be read.
func (s *Store) Ready(ctx context.Context) (err error) {
	exit, err := s.enter("ready")
	if err != nil {
		return err
	}
	defer exit()
	defer s.catch("ready", &err)
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, _, err := s.readFormat(); err != nil {
		return fmt.Errorf("pebblestore: ready: %v: %w", err, engine.ErrInternal)
	}
	return nil
}

// Checkpoint writes a consistent copy of the store, as of one instant,
// into dir, which must not exist (SPEC X1: a backup taken while the store
// serves). Writes go on meanwhile; every write acknowledged before
// Checkpoint was called is in the copy, and the copy holds every key of a
// write batch or none. Files are hard-linked where dir is on the store's
// file system (the copy then costs little space until compactions
// replace the linked files), copied otherwise. The copy opens with Open
// like the store itself: its write-ahead log is moved into dir/wal, where
// the rollback guard keeps it (see the package documentation).
func (s *Store) Checkpoint(dir string) (err error) {
	exit, err := s.enter("checkpoint")
	if err != nil {
		return err
	}
	defer exit()
	defer s.catch("checkpoint", &err)
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		if err == nil {
			return fmt.Errorf("pebblestore: checkpoint: %s already exists: %w", dir, engine.ErrInvalidArgument)
		}
		return fmt.Errorf("pebblestore: checkpoint: %w", err)
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("pebblestore: checkpoint %s: %w", dir, err)
	}
	if err := moveLogs(dir, filepath.Join(dir, "wal")); err != nil {
		return fmt.Errorf("pebblestore: checkpoint %s: %w", dir, err)
	}
	return nil
}

// moveLogs moves the write-ahead log files of the database in dir (Pebble's
// Checkpoint writes them there) into walPath, syncing both directories.
func moveLogs(dir, walPath string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(walPath, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".log") {
			if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(walPath, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syncDir(walPath, vfs.Default); err != nil {
		return err
	}
	return syncDir(dir, vfs.Default)
}
