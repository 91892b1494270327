package memstore_test

import (
	"testing"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
)

func TestConformance(t *testing.T) {
	open := func(log bool) func(tb testing.TB, clock engine.Clock) engine.Store {
		return func(tb testing.TB, clock engine.Clock) engine.Store {
			s := memstore.New(memstore.Options{Clock: clock, Log: log})
			tb.Cleanup(func() { s.Close() })
			return s
		}
	}
	storetest.Run(t, storetest.Harness{
		Open:           open(false),
		OpenLogged:     open(true),
		ClockInjection: true,
		BinaryIDs:      true,
	})
}
