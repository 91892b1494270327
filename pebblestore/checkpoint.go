package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"

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
// replace the linked files), copied otherwise; the write-ahead log is
// copied after a flush of what was written to it. The copy opens with
// Open like the store itself (Pebble replays the log Checkpoint left in
// dir, and moves it into wal/).
func (s *Store) Checkpoint(dir string) (err error) {
	exit, err := s.enter("checkpoint")
	if err != nil {
		return err
	}
	defer exit()
	defer s.catch("checkpoint", &err)
	if _, err := s.fs.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		if err == nil {
			return fmt.Errorf("pebblestore: checkpoint: %s already exists: %w", dir, engine.ErrInvalidArgument)
		}
		return fmt.Errorf("pebblestore: checkpoint: %w", err)
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("pebblestore: checkpoint %s: %w", dir, err)
	}
	return nil
}
