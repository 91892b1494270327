package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// backend opens an empty store of one kind with the given clock.
type backend struct {
	name string
	open func(tb testing.TB, clock engine.Clock) engine.Store
}

var backends = []backend{
	{"mem", func(tb testing.TB, clock engine.Clock) engine.Store {
		return memstore.New(memstore.Options{Clock: clock})
	}},
}

func sizes() []int {
	if os.Getenv("BENCH_FULL") != "" {
		return []int{1e3, 1e4, 1e5, 1e6}
	}
	return []int{1e3, 1e4, 1e5}
}

// fixture is a store filled with n generated tasks, built once per
// (backend, n) and shared by every sub-benchmark.
type fixture struct {
	store   engine.Store
	tasks   []*a2a.Task     // as created (content only)
	cursors []engine.Cursor // of every task, in list order
	clock   *taskgen.StepClock
	gen     *taskgen.Gen
}

var (
	fixturesMu sync.Mutex
	fixtures   = map[string]*fixture{}
)

func getFixture(b *testing.B, be backend, n int) *fixture {
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	key := fmt.Sprintf("%s/%d", be.name, n)
	if fx := fixtures[key]; fx != nil {
		return fx
	}
	// Drop the other fixtures of this backend so at most one large one is
	// alive at a time.
	for k := range fixtures {
		delete(fixtures, k)
	}
	clock := &taskgen.StepClock{Start: 1_700_000_000_000_000, Every: 4}
	fx := &fixture{store: be.open(b, clock.Now), clock: clock, gen: taskgen.New(taskgen.Shape{})}
	ctx := context.Background()
	fx.tasks = make([]*a2a.Task, n)
	fx.cursors = make([]engine.Cursor, n)
	for i := range n {
		t := fx.gen.Task(i)
		rec, err := fx.store.Create(ctx, t)
		if err != nil {
			b.Fatal(err)
		}
		fx.tasks[i] = t
		fx.cursors[n-1-i] = rec.Cursor // creation order is time order here
	}
	fixtures[key] = fx
	return fx
}

// randomTokens returns k page tokens at uniformly random positions.
func randomTokens(fx *fixture, k int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 1))
	toks := make([]string, k)
	for i := range toks {
		toks[i] = engine.EncodeToken(fx.cursors[rng.IntN(len(fx.cursors))])
	}
	return toks
}

// BenchmarkPage: a page of 50 from a random cursor (C2: O(log n) seek,
// PageSize+1 entries), light and full projections.
func BenchmarkPage(b *testing.B) {
	for _, be := range backends {
		for _, n := range sizes() {
			for _, proj := range []engine.Projection{engine.ProjectionLight, engine.ProjectionFull} {
				name := fmt.Sprintf("backend=%s/op=page/n=%d/page=50/proj=%s", be.name, n, projName(proj))
				b.Run(name, func(b *testing.B) {
					fx := getFixture(b, be, n)
					toks := randomTokens(fx, 1024, 7)
					benchList(b, fx.store, func(i int) *engine.ListRequest {
						return &engine.ListRequest{PageSize: 50, PageToken: toks[i%len(toks)], Projection: proj}
					})
				})
			}
		}
	}
}

func projName(p engine.Projection) string {
	if p == engine.ProjectionLight {
		return "light"
	}
	return "full"
}

// benchList runs List with the i-th request and reports entries examined
// per page.
func benchList(b *testing.B, s engine.Store, req func(i int) *engine.ListRequest) {
	b.ReportAllocs()
	var st engine.ListStats
	ctx := engine.WithListStats(context.Background(), &st)
	pages := 0
	for b.Loop() {
		if _, err := s.List(ctx, req(pages)); err != nil {
			b.Fatal(err)
		}
		pages++
	}
	b.ReportMetric(float64(st.Examined)/float64(pages), "examined/page")
}

// BenchmarkTotal: TotalSize per filter shape (C4); every shape but the
// status timestamp comes from counters on mem.
func BenchmarkTotal(b *testing.B) {
	after := func(fx *fixture) *engine.ListRequest {
		ts := *fx.tasks[len(fx.tasks)/2].Status.Timestamp
		return &engine.ListRequest{StatusTimestampAfter: &ts}
	}
	shapes := []struct {
		name string
		req  func(fx *fixture) *engine.ListRequest
	}{
		{"none", func(*fixture) *engine.ListRequest { return &engine.ListRequest{} }},
		{"context", func(*fixture) *engine.ListRequest { return &engine.ListRequest{ContextID: taskgen.ContextID(0)} }},
		{"state", func(*fixture) *engine.ListRequest { return &engine.ListRequest{Status: a2a.TaskStateWorking} }},
		{"context+state", func(*fixture) *engine.ListRequest {
			return &engine.ListRequest{ContextID: taskgen.ContextID(0), Status: a2a.TaskStateWorking}
		}},
		{"timestamp", after},
	}
	for _, be := range backends {
		for _, n := range sizes() {
			for _, sh := range shapes {
				b.Run(fmt.Sprintf("backend=%s/op=total/n=%d/filter=%s", be.name, n, sh.name), func(b *testing.B) {
					fx := getFixture(b, be, n)
					req := sh.req(fx)
					req.IncludeTotalSize, req.PageSize, req.Projection = true, 1, engine.ProjectionLight
					benchList(b, fx.store, func(int) *engine.ListRequest { return req })
				})
			}
		}
	}
}

// BenchmarkReplaceHead: a replace that moves a random task to the head of
// the list (C1: O(log n) index maintenance).
func BenchmarkReplaceHead(b *testing.B) {
	for _, be := range backends {
		for _, n := range sizes() {
			b.Run(fmt.Sprintf("backend=%s/op=replace/n=%d", be.name, n), func(b *testing.B) {
				fx := getFixture(b, be, n)
				ctx := context.Background()
				rng := rand.New(rand.NewPCG(3, 3))
				b.ReportAllocs()
				for b.Loop() {
					t := fx.tasks[rng.IntN(len(fx.tasks))]
					if _, err := fx.store.Replace(ctx, t, 0); err != nil {
						b.Fatal(err)
					}
				}
				delete(fixtures, fmt.Sprintf("%s/%d", be.name, n)) // cursors moved
			})
		}
	}
}
