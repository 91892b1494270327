package pebblestore

// The guard reads only wal_dir from Pebble's OPTIONS file: an option this
// build does not know (a user-defined compression profile set through
// Tune, a newer Pebble's key) does not stop an Open, as it does not stop
// Pebble's own (Options.Parse would refuse both).

import (
	"io"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"

	"github.com/a2astore/a2astore/internal/pebblelog"
)

// A user-defined compression profile set through Options.Tune (a documented
// hook) makes the database unopenable from the second Open on — and still
// after Tune is removed, since the OPTIONS file names the profile.
func TestGuardCustomCompressionReopens(t *testing.T) {
	custom := *sstable.ZstdCompression
	custom.Name = "zstd-custom"
	custom.MinReductionPercent = 1
	tune := func(o *pebble.Options) {
		for i := range o.Levels {
			o.Levels[i].Compression = func() *sstable.CompressionProfile { return &custom }
		}
	}
	fs := vfs.NewMem()
	for i := range 2 {
		s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}, Tune: tune})
		if err != nil {
			t.Fatalf("open %d with the custom profile: %v", i+1, err) // fails at i == 1 today
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatalf("open without Tune: %v", err)
	}
	s.Close()
}

// An OPTIONS file with a key this Pebble does not know (written by a newer
// Pebble, i.e. a later a2astore release that is rolled back to this one):
// Pebble itself opens the database, this build's Open refuses it.
func TestGuardNewerOptionsFile(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	desc, err := pebble.Peek("db", fs)
	if err != nil || desc.OptionsFilename == "" {
		t.Fatalf("peek: %v, %q", err, desc.OptionsFilename)
	}
	f, err := fs.Open(desc.OptionsFilename)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "[Options]\n", "[Options]\n  future_option=1\n", 1)
	if text == string(b) {
		t.Fatal("no [Options] section")
	}
	w, err := fs.Create(desc.OptionsFilename, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	s, storeErr := Open("db", Options{FS: fs, Logger: pebblelog.Quiet{}})
	if storeErr == nil {
		s.Close()
		return
	}
	// Pebble alone, with the store's guarded options, accepts the same file.
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Merger: counterMerger, Logger: pebblelog.Quiet{},
		FormatMajorVersion: pebble.FormatNewest, WALDir: walDir, WALRecoveryDirs: []wal.Dir{{FS: fs, Dirname: storePath}}})
	if err != nil {
		t.Fatalf("store Open: %v; Pebble refuses too: %v", storeErr, err)
	}
	db.Close()
	t.Fatalf("store Open refuses an OPTIONS file Pebble accepts: %v", storeErr)
}
