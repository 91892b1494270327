package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"

	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/taskgen"
	"github.com/a2astore/a2astore/pebblestore"
)

// BenchmarkScale is #55's cost curve: how a page, a total and a write
// cost as the store grows (`make results-scale`, results/scale.sh, at
// BENCH_SIZES=1000,…,10000000), on every backend, named
//
//	BenchmarkScale/backend=B/op=O/n=N[/…]
//
// with the shared suite's keys. Its fixture (fixtureKey.scale) is
// taskgen's mix — sizes, Zipf contexts and states — with 1,000
// Zipf-skewed owners and a rare state (scaleRare), written through the
// store's bulk path (engine.Importer, SPEC X1) when it has one and by
// CreateOwned otherwise (as the suite's fixtures: from 4 goroutines where
// the backend loads in parallel), then settled (PostgreSQL
// vacuumed and checkpointed, Pebble compacted). Operations: op=footprint
// (bytes per task, the load's rate, mem's RSS, Pebble's write
// amplification and compaction debt), the light and full page from a
// random cursor with the suite's floors (benchPage), pages filtered by
// the rare state alone and with an owner, the keyset page at depth 50 and
// 90 % (and PostgreSQL's OFFSET at 50 %), the first page with its total
// (no filter, by context, owner or state; C4), then Replace and Create.
// The contract's claim is that none of them grows with n (C1–C4, C7).
func BenchmarkScale(b *testing.B) {
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			e := be.setup(b)
			e.scale = true
			for _, op := range scaleOps {
				op(b, e)
			}
		})
	}
}

var scaleOps = []func(b *testing.B, e *env){
	benchScaleFootprint,
	benchPage,
	benchScaleFiltered,
	benchScaleDepth,
	benchScaleTotal,
	benchReplace,
	benchCreate,
}

// scaleRareState is the state of the rare tasks; taskgen never draws it.
const scaleRareState = a2a.TaskStateAuthRequired

// scaleRareCount is how many of n tasks are rare: 0.1 %, and never fewer
// than two full pages and one (so the filtered pages compare a full page
// at every n: at 1e3 and 1e4 the rare tasks are more than 0.1 %).
func scaleRareCount(n int) int { return max(n/1000, 2*engine.DefaultPageSize+1) }

// scaleRare reports whether task i of n is rare: evenly spread over the
// list, so a page of them without a state index walks n/rare tasks per
// rare one.
func scaleRare(i, n int) bool { return i%(n/scaleRareCount(n)) == 0 }

// scaleOwner is the busiest owner; half of the rare tasks are its own.
const scaleOwner = "user-0000"

// scaleOwners returns the owners of a scale fixture: drawOwners' skew,
// with every second rare task the busiest owner's.
func scaleOwners(n int) []string {
	owners := drawOwners(n, benchOwners)
	rare := 0
	for i := range owners {
		if scaleRare(i, n) {
			if rare%2 == 0 {
				owners[i] = scaleOwner
			}
			rare++
		}
	}
	return owners
}

// scaleBatch is how many tasks one Import call writes.
const scaleBatch = 10000

// importScale writes a scale fixture's tasks through the store's bulk
// path (engine.Importer) in batches of scaleBatch: task i with revision 1
// at the clock's next time, the order Create would have given it, and
// its owner of scaleOwners.
func importScale(ctx context.Context, imp engine.Importer, fx *fixture, gen *taskgen.Gen, clock *taskgen.StepClock,
	progress func(done int)) error {
	owners := scaleOwners(fx.n)
	batch := make([]engine.StoredTask, 0, scaleBatch)
	for i := 0; i < fx.n; i += scaleBatch {
		batch = batch[:0]
		for j := i; j < min(i+scaleBatch, fx.n); j++ {
			t := fx.key.task(gen, j)
			batch = append(batch, engine.StoredTask{Record: engine.Record{
				Task: t, Revision: 1, Owner: owners[j],
				Cursor: engine.Cursor{UpdatedAt: clock.Now(), ID: t.ID},
			}})
		}
		if err := imp.Import(ctx, batch); err != nil {
			return err
		}
		progress(i + len(batch))
	}
	return nil
}

// loadProgress returns the progress report of a scale fixture's load:
// called with the tasks written so far, it prints them, the time and the
// rate to stderr at every tenth of the load.
func loadProgress(e *env, fx *fixture) func(done int) {
	start := time.Now()
	reported := 0
	return func(done int) {
		if done*10/fx.n == reported*10/fx.n && done != fx.n {
			return
		}
		reported = done
		el := time.Since(start)
		fmt.Fprintf(os.Stderr, "bench: loading backend=%s %s: %d/%d (%d%%) in %v, %.0f tasks/s\n",
			e.name, fx.key.name(), done, fx.n, done*100/fx.n, el.Round(time.Millisecond), float64(done)/el.Seconds())
	}
}

// settleScale brings a loaded scale fixture to rest and records what its
// load left: PostgreSQL vacuumed, analyzed and checkpointed (settle);
// Pebble's compaction debt, then its LSM compacted, the write
// amplification of the load and the compaction, and its disk usage split
// into live sstables, write-ahead log and obsolete files (per task);
// mem's resident bytes.
func settleScale(ctx context.Context, e *env, fx *fixture) error {
	if e.pool != nil {
		for _, stmt := range []string{"VACUUM ANALYZE " + pgTableNamed(fx.key.name()), "CHECKPOINT"} {
			if _, err := e.pool.Exec(ctx, stmt); err != nil {
				return err
			}
		}
	}
	if p, ok := fx.store.(*pebblestore.Store); ok {
		fx.extra["debt-B"] = float64(p.Metrics().Compact.EstimatedDebt)
		if err := p.Compact(ctx); err != nil {
			return err
		}
		m := p.Metrics()
		total := m.Total()
		fx.extra["write-amp"] = total.WriteAmp()
		// What DiskSpaceUsage (the footprint) is made of: the live
		// sstables, the write-ahead log (live and kept for recycling),
		// files compacted away but not yet deleted (docs/capacity.md).
		n := float64(fx.n)
		fx.extra["sst-B/task"] = float64(m.Table.Local.LiveSize) / n
		fx.extra["wal-B/task"] = float64(m.WAL.PhysicalSize+m.WAL.ObsoletePhysicalSize) / n
		fx.extra["obsolete-B/task"] = float64(m.Table.Local.ObsoleteSize+m.Table.Local.ZombieSize) / n
	}
	if e.name == "mem" {
		fx.extra["rss-B/task"] = float64(residentBytes()-int64(fx.extra["rss-before"])) / float64(fx.n)
	}
	delete(fx.extra, "rss-before")
	return nil
}

// benchScaleFootprint (op=footprint) reports the fixture's bytes per
// task (mem: live heap; pebble: the compacted LSM on disk; pg: table,
// TOAST and indexes) and the load's rate and time, beside the figures
// settleScale recorded. It times nothing.
func benchScaleFootprint(b *testing.B, e *env) {
	forSizes(b, e, func(n int) string { return fmt.Sprintf("op=footprint/n=%d", n) }, func(b *testing.B, fx *fixture) {
		for b.Loop() {
		}
		b.ReportMetric(fx.bytesPerTask, "bytes/task")
		b.ReportMetric(fx.loaded.Seconds(), "load-s")
		b.ReportMetric(float64(fx.n)/fx.loaded.Seconds(), "load-tasks/s")
		for unit, v := range fx.extra {
			b.ReportMetric(v, unit)
		}
	})
}

// benchScaleFiltered: the first light page of the rare state (C7: a
// page's cost), alone and with the busiest owner.
func benchScaleFiltered(b *testing.B, e *env) {
	for _, f := range []struct {
		name string
		req  engine.ListRequest
	}{
		{"status", engine.ListRequest{Status: scaleRareState}},
		{"owner+status", engine.ListRequest{Owner: scaleOwner, Status: scaleRareState}},
	} {
		forSizes(b, e, func(n int) string {
			return fmt.Sprintf("op=page-filtered/n=%d/page=50/filter=%s", n, f.name)
		}, func(b *testing.B, fx *fixture) {
			req := f.req
			req.PageSize, req.Projection = 50, engine.ProjectionLight
			benchList(b, fx.store, func(int) *engine.ListRequest { return &req })
		})
	}
}

// benchScaleDepth: the light keyset page at depth 50 and 90 % (C2), and
// on pg the OFFSET page at 50 % (the old scheme, benchPGOffset).
func benchScaleDepth(b *testing.B, e *env) {
	for _, depth := range []int{50, 90} {
		keysetDepth(b, e, depth)
	}
	if e.name == "pg" {
		benchPGOffset(b, e, 50)
	}
}

// benchScaleTotal: the first light page of 50 with its total (C4), with
// no filter, by the hottest context, by the busiest owner and by a
// common state.
func benchScaleTotal(b *testing.B, e *env) {
	for _, f := range []struct {
		name string
		req  engine.ListRequest
	}{
		{"none", engine.ListRequest{}},
		{"context", engine.ListRequest{ContextID: taskgen.ContextID(0)}},
		{"owner", engine.ListRequest{Owner: scaleOwner}},
		{"state", engine.ListRequest{Status: a2a.TaskStateWorking}},
	} {
		forSizes(b, e, func(n int) string {
			return fmt.Sprintf("op=page-total/n=%d/page=50/filter=%s", n, f.name)
		}, func(b *testing.B, fx *fixture) {
			req := f.req
			req.PageSize, req.Projection, req.IncludeTotalSize = 50, engine.ProjectionLight, true
			benchList(b, fx.store, func(int) *engine.ListRequest { return &req })
		})
	}
}

// residentBytes returns the process's resident set size (VmRSS), after a
// collection that returns freed memory to the system; 0 when unknown.
func residentBytes() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(rest, []byte("kB")))), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// TestScaleFixture: a scale fixture holds what BenchmarkScale says, on
// every backend, by its bulk path or by CreateOwned: n tasks, the rare
// state on scaleRareCount of them (at least two pages and one), half of
// those the busiest owner's, each filter's total exact.
func TestScaleFixture(t *testing.T) {
	const n = 1000
	owners := scaleOwners(n)
	var rare, ownRare, own int
	for i := range n {
		if owners[i] == scaleOwner {
			own++
		}
		if scaleRare(i, n) {
			rare++
			if owners[i] == scaleOwner {
				ownRare++
			}
		}
	}
	if rare < 2*engine.DefaultPageSize+1 || ownRare < engine.DefaultPageSize+1 {
		t.Fatalf("%d rare tasks, %d of them the busiest owner's: fewer than a full page", rare, ownRare)
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			e := be.setup(t)
			e.scale = true
			fx := e.fixture(t, n)
			for _, c := range []struct {
				req  engine.ListRequest
				want int
			}{
				{engine.ListRequest{}, n},
				{engine.ListRequest{Status: scaleRareState}, rare},
				{engine.ListRequest{Owner: scaleOwner, Status: scaleRareState}, ownRare},
				{engine.ListRequest{Owner: scaleOwner}, own},
			} {
				req := c.req
				req.IncludeTotalSize, req.PageSize = true, 1
				resp, err := fx.store.List(context.Background(), &req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.TotalSize != c.want {
					t.Errorf("filter %+v: total %d, want %d", c.req, resp.TotalSize, c.want)
				}
			}
		})
	}
}
