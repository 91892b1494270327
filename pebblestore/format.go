package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine"
)

// formatVersion is the database format this build reads and writes
// (keys.go). Format 1 had no format key; upgrade.go reads it.
const formatVersion = 2

var (
	// ErrOldFormat is the error of Open with Options.NoUpgrade on a
	// database of an older format. errors.Is(err, engine.ErrInternal)
	// holds too.
	ErrOldFormat = errors.New("pebblestore: database format older than this build's")
	// ErrNewFormat is the error of Open on a database of a format newer
	// than this build's. errors.Is(err, engine.ErrInternal) holds too.
	ErrNewFormat = errors.New("pebblestore: database format newer than this build's")
)

// openFormat checks the format of the database just opened from dir: it
// writes the current one into a new database and upgrades (or, with
// NoUpgrade, refuses) an older one.
func (s *Store) openFormat(dir string, opts *Options) (err error) {
	defer s.catch("open", &err)
	v, found, err := s.readFormat()
	switch {
	case err != nil:
		return fmt.Errorf("pebblestore: open %s: %v: %w", dir, err, engine.ErrInternal)
	case found && v == formatVersion:
		return nil
	case found && v > formatVersion:
		return fmt.Errorf("pebblestore: open %s: the database has format %d, this build reads format %d: "+
			"open it with the a2astore release that wrote it, or a newer one: %w: %w", dir, v, formatVersion, ErrNewFormat, engine.ErrInternal)
	case found:
		return fmt.Errorf("pebblestore: open %s: unknown database format %d: %w", dir, v, engine.ErrInternal)
	}
	empty, err := s.empty()
	if err != nil {
		return fmt.Errorf("pebblestore: open %s: %v: %w", dir, err, engine.ErrInternal)
	}
	if empty {
		return s.writeFormat(dir)
	}
	if opts.NoUpgrade {
		return fmt.Errorf("pebblestore: open %s: the database has format 1 (written before stores recorded task owners), "+
			"this build reads format %d: open it once without Options.NoUpgrade to upgrade it in place "+
			"(back it up first: releases before format %d cannot read the upgraded database): %w: %w",
			dir, formatVersion, formatVersion, ErrOldFormat, engine.ErrInternal)
	}
	key, err := opts.upgradeOwnerKey()
	if err != nil {
		return err
	}
	return s.upgradeFromV1(dir, key)
}

// readFormat returns the stored format version, if any.
func (s *Store) readFormat() (v uint64, found bool, err error) {
	b, closer, err := s.db.Get(formatKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	v, k := binary.Uvarint(b)
	if k <= 0 || k != len(b) {
		return 0, false, fmt.Errorf("corrupt format key %x", b)
	}
	return v, true, nil
}

// writeFormat records the current format, durably.
func (s *Store) writeFormat(dir string) error {
	if err := s.db.Set(formatKey, binary.AppendUvarint(nil, formatVersion), pebble.Sync); err != nil {
		return fmt.Errorf("pebblestore: open %s: write the format: %v: %w", dir, err, engine.ErrInternal)
	}
	return nil
}

// empty reports whether the database holds no key at all.
func (s *Store) empty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	found := it.First()
	if err := it.Error(); err != nil {
		it.Close()
		return false, err
	}
	return !found, it.Close()
}
