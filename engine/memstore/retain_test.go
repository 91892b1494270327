package memstore

import (
	"testing"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/retaintest"
)

func TestRetainSkipsTaskMutatedAfterScan(t *testing.T) {
	retaintest.MutatedAfterScan(t, func(clock engine.Clock) engine.Retainer {
		s := New(Options{Clock: clock})
		t.Cleanup(func() { s.Close() })
		return s
	}, func(f func()) { retainScanned = f })
}
