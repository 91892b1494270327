package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// BenchmarkStore is the shared benchmark body: every operation at every
// size on every backend, named
//
//	BenchmarkStore/backend=B/op=O/n=N[/page=50][/depth=D][/filter=F]...
//
// Peers measured on the same fixture in the same group carry an extra key
// (impl=…, scheme=…, indexes=…); see peers_test.go. Within a group, reads
// run before writes, and writes that would change the fixture's size undo
// themselves.
func BenchmarkStore(b *testing.B) {
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			e := be.setup(b)
			for _, op := range ops {
				if op.only == "" || op.only == e.name {
					op.run(b, e)
				}
			}
		})
	}
}

type op struct {
	only string // backend name, or "" for all
	run  func(b *testing.B, e *env)
}

var ops = []op{
	{"", benchPage},
	{"mem", benchPageLightTasks},
	{"", benchPageTrimmed},
	{"", benchPageDepth},
	{"", benchPageContext},
	{"", benchPageAfter},
	{"", benchTotal},
	{"", benchListWire},
	{"mem", benchListFirst},
	{"", benchAuthz},
	{"", benchAppendDup},
	{"", benchAppendNew},
	{"", benchReplace},
	{"", benchCancel},
	{"", benchCreate},
	{"pg", benchPGWithoutIndexes},
	// Owned fixtures (owner_test.go) last: loading one releases the
	// others.
	{"", benchOwnerPage},
	{"", benchOwnerTotal},
	{"", benchOwnerCreate},
	{"", benchOwnerReplace},
}

// forSizes runs f for every size under name(n).
func forSizes(b *testing.B, e *env, name func(n int) string, f func(b *testing.B, fx *fixture)) {
	for _, n := range sizes() {
		b.Run(name(n), func(b *testing.B) { f(b, e.fixture(b, n)) })
	}
}

// benchList runs List with the i-th request per iteration and reports the
// index entries (rows) examined per page and, for totals, the entries
// counted per call.
func benchList(b *testing.B, s engine.Store, req func(i int) *engine.ListRequest) {
	b.ReportAllocs()
	var st engine.ListStats
	ctx := context.Background()
	calls := 0
	defer reportFaults(b)()
	for b.Loop() {
		slowdown()
		resp, err := s.List(ctx, req(calls))
		if err != nil {
			b.Fatal(err)
		}
		st.Add(resp.Stats)
		calls++
	}
	b.ReportMetric(float64(st.Examined)/float64(calls), "examined/page")
	if st.TotalComputed {
		b.ReportMetric(float64(st.Counted)/float64(calls), "counted/op")
	}
}

func projName(p engine.Projection) string {
	if p == engine.ProjectionLight {
		return "light"
	}
	return "full"
}

// benchPage: a page of 50 from a random cursor (C2: one O(log n) seek, then
// PageSize+1 entries), light and full projection. The light page also
// reports the store's footprint in bytes per task. On mem, each is
// followed by its floor (impl=btree) and the light page by the pair of it
// and its floor in one loop (impl=pair); on pebble, the light page by its
// pair with a bare Pebble page (impl=pair, pebblefloor_test.go).
func benchPage(b *testing.B, e *env) {
	pages(b, e, e.fixture, "")
}

// benchPageLightTasks (mem, #16): op=page on a fixture of light tasks
// (lightTask: the measure), keyed tasks=light, each beside its
// floor.
func benchPageLightTasks(b *testing.B, e *env) {
	pages(b, e, e.lightFixture, "/tasks=light")
}

// pages runs op=page on the fixtures of fixtureOf, tasks naming them.
func pages(b *testing.B, e *env, fixtureOf func(tb testing.TB, n int) *fixture, tasks string) {
	for _, proj := range []engine.Projection{engine.ProjectionLight, engine.ProjectionFull} {
		for _, n := range sizes() {
			b.Run(fmt.Sprintf("op=page/n=%d/page=50/proj=%s%s", n, projName(proj), tasks), func(b *testing.B) {
				fx := fixtureOf(b, n)
				benchPagesAt(b, fx, engine.ListRequest{PageSize: 50, Projection: proj, IncludeArtifacts: true})
				if proj == engine.ProjectionLight {
					b.ReportMetric(fx.bytesPerTask, "bytes/task")
				}
			})
		}
		if e.name == "mem" && proj == engine.ProjectionLight {
			benchBtreeFloor(b, e, fixtureOf, tasks)
			benchPagePair(b, fixtureOf, tasks, btreeFloor)
		}
		if e.name == "pebble" && proj == engine.ProjectionLight {
			benchPagePair(b, fixtureOf, tasks, pebbleFloor)
		}
		if e.name == "mem" && proj == engine.ProjectionFull {
			benchFullFloor(b, e, fixtureOf, tasks)
		}
	}
}

// benchPagesAt runs List on pages of req's shape from 1024 random cursors.
func benchPagesAt(b *testing.B, fx *fixture, req engine.ListRequest) {
	pos := fx.positions(1024, 50, 7)
	reqs := make([]engine.ListRequest, len(pos))
	for i, p := range pos {
		reqs[i] = req
		reqs[i].PageToken = fx.token(p)
	}
	benchList(b, fx.store, func(i int) *engine.ListRequest { return &reqs[i%len(reqs)] })
}

// benchPageTrimmed: a full page of 50 from a random cursor, without history
// or artifacts (historyLength=0, L4): the store's part of a ListTasks as
// loadgen and most clients send it, which the served-request CPU rows of
// the results page measure end to end.
func benchPageTrimmed(b *testing.B, e *env) {
	none := 0
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=page/n=%d/page=50/proj=full/history=0", n)
	}, func(b *testing.B, fx *fixture) {
		benchPagesAt(b, fx, engine.ListRequest{PageSize: 50, HistoryLength: &none})
	})
}

// benchPageDepth: a light page of 50 at depth 0 (the first page), 10, 50
// and 90% of the list, by keyset token; on pg also by the old scheme and
// the cursor patterns of other SDKs' SQL stores (sqlpeers_test.go).
func benchPageDepth(b *testing.B, e *env) {
	for _, depth := range []int{0, 10, 50, 90} {
		keysetDepth(b, e, depth)
		if e.name == "pg" {
			benchPGOffset(b, e, depth)
			benchPGCursorPeers(b, e, depth)
		}
	}
}

// keysetDepth runs the light keyset page of 50 at depth % of the list.
func keysetDepth(b *testing.B, e *env, depth int) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=page-depth/n=%d/page=50/depth=%d/scheme=keyset", n, depth)
	}, func(b *testing.B, fx *fixture) {
		req := &engine.ListRequest{PageSize: 50, PageToken: fx.token(fx.n * depth / 100), Projection: engine.ProjectionLight}
		benchList(b, fx.store, func(int) *engine.ListRequest { return req })
	})
}

// contextRequests are light context-filtered pages of 50, each starting at
// a random task and filtered by that task's context (so hot contexts are
// drawn in proportion to their size).
func contextRequests(fx *fixture) []engine.ListRequest {
	pos := fx.positions(1024, 50, 11)
	reqs := make([]engine.ListRequest, len(pos))
	for i, p := range pos {
		reqs[i] = engine.ListRequest{PageSize: 50, PageToken: fx.token(p), ContextID: fx.ctx[p], Projection: engine.ProjectionLight}
	}
	return reqs
}

// benchPageContext: a context-filtered page (the context index seeks once).
func benchPageContext(b *testing.B, e *env) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=page-context/n=%d/page=50", n)
	}, func(b *testing.B, fx *fixture) {
		reqs := contextRequests(fx)
		benchList(b, fx.store, func(i int) *engine.ListRequest { return &reqs[i%len(reqs)] })
	})
	if e.name == "mem" {
		benchMemWithoutContextIndex(b, e)
	}
}

// benchPageAfter: a light page filtered by StatusTimestampAfter, from a
// random cursor in the newer half of the list; the filter keeps the newest
// half of the tasks (status times follow creation order in the fixture).
func benchPageAfter(b *testing.B, e *env) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=page-after/n=%d/page=50", n)
	}, func(b *testing.B, fx *fixture) {
		after := fx.stamp[fx.n/2]
		rng := rand.New(rand.NewPCG(13, 1))
		reqs := make([]engine.ListRequest, 1024)
		for i := range reqs {
			reqs[i] = engine.ListRequest{PageSize: 50, PageToken: fx.token(rng.IntN(max(fx.n/2-60, 1))),
				StatusTimestampAfter: &after, Projection: engine.ProjectionLight}
		}
		benchList(b, fx.store, func(i int) *engine.ListRequest { return &reqs[i%len(reqs)] })
	})
}

// benchTotal: TotalSize alone (page of 1) per filter shape. Only the status
// timestamp filter may scan; the context is the hottest one. On pg, each
// counted shape has a peer (impl=scan) running the count the store ran
// before it kept counters.
func benchTotal(b *testing.B, e *env) {
	hot := "ctx-00000"
	for _, sh := range []struct {
		name string
		req  func(fx *fixture) engine.ListRequest
		scan []any // pg: the old count's filter and its arguments; nil = no peer
	}{
		{"none", func(*fixture) engine.ListRequest { return engine.ListRequest{} }, []any{"true"}},
		{"context", func(*fixture) engine.ListRequest { return engine.ListRequest{ContextID: hot} }, []any{"context_id = $1", hot}},
		{"state", func(*fixture) engine.ListRequest { return engine.ListRequest{Status: a2a.TaskStateWorking} },
			[]any{"state = $1", a2a.TaskStateWorking}},
		{"context+state", func(*fixture) engine.ListRequest {
			return engine.ListRequest{ContextID: hot, Status: a2a.TaskStateWorking}
		}, []any{"context_id = $1 AND state = $2", hot, a2a.TaskStateWorking}},
		{"timestamp", func(fx *fixture) engine.ListRequest {
			return engine.ListRequest{StatusTimestampAfter: &fx.stamp[fx.n/2]}
		}, nil},
	} {
		forSizes(b, e, func(n int) string {
			return fmt.Sprintf("op=total/n=%d/filter=%s", n, sh.name)
		}, func(b *testing.B, fx *fixture) {
			req := sh.req(fx)
			req.IncludeTotalSize, req.PageSize, req.Projection = true, 1, engine.ProjectionLight
			benchList(b, fx.store, func(int) *engine.ListRequest { return &req })
		})
		if e.name == "pg" && sh.scan != nil {
			benchPGScanTotal(b, e, sh.name, sh.scan[0].(string), sh.scan[1:]...)
		}
	}
}

// ids returns k task IDs of the fixture, drawn with a fixed seed.
func (fx *fixture) ids(k int, seed uint64) []a2a.TaskID {
	rng := rand.New(rand.NewPCG(seed, 5))
	ids := make([]a2a.TaskID, k)
	for i := range ids {
		ids[i] = fx.order[rng.IntN(fx.n)].ID
	}
	return ids
}

// benchAppendDup: AppendHistory of a message already in the history
// (deduplicated: changes nothing, S3).
func benchAppendDup(b *testing.B, e *env) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=append-dup/n=%d", n)
	}, func(b *testing.B, fx *fixture) {
		ctx := context.Background()
		ids := fx.ids(256, 17)
		msg := &a2a.Message{ID: "bench-dup", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("again")}}
		for _, id := range ids { // the first append adds it (untimed)
			if _, err := fx.store.AppendHistory(ctx, id, msg); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := fx.store.AppendHistory(ctx, ids[i%len(ids)], msg); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

var seq atomic.Int64 // unique suffixes for new messages and tasks

// benchAppendNew: AppendHistory of a new message (moves the task to the
// head).
func benchAppendNew(b *testing.B, e *env) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=append-new/n=%d", n)
	}, func(b *testing.B, fx *fixture) {
		ctx := context.Background()
		ids := fx.ids(4096, 19)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			msg := &a2a.Message{ID: "bench-" + strconv.FormatInt(seq.Add(1), 10), Role: a2a.MessageRoleUser,
				Parts: a2a.ContentParts{a2a.NewTextPart("follow-up")}}
			if _, err := fx.store.AppendHistory(ctx, ids[i%len(ids)], msg); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// benchReplace: unconditional Replace of a random task with new content,
// which moves it to the head of the list (C1: O(log n) index upkeep);
// then op=replace-notask, the same as the adapter to a2a-go makes it
// (engine.WithoutTask: no copy of the task returned).
func benchReplace(b *testing.B, e *env) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=replace/n=%d", n)
	}, func(b *testing.B, fx *fixture) {
		replaceLoop(b, context.Background(), fx)
		if fx.indexBytes != nil {
			b.ReportMetric(float64(fx.indexBytes["idx_a2a_tasks_updated"]), "idx-updated-bytes")
			b.ReportMetric(float64(fx.indexBytes["idx_a2a_tasks_context_updated"]), "idx-context-bytes")
		}
	})
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=replace-notask/n=%d", n)
	}, func(b *testing.B, fx *fixture) {
		replaceLoop(b, engine.WithoutTask(context.Background()), fx)
	})
}

func replaceLoop(b *testing.B, ctx context.Context, fx *fixture) {
	replaceIDs(b, ctx, fx, fx.ids(4096, 23))
}

// replaceIDs replaces the tasks ids in turn with new content from the
// fixture's pool.
func replaceIDs(b *testing.B, ctx context.Context, fx *fixture, ids []a2a.TaskID) {
	b.ReportAllocs()
	defer reportFaults(b)()
	i := 0
	for b.Loop() {
		if _, err := fx.store.Replace(ctx, fx.task(i, ids[i%len(ids)]), 0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// benchCancel: Cancel of a working task. The pool of tasks is reset to
// working (untimed) whenever it has been used up.
func benchCancel(b *testing.B, e *env) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=cancel/n=%d", n)
	}, func(b *testing.B, fx *fixture) {
		ctx := context.Background()
		pool := fx.ids(min(fx.n, 1024), 29)
		seen := map[a2a.TaskID]bool{}
		uniq := pool[:0]
		for _, id := range pool {
			if !seen[id] {
				seen[id] = true
				uniq = append(uniq, id)
			}
		}
		pool = uniq
		reset := func() {
			for i, id := range pool {
				t := fx.task(i, id)
				t.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: t.Status.Timestamp}
				if _, err := fx.store.Replace(ctx, t, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		reset()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i == len(pool) {
				b.StopTimer()
				reset()
				i = 0
				b.StartTimer()
			}
			if _, err := fx.store.Cancel(ctx, pool[i]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// benchCreate: Create of a new task. The created tasks are deleted after
// the loop (untimed), so the fixture keeps its size.
func benchCreate(b *testing.B, e *env) {
	forSizes(b, e, func(n int) string {
		return fmt.Sprintf("op=create/n=%d", n)
	}, createLoop)
}

func createLoop(b *testing.B, fx *fixture) {
	ctx := context.Background()
	var made []a2a.TaskID
	b.ReportAllocs()
	for b.Loop() {
		id := a2a.TaskID("bench-new-" + strconv.FormatInt(seq.Add(1), 10))
		if _, err := fx.store.Create(ctx, fx.task(len(made), id)); err != nil {
			b.Fatal(err)
		}
		made = append(made, id)
	}
	for _, id := range made {
		if err := fx.store.Delete(ctx, id); err != nil && !errors.Is(err, engine.ErrNotFound) {
			b.Fatal(err)
		}
	}
}
