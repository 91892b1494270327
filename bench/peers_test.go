package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/tidwall/btree"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// Peers run inside a backend's group, on the same fixture, right after the
// store's own sub-benchmark, and carry an extra key naming what they are:
//
//	mem: op=page/…/proj=light/impl=btree         the floor: bare B-tree + least copying
//	mem: op=page-context/…/impl=noctx            no context index: global index scanned and filtered
//	mem: op=list-first/…/impl=a2a-inmemory       a2a-go's taskstore.InMemory
//	pg:  op=page-depth/…/scheme=offset           the old scheme: creation order + numeric OFFSET
//	pg:  op=page-context/…/impl=noctx            context index dropped
//	pg:  op=total/…/impl=scan                    count(*) over the matching rows, not the counters
//	pg:  op=replace|create/…/indexes=none        both ordering indexes dropped

// bareLight is what a minimal ordered index must hold, beside the key, to
// serve a light page: bareItem is its item.
type bareLight struct {
	ctx   string
	state a2a.TaskState
	ts    time.Time
}

type bareItem = floorItem[bareLight]

var bareTrees treeCache[bareLight]

// bareTree is one global list-order B-tree of the fixture's light fields,
// built once per fixture.
func bareTree(fx *fixture) *btree.BTreeG[bareItem] {
	return bareTrees.get(fx, func(tr *btree.BTreeG[bareItem]) {
		for i, c := range fx.order {
			tr.Set(bareItem{c.UpdatedAt, c.ID, bareLight{fx.ctx[i], fx.state[i], fx.stamp[i]}})
		}
	})
}

// barePage serves a light page of up to page tasks strictly after the
// boundary at, keeping only context ctx if it is not empty: one seek, then
// a scan, then the least copying any store must do (fresh light tasks in
// three allocations). It returns the entries examined.
func barePage(tr *btree.BTreeG[bareItem], at bareItem, ctx string, page int) int {
	keep := func(v bareLight) bool { return ctx == "" || v.ctx == ctx }
	return floorPage(tr, at, page, keep, func(dst *a2a.Task, it bareItem, times *[]time.Time) {
		*times = append(*times, it.v.ts)
		*dst = a2a.Task{ID: it.id, ContextID: it.v.ctx,
			Status: a2a.TaskStatus{State: it.v.state, Timestamp: &(*times)[len(*times)-1]}}
	})
}

// floorPage serves a floor's page of up to page tasks strictly after the
// boundary at that keep accepts: one seek, a scan, and fill to copy each
// task into the page's task slice (times is the page's timestamp slice,
// whose capacity is the page's, so pointers into it stay valid). It
// returns the entries examined.
func floorPage[V any](tr *btree.BTreeG[floorItem[V]], at floorItem[V], page int, keep func(V) bool,
	fill func(dst *a2a.Task, it floorItem[V], times *[]time.Time),
) int {
	tasks := make([]a2a.Task, 0, page)
	times := make([]time.Time, 0, page)
	examined := 0
	tr.Ascend(at, func(it floorItem[V]) bool {
		if it.at == at.at && it.id == at.id {
			return true // the boundary itself (a store's seek lands after it)
		}
		examined++
		if !keep(it.v) {
			return true
		}
		if len(tasks) == page {
			return false // the look-ahead entry
		}
		tasks = append(tasks, a2a.Task{})
		fill(&tasks[len(tasks)-1], it, &times)
		return true
	})
	ptrs := make([]*a2a.Task, len(tasks))
	for j := range tasks {
		ptrs[j] = &tasks[j]
	}
	sink = ptrs
	return examined
}

var sink any

// benchBtreeFloor: the floor under memstore's light page (issue 2: memstore
// ≤ 1.5× this): the same random cursors on a bare tidwall/btree.
func benchBtreeFloor(b *testing.B, e *env, fixtureOf func(tb testing.TB, n int) *fixture, tasks string) {
	benchFloorPage(b, e, fixtureOf, "light"+tasks, func(fx *fixture) func(c engine.Cursor) int {
		tr := bareTree(fx)
		return func(c engine.Cursor) int { return barePage(tr, bareItem{at: c.UpdatedAt, id: c.ID}, "", 50) }
	})
}

// benchPagePair: the light page and its floor in one loop, each
// iteration serving the same random cursor from both, in turn first, each
// timed on its own (op=page/…/proj=light/impl=pair). Both then see the same
// heap and the same collector phases, which separate sub-benchmarks, run
// one after the other after a fixture's load, do not (#31: at 1e6 the ratio
// of the two sub-benchmarks' medians went from 1.07 to 1.76 between runs of
// the same binary). floorOf returns the fixture's floor page (mem: the bare
// B-tree, barePage; pebble: bare Pebble, pebbleFloorPage). It reports the
// store's and the floor's ns/page and their ratio, store/floor.
func benchPagePair(b *testing.B, fixtureOf func(tb testing.TB, n int) *fixture, tasks string,
	floorOf func(tb testing.TB, fx *fixture) func(c engine.Cursor),
) {
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("op=page/n=%d/page=50/proj=light%s/impl=pair", n, tasks), func(b *testing.B) {
			fx := fixtureOf(b, n)
			floorPage := floorOf(b, fx)
			pos := fx.positions(1024, 50, 7) // op=page's and the floor's
			ctx := context.Background()
			var inStore, inFloor time.Duration
			defer reportFaults(b)()
			i := 0
			for b.Loop() {
				p := pos[i%len(pos)]
				req := engine.ListRequest{PageSize: 50, PageToken: fx.token(p), Projection: engine.ProjectionLight, IncludeArtifacts: true}
				c := fx.order[p-1+boolInt(p == 0)]
				store := func() {
					t0 := time.Now()
					slowdown()
					if _, err := fx.store.List(ctx, &req); err != nil {
						b.Fatal(err)
					}
					inStore += time.Since(t0)
				}
				floor := func() {
					t0 := time.Now()
					floorPage(c)
					inFloor += time.Since(t0)
				}
				if i%2 == 0 {
					store()
					floor()
				} else {
					floor()
					store()
				}
				i++
			}
			b.ReportMetric(float64(inStore.Nanoseconds())/float64(i), "store-ns/page")
			b.ReportMetric(float64(inFloor.Nanoseconds())/float64(i), "floor-ns/page")
			b.ReportMetric(float64(inStore)/float64(inFloor), "store/floor")
		})
	}
}

// btreeFloor is the mem floor of benchPagePair: barePage on the
// fixture's bare B-tree.
func btreeFloor(_ testing.TB, fx *fixture) func(c engine.Cursor) {
	tr := bareTree(fx)
	return func(c engine.Cursor) { barePage(tr, bareItem{at: c.UpdatedAt, id: c.ID}, "", 50) }
}

// pebbleFloor is the pebble floor of benchPagePair: pebbleFloorPage on a
// bare Pebble DB loaded with the fixture's light fields.
func pebbleFloor(tb testing.TB, fx *fixture) func(c engine.Cursor) {
	db := openPebbleFloor(tb, fx)
	return func(c engine.Cursor) { pebbleFloorPage(tb, db, c, 50) }
}

// benchFloorPage runs a floor's page of 50 (op=page/…/proj=P/impl=btree,
// where proj may carry further keys) on the fixtures of fixtureOf, from the
// random cursors of the store's op=page; serve returns the fixture's page
// function, which returns the entries it examined.
func benchFloorPage(b *testing.B, e *env, fixtureOf func(tb testing.TB, n int) *fixture, proj string,
	serve func(fx *fixture) func(c engine.Cursor) int,
) {
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("op=page/n=%d/page=50/proj=%s/impl=btree", n, proj), func(b *testing.B) {
			pageFloorLoop(b, fixtureOf(b, n), serve)
		})
	}
}

func pageFloorLoop(b *testing.B, fx *fixture, serve func(fx *fixture) func(c engine.Cursor) int) {
	page := serve(fx)
	pos := fx.positions(1024, 50, 7) // the store's page uses the same
	b.ReportAllocs()
	defer reportFaults(b)()
	i, examined := 0, 0
	for b.Loop() {
		c := fx.order[pos[i%len(pos)]-1+boolInt(pos[i%len(pos)] == 0)]
		examined += page(c)
		i++
	}
	b.ReportMetric(float64(examined)/float64(i), "examined/page")
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// benchMemWithoutContextIndex: the context-filtered pages of
// op=page-context served by a store without a per-context index — the
// global index, seeked to the boundary and scanned until the page is full.
// Implemented here only.
func benchMemWithoutContextIndex(b *testing.B, e *env) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=page-context/n=%d/page=50/impl=noctx", n)
	}, func(b *testing.B, fx *fixture) {
		tr := bareTree(fx)
		reqs := contextRequests(fx)
		pivots := make([]bareItem, len(reqs))
		for i, r := range reqs {
			c, err := engine.DecodeToken(r.PageToken)
			if err != nil {
				b.Fatal(err)
			}
			pivots[i] = bareItem{at: c.UpdatedAt, id: c.ID, v: bareLight{ctx: r.ContextID}}
		}
		b.ReportAllocs()
		i, examined := 0, 0
		for b.Loop() {
			p := pivots[i%len(pivots)]
			examined += barePage(tr, p, p.v.ctx, 50)
			i++
		}
		b.ReportMetric(float64(examined)/float64(i), "examined/page")
	})
}

// benchListFirst: the first page of 50 with its total, whole tasks, on
// memstore and on a2a-go's taskstore.InMemory (which filters and sorts
// every task on every call) holding the same tasks. InMemory runs up to
// n = 1e5; it is filled on first use, once per size.
func benchListFirst(b *testing.B, e *env) {
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("op=list-first/n=%d/page=50", n), func(b *testing.B) {
			fx := e.fixture(b, n)
			req := &engine.ListRequest{PageSize: 50, IncludeTotalSize: true, IncludeArtifacts: true}
			benchList(b, fx.store, func(int) *engine.ListRequest { return req })
		})
		if n > 100_000 {
			continue
		}
		var s *taskstore.InMemory
		b.Run(fmt.Sprintf("op=list-first/n=%d/page=50/impl=a2a-inmemory", n), func(b *testing.B) {
			ctx := context.Background()
			if s == nil {
				s = taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{
					Authenticator: func(context.Context) (string, error) { return "bench", nil },
				})
				gen := taskgen.New(taskgen.Shape{})
				for i := range n {
					if _, err := s.Create(ctx, gen.Task(i)); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				slowdown()
				resp, err := s.List(ctx, &a2a.ListTasksRequest{PageSize: 50, IncludeArtifacts: true})
				if err != nil || len(resp.Tasks) != 50 {
					b.Fatalf("%v, %d tasks", err, len(resp.Tasks))
				}
			}
		})
	}
}

// benchPGOffset: the old PostgreSQL scheme at the same depth — pages in
// creation order with a numeric OFFSET token (on BenchmarkScale's
// fixtures, which have no creation column, in list order through the
// store's own index: creation order reversed there, the same rows
// skipped). Implemented here only; rows
// are read but not decoded, so the ratio against the store's keyset page
// (which decodes into tasks) favours the baseline.
func benchPGOffset(b *testing.B, e *env, depth int) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=page-depth/n=%d/page=50/depth=%d/scheme=offset", n, depth)
	}, func(b *testing.B, fx *fixture) {
		ctx := context.Background()
		order := `created DESC`
		if fx.key.scale { // no created column (load): the list order's index
			order = `updated_at DESC, id COLLATE "C" DESC`
		}
		sql := `SELECT id, context_id, updated_at, revision, state, status_ts, status_ns, metadata FROM ` +
			pgTableNamed(fx.key.name()) + ` ORDER BY ` + order + ` OFFSET $1 LIMIT 51`
		offset := fx.n * depth / 100
		want := min(51, fx.n-offset)
		b.ReportAllocs()
		for b.Loop() {
			slowdown()
			readRows(ctx, b, e, want, sql, offset)
		}
		b.ReportMetric(float64(offset+want), "examined/page")
	})
}

// benchPGWithoutIndexes runs last in the pg group: context pages with the
// context index dropped, then Replace and Create with both ordering indexes
// dropped (the store checks its indexes only when it opens). Each leaf
// drops what it needs on first use.
func benchPGWithoutIndexes(b *testing.B, e *env) {
	drop := func(b *testing.B, fx *fixture, indexes ...string) {
		ctx := context.Background()
		for _, idx := range indexes {
			if _, err := e.pool.Exec(ctx, "DROP INDEX IF EXISTS "+pgSchema(fx.n)+"."+idx); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := e.pool.Exec(ctx, "ANALYZE "+pgTable(fx.n)); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("op=page-context/n=%d/page=50/impl=noctx", n), func(b *testing.B) {
			fx := e.fixture(b, n)
			drop(b, fx, "idx_a2a_tasks_context_updated")
			reqs := contextRequests(fx)
			benchList(b, fx.store, func(i int) *engine.ListRequest { return &reqs[i%len(reqs)] })
		})
	}
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("op=replace/n=%d/indexes=none", n), func(b *testing.B) {
			fx := e.fixture(b, n)
			drop(b, fx, "idx_a2a_tasks_context_updated", "idx_a2a_tasks_updated")
			replaceLoop(b, context.Background(), fx)
		})
		b.Run(fmt.Sprintf("op=create/n=%d/indexes=none", n), func(b *testing.B) {
			fx := e.fixture(b, n)
			drop(b, fx, "idx_a2a_tasks_context_updated", "idx_a2a_tasks_updated")
			createLoop(b, fx)
		})
	}
}

// benchPGScanTotal: the count PostgreSQL totals cost before the store kept
// counters — count(*) over the rows matching where, with args — on the
// same table as op=total. Implemented here only; it reports the rows
// counted.
func benchPGScanTotal(b *testing.B, e *env, filter, where string, args ...any) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=total/n=%d/filter=%s/impl=scan", n, filter)
	}, func(b *testing.B, fx *fixture) {
		ctx := context.Background()
		sql := `SELECT count(*) FROM ` + pgTable(fx.n) + ` WHERE ` + where
		var total int64
		b.ReportAllocs()
		for b.Loop() {
			slowdown()
			if err := e.pool.QueryRow(ctx, sql, args...).Scan(&total); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(total), "counted/op")
	})
}
