package memstore_test

import (
	"testing"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(tb testing.TB, clock engine.Clock) engine.Store {
			s := memstore.New(memstore.Options{Clock: clock})
			tb.Cleanup(func() { s.Close() })
			return s
		},
		ClockInjection: true,
		BinaryIDs:      true,
	})
}
