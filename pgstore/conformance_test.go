package pgstore_test

import (
	"context"
	"testing"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/storetest"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
)

var _ engine.Checker = (*pgstore.Store)(nil)

// The conformance suite on PostgreSQL. The store's clock is the database's
// (P1), so the clauses that inject a clock are skipped; its IDs are text,
// so NUL and invalid UTF-8 must be rejected (S8). Each store gets its own
// schema in one database (a schema is about 100× cheaper than a database).
// It runs beside TestConformanceOnStandbys, after the package's other
// tests: the two are the package's longest and wait mostly on round trips.
func TestConformance(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	open := func(log bool) func(tb testing.TB, clock engine.Clock) engine.Store {
		return func(tb testing.TB, clock engine.Clock) engine.Store {
			schema := pgtest.Schema(tb, dsn)
			s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Schema: schema, Log: log})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			return s
		}
	}
	storetest.Run(t, storetest.Harness{
		Open:           open(false),
		OpenLogged:     open(true),
		ClockInjection: false,
		BinaryIDs:      false,
	})
}

// The conformance suite with every Get and List on a hot standby (L10):
// each store reads from both standbys of pgtest's replicated cluster,
// its schema created on the primary, so every clause sees what the gate
// lets a standby serve.
func TestConformanceOnStandbys(t *testing.T) {
	t.Parallel()
	set := pgtest.Replicated(t)
	dsn, standbys := set.DSN(t)
	open := func(log bool) func(tb testing.TB, clock engine.Clock) engine.Store {
		return func(tb testing.TB, clock engine.Clock) engine.Store {
			schema := pgtest.Schema(tb, dsn)
			s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Schema: schema, Log: log, Replicas: standbys})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() {
				if st := s.ReplicaStats(); st.PrimaryReads > 0 {
					tb.Logf("%d reads ran on the primary: %v", st.PrimaryReads, st.Fallbacks)
				}
				s.Close()
			})
			return s
		}
	}
	storetest.Run(t, storetest.Harness{
		Open:           open(false),
		OpenLogged:     open(true),
		ClockInjection: false,
		BinaryIDs:      false,
	})
}
