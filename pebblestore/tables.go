package pebblestore

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine"
)

// LiveTables returns the file names (000006.sst) of the tables that the
// current version of the database in dir holds, as its MANIFEST says. It
// opens the database read-only — no compaction, nothing written but its
// empty log directory when it has none — so a
// damaged copy (a backup being restored) can be checked before a store is
// opened on it: a checkpoint holds exactly the tables of its version, and
// a table present but not named is a MANIFEST that lost records. Pebble
// logs to logger (nil: pebble.DefaultLogger).
func LiveTables(dir string, logger pebble.Logger) (_ []string, err error) {
	if logger == nil {
		logger = pebble.DefaultLogger
	}
	// The log directory the store's OPTIONS record (walDir); a checkpoint
	// without log files has none, and Pebble refuses a missing one.
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o755); err != nil {
		return nil, fmt.Errorf("pebblestore: open %s read-only: %v: %w", dir, err, engine.ErrInternal)
	}
	db, err := pebble.Open(dir, &pebble.Options{
		WALDir:        walDir,
		ReadOnly:      true,
		Merger:        counterMerger,
		Logger:        logger,
		EventListener: &pebble.EventListener{DataCorruption: func(pebble.DataCorruptionInfo) {}},
	})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s read-only: %v: %w", dir, err, engine.ErrInternal)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("pebblestore: close %s: %v: %w", dir, cerr, engine.ErrInternal)
		}
	}()
	levels, err := db.SSTables()
	if err != nil {
		return nil, fmt.Errorf("pebblestore: tables of %s: %v: %w", dir, err, engine.ErrInternal)
	}
	var out []string
	for _, level := range levels {
		for _, t := range level {
			out = append(out, fmt.Sprintf("%s.sst", t.BackingSSTNum))
		}
	}
	return out, nil
}
