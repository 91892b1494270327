package storemetrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
	"github.com/a2astore/a2astore/engine/storetest"
)

// TestConformance: the decorator changes nothing a store promises.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(tb testing.TB, clock engine.Clock) engine.Store {
			s := storemetrics.New(memstore.New(memstore.Options{Clock: clock}), storemetrics.Options{Backend: "mem"})
			prometheus.NewRegistry().MustRegister(s)
			tb.Cleanup(func() { s.Close() })
			return s
		},
		ClockInjection: true,
		BinaryIDs:      true,
	})
}
