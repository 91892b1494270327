package authz_test

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"testing"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
)

// TestConformance runs the whole store contract over the dispatcher with an
// allow-all policy: AllowAll's pass-through, policies admitting everything
// through the scan with light and full batches, one deciding by owner
// (OwnerChecker: owners carried through scans and final reads), and one
// whose scopes are exact (ExactScoper: every List one store call, as
// OwnerPolicy's owner scope). The dispatcher over memstore is an
// engine.OwnerStore, so the owner clauses (O1–O5) run on every path.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy authz.Policy
	}{
		{"allowall", authz.AllowAll{}}, // the pass-through path
		{"admitall", admitAll},         // scan, light batches, final read
		{"fullscan", funcPolicy{proj: engine.ProjectionFull, allow: func(context.Context, *a2a.Task) bool { return true }}},
		{"ownedall", ownedAll{admitAll}}, // decisions with the owner
		{"exactall", exactAll{admitAll}}, // one store call per List
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Run(t, storetest.Harness{
				Open: func(t testing.TB, clock engine.Clock) engine.Store {
					d := authz.New(memstore.New(memstore.Options{Clock: clock}), tc.policy)
					t.Cleanup(func() { d.Close() }) // closes the memstore
					return d                        // its CheckInvariants is the memstore's
				},
				ClockInjection: true,
				BinaryIDs:      true,
			})
		})
	}
}
