package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine"
)

// formatVersion is the database format this build reads and writes
// (keys.go). Format 1 had no format key, format 2 no status indexes;
// upgrade.go reads both.
const formatVersion = 3

var (
	// ErrOldFormat is the error of Open with Options.NoUpgrade on a
	// database of an older format. errors.Is(err, engine.ErrInternal)
	// holds too.
	ErrOldFormat = errors.New("pebblestore: database format older than this build's")
	// ErrNewFormat is the error of Open on a database of a format newer
	// than this build's. errors.Is(err, engine.ErrInternal) holds too.
	ErrNewFormat = errors.New("pebblestore: database format newer than this build's")
)

// formatAction is what Open does about a database's format.
type formatAction int

const (
	formatCurrent   formatAction = iota // nothing
	formatNew                           // an empty database: record the format
	formatUpgrade                       // format 1 (or partly upgraded): upgrade
	formatUpgradeV2                     // format 2: add the status indexes (and scan for format-1 records)
	formatRepair                        // the current format: scan for format-1 records
)

// openFormat checks the format of the database just opened from dir: it
// writes the current one into a new database and upgrades (or, with
// NoUpgrade, refuses) an older one. scan says the database was last opened
// without the rollback guard (guard.go), or such an Open's scan is not
// done: a format-2 database is then scanned for format-1 records a release
// before format 2 may have written, which are upgraded (NoUpgrade or not:
// the format stays 2).
func (s *Store) openFormat(dir string, opts *Options, scan bool) (err error) {
	defer s.catch("open", &err)
	action, err := s.checkFormat(dir, opts, scan)
	if err != nil {
		return err
	}
	key, err := opts.upgradeOwnerKey()
	if err != nil {
		return err
	}
	switch action {
	case formatNew:
		return s.writeFormat(dir)
	case formatUpgrade:
		return s.upgradeFromV1(dir, key)
	case formatUpgradeV2:
		return s.upgradeFromV2(dir, key)
	case formatRepair:
		return s.repairV1(dir, key)
	}
	return nil
}

// checkFormat reads the format of the database just opened from dir and
// returns what openFormat must do about it, or the error of a database it
// must refuse. It writes nothing.
func (s *Store) checkFormat(dir string, opts *Options, scan bool) (action formatAction, err error) {
	defer s.catch("open", &err)
	v, found, err := s.readFormat()
	switch {
	case err != nil:
		return 0, fmt.Errorf("pebblestore: open %s: %v: %w", dir, err, engine.ErrInternal)
	case found && v == formatVersion && scan:
		return formatRepair, nil
	case found && v == formatVersion:
		return formatCurrent, nil
	case found && v == 2 && opts.NoUpgrade:
		return 0, fmt.Errorf("pebblestore: open %s: the database has format 2 (written before the status indexes), "+
			"this build reads format %d: open it once without Options.NoUpgrade to upgrade it in place "+
			"(back it up first: releases before format %d cannot read the upgraded database): %w: %w",
			dir, formatVersion, formatVersion, ErrOldFormat, engine.ErrInternal)
	case found && v == 2:
		return formatUpgradeV2, nil
	case found && v > formatVersion:
		return 0, fmt.Errorf("pebblestore: open %s: the database has format %d, this build reads format %d: "+
			"open it with the a2astore release that wrote it, or a newer one: %w: %w", dir, v, formatVersion, ErrNewFormat, engine.ErrInternal)
	case found:
		return 0, fmt.Errorf("pebblestore: open %s: unknown database format %d: %w", dir, v, engine.ErrInternal)
	}
	empty, err := s.empty()
	if err != nil {
		return 0, fmt.Errorf("pebblestore: open %s: %v: %w", dir, err, engine.ErrInternal)
	}
	if empty {
		return formatNew, nil
	}
	if opts.NoUpgrade {
		return 0, fmt.Errorf("pebblestore: open %s: the database has format 1 (written before stores recorded task owners), "+
			"this build reads format %d: open it once without Options.NoUpgrade to upgrade it in place "+
			"(back it up first: releases before format %d cannot read the upgraded database): %w: %w",
			dir, formatVersion, formatVersion, ErrOldFormat, engine.ErrInternal)
	}
	return formatUpgrade, nil
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
