package authz_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz/authztest"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
)

// TestWriteWindow: the dispatcher's Cancel, AppendHistory and Delete act
// only on the version they checked (A9), on the in-memory store, directly
// and through the metrics decorator (which must forward the conditional
// writes, not drop their condition).
func TestWriteWindow(t *testing.T) {
	mem := func(tb testing.TB) *memstore.Store {
		s := memstore.New(memstore.Options{})
		tb.Cleanup(func() {
			if err := s.CheckInvariants(); err != nil {
				tb.Errorf("memstore invariants: %v", err)
			}
			s.Close()
		})
		return s
	}
	t.Run("memstore", func(t *testing.T) {
		authztest.RunWriteWindow(t, func(tb testing.TB) engine.Store { return mem(tb) })
	})
	t.Run("storemetrics", func(t *testing.T) {
		authztest.RunWriteWindow(t, func(tb testing.TB) engine.Store {
			s := storemetrics.New(mem(tb), storemetrics.Options{Backend: "mem"})
			prometheus.NewRegistry().MustRegister(s)
			return s
		})
	})
}
