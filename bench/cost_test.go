package bench

import (
	"context"
	"testing"

	"github.com/a2astore/a2astore/engine"
)

// TestExaminedPerPage checks the cost model the benchmarks report as
// examined/page (C2): an unfiltered page of 50 from any cursor with at
// least 51 tasks after it reads exactly 51 index entries on mem and on
// Pebble, light or full; so does a context-filtered page served by the
// per-context index, where the bare global index (impl=noctx) reads more.
// It runs on small fixtures built by the benchmarks' own loader.
func TestExaminedPerPage(t *testing.T) {
	const n = 3000
	for _, be := range backends[:2] { // mem, pebble
		t.Run(be.name, func(t *testing.T) {
			e := be.setup(t)
			fx := e.fixture(t, n)
			examined := func(req *engine.ListRequest) int {
				resp, err := fx.store.List(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Tasks) != 50 || resp.NextPageToken == "" {
					t.Fatalf("page of %d tasks, next token %q: want a full page with a next one", len(resp.Tasks), resp.NextPageToken)
				}
				return resp.Stats.Examined
			}
			for _, p := range fx.positions(64, 50, 7) {
				for _, proj := range []engine.Projection{engine.ProjectionLight, engine.ProjectionFull} {
					req := &engine.ListRequest{PageSize: 50, PageToken: fx.token(p), Projection: proj}
					if got := examined(req); got != 51 {
						t.Errorf("unfiltered %s page at position %d examined %d entries, want 51", projName(proj), p, got)
					}
				}
			}
			// Context pages in the hottest context, from its first task on.
			hot, first := "ctx-00000", -1
			count := 0
			for i, c := range fx.ctx {
				if c == hot {
					if first < 0 {
						first = i
					}
					count++
				}
			}
			if count < 102 {
				t.Fatalf("hot context has %d tasks; the fixture shape changed", count)
			}
			req := &engine.ListRequest{PageSize: 50, ContextID: hot, PageToken: fx.token(first), Projection: engine.ProjectionLight}
			if got := examined(req); got != 51 {
				t.Errorf("context page examined %d entries, want 51", got)
			}
			at := fx.order[first]
			if got := barePage(bareTree(fx), bareItem{at: at.UpdatedAt, id: at.ID}, hot, 50); got <= 51 {
				t.Errorf("global index scan for a context page examined %d entries; expected more than 51 (context holds %d of %d tasks)", got, count, n)
			}
		})
	}
}
