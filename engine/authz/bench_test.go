package authz_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// benchBackends are the stores the benchmarks run on. Other backends join
// by adding an opener here.
var benchBackends = []struct {
	name string
	open func() engine.Store
}{
	{"mem", func() engine.Store {
		clock := &taskgen.StepClock{Start: 1_700_000_000_000_000, Every: 4}
		return memstore.New(memstore.Options{Clock: clock.Now})
	}},
}

const benchN = 100_000

// benchFixture is a store of benchN generated tasks; every 100th is owned by
// alice, the rest by someone else (recorded by the store: CreateOwned).
type benchFixture struct {
	store   engine.Store
	cursors []engine.Cursor // list order
}

var (
	benchMu       sync.Mutex
	benchFixtures = map[string]*benchFixture{}
)

func getBenchFixture(b *testing.B, name string, open func() engine.Store) *benchFixture {
	benchMu.Lock()
	defer benchMu.Unlock()
	if fx := benchFixtures[name]; fx != nil {
		return fx
	}
	fx := &benchFixture{store: open(), cursors: make([]engine.Cursor, benchN)}
	gen := taskgen.New(taskgen.Shape{})
	ctx := context.Background()
	for i := range benchN {
		t := gen.Task(i)
		owner := "other"
		if i%100 == 0 {
			owner = "alice"
		}
		rec, err := fx.store.(engine.OwnerStore).CreateOwned(ctx, t, owner)
		if err != nil {
			b.Fatal(err)
		}
		fx.cursors[benchN-1-i] = rec.Cursor
	}
	benchFixtures[name] = fx
	return fx
}

func benchTokens(fx *benchFixture) []string {
	rng := rand.New(rand.NewPCG(7, 1))
	toks := make([]string, 1024)
	for i := range toks {
		// Keep boundaries in the upper half so a page is always full.
		toks[i] = engine.EncodeToken(fx.cursors[rng.IntN(len(fx.cursors)/2)])
	}
	return toks
}

func runList(b *testing.B, ctx context.Context, s engine.Store, req func(i int) *engine.ListRequest) {
	b.ReportAllocs()
	var st engine.ListStats
	pages, tasks := 0, 0
	cpu0 := processCPU()
	for b.Loop() {
		resp, err := s.List(ctx, req(pages))
		if err != nil {
			b.Fatal(err)
		}
		pages++
		tasks += len(resp.Tasks)
		st.Add(resp.Stats)
	}
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(pages), "cpu-ns/op")
	}
	b.ReportMetric(float64(st.Examined)/float64(pages), "examined/page")
	b.ReportMetric(float64(tasks)/float64(pages), "tasks/page")
}

// BenchmarkOverhead: a page of 50 full tasks from a random cursor, raw and
// through the dispatcher with AllowAll (its pass-through) and with a policy
// admitting everything through the scan and final read (target: <= 1.5x raw).
func BenchmarkOverhead(b *testing.B) {
	for _, be := range benchBackends {
		for _, via := range []string{"raw", "allowall", "admitall"} {
			b.Run(fmt.Sprintf("backend=%s/op=page/n=%d/page=50/via=%s", be.name, benchN, via), func(b *testing.B) {
				fx := getBenchFixture(b, be.name, be.open)
				s := fx.store
				switch via {
				case "allowall": // pass-through
					s = authz.New(s, authz.AllowAll{})
				case "admitall": // light scan + final read of 50
					s = authz.New(s, admitAll)
				}
				toks := benchTokens(fx)
				runList(b, context.Background(), s, func(i int) *engine.ListRequest {
					return &engine.ListRequest{PageSize: 50, PageToken: toks[i%len(toks)], IncludeArtifacts: true}
				})
			})
		}
	}
}

// BenchmarkRestrictive: alice owns 1% of 1e5 tasks; a page of 50 from a
// random cursor with and without a total. scan=light and scan=full are the
// scan path (an owner policy that does not narrow the store query, as
// before #15: a total scans the whole store), reading light or full tasks;
// scan=owner-index is OwnerPolicy, whose exact owner scope is one store
// call on the owner index (O6).
func BenchmarkRestrictive(b *testing.B) {
	alice := authz.WithCaller(context.Background(), "alice")
	for _, be := range benchBackends {
		for _, total := range []bool{false, true} {
			for _, scan := range []string{"light", "full", "owner-index"} {
				name := fmt.Sprintf("backend=%s/op=page/n=%d/page=50/policy=owner1pct/scan=%s/total=%v", be.name, benchN, scan, total)
				b.Run(name, func(b *testing.B) {
					fx := getBenchFixture(b, be.name, be.open)
					var pol authz.Policy = scanOwner{engine.ProjectionLight}
					switch scan {
					case "full":
						pol = scanOwner{engine.ProjectionFull}
					case "owner-index":
						pol = authz.OwnerPolicy{}
					}
					d := authz.New(fx.store, pol)
					toks := benchTokens(fx)
					runList(b, alice, d, func(i int) *engine.ListRequest {
						return &engine.ListRequest{PageSize: 50, PageToken: toks[i%len(toks)], IncludeTotalSize: total, IncludeArtifacts: true}
					})
				})
			}
		}
	}
}
