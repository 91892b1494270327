package pebblestore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/retaintest"
)

func TestRetainSkipsTaskMutatedAfterScan(t *testing.T) {
	retaintest.MutatedAfterScan(t, func(clock engine.Clock) engine.Retainer {
		s, err := Open("db", Options{FS: vfs.NewMem(), Logger: pebblelog.Quiet{}, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}, func(f func()) { retainScanned = f })
}
