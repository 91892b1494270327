package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/internal/taskgen"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/pgstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// sizes are the fixture sizes: 1e3..1e5 by default, 1e6 too with
// BENCH_FULL=1; BENCH_SIZES=1000,10000 overrides both.
func sizes() []int {
	if v := os.Getenv("BENCH_SIZES"); v != "" {
		var ns []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 200 {
				panic("bench: BENCH_SIZES wants a comma-separated list of sizes >= 200, got " + v)
			}
			ns = append(ns, n)
		}
		return ns
	}
	if os.Getenv("BENCH_FULL") != "" {
		return []int{1e3, 1e4, 1e5, 1e6}
	}
	return []int{1e3, 1e4, 1e5}
}

// env is one backend's resources for one benchmark group (backend=…): where
// its stores live and how to open one. Fixtures are built lazily, once per
// size, and live until the group ends.
type env struct {
	name string
	// open returns an empty store for the fixture named name
	// (fixtureKey.name).
	open func(tb testing.TB, name string, clock engine.Clock) (engine.Store, error)
	// parallel loads the fixture from several goroutines (pg: one round
	// trip per Create).
	parallel bool
	// footprint returns the store's bytes per task right after loading.
	footprint func(fx *fixture) float64
	// scale makes fixture return BenchmarkScale's fixtures (fixtureKey.scale).
	scale bool

	pool *pgxpool.Pool // pg only

	mu       sync.Mutex
	fixtures map[fixtureKey]*fixture
	// noOwners is set once the backend's store turned out not to be an
	// engine.OwnerStore: owned fixtures are skipped.
	noOwners bool
}

// fixtureKey names a fixture: n tasks, without owners or with owners (a
// Zipf draw over that many) recorded by CreateOwned; realistic tasks, or
// light ones (lightTask).
type fixtureKey struct {
	n, owners int
	light     bool
	// scale: BenchmarkScale's fixture (scale_test.go): taskgen's tasks,
	// 1,000 Zipf-skewed owners and a rare state, bulk-loaded.
	scale bool
}

// name is the key's name in paths and schemas: n100000, n100000_owners1000,
// n100000_light.
func (k fixtureKey) name() string {
	name := fmt.Sprintf("n%d", k.n)
	if k.owners > 0 {
		name += fmt.Sprintf("_owners%d", k.owners)
	}
	if k.light {
		name += "_light"
	}
	if k.scale {
		name += "_scale"
	}
	return name
}

// task returns the fixture's i-th task: gen.Task(i), or lightTask(i).
func (k fixtureKey) task(gen *taskgen.Gen, i int) *a2a.Task {
	if k.light {
		return lightTask(i)
	}
	t := gen.Task(i)
	if k.scale && scaleRare(i, k.n) {
		t.Status.State = scaleRareState
	}
	return t
}

// lightTask is the i-th light task (#16): a 36-byte ID, one of 16
// contexts (each task's context its own string, as a decoded request
// carries it), the working state and a status timestamp; nothing else.
func lightTask(i int) *a2a.Task {
	ts := time.Unix(1_700_000_000+int64(i), 0).UTC()
	return &a2a.Task{
		ID:        a2a.TaskID(fmt.Sprintf("%08d-0000-4000-8000-%012d", i, i)),
		ContextID: fmt.Sprintf("ctx-%02d", i%16),
		Status:    a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts},
	}
}

// backends lists the backends of the shared suite. setup runs once per
// group with the group's b, so temporary directories and databases are
// removed when the group ends.
var backends = []struct {
	name  string
	setup func(b testing.TB) *env
}{
	{"mem", memEnv},
	{"pebble", pebbleEnv},
	{"pg", pgEnv},
}

func memEnv(tb testing.TB) *env {
	var before runtime.MemStats
	e := &env{name: "mem"}
	e.open = func(tb testing.TB, _ string, clock engine.Clock) (engine.Store, error) {
		runtime.GC()
		runtime.ReadMemStats(&before)
		return memstore.New(memstore.Options{Clock: clock}), nil
	}
	// Heap growth over the load, after a collection: the store's resident
	// bytes (the generated tasks are garbage by then).
	e.footprint = func(fx *fixture) float64 {
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(fx.n)
	}
	return e.init(tb)
}

func pebbleEnv(tb testing.TB) *env {
	dir := tb.TempDir()
	e := &env{name: "pebble"}
	e.open = func(tb testing.TB, name string, clock engine.Clock) (engine.Store, error) {
		// NoSync: the mutations measured here are the store's work, not the
		// disk's fsync latency (pebblestore's own benchmarks measure Sync
		// from 1 and 8 writers).
		return pebblestore.Open(dir+"/"+name, pebblestore.Options{
			Clock: clock, NoSync: true, Logger: pebblelog.Quiet{},
		})
	}
	// Disk space (sstables, WAL, manifest) after the load.
	e.footprint = func(fx *fixture) float64 {
		return float64(fx.store.(*pebblestore.Store).Metrics().DiskSpaceUsage()) / float64(fx.n)
	}
	return e.init(tb)
}

func pgEnv(tb testing.TB) *env {
	dsn := pgtest.DSN(tb)
	cfg, err := pgstore.PoolConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	e := &env{name: "pg", pool: pool, parallel: true}
	// PostgreSQL has no injectable clock: the store stamps clock_timestamp().
	e.open = func(tb testing.TB, name string, _ engine.Clock) (engine.Store, error) {
		return pgstore.New(context.Background(), pool, pgstore.Options{Schema: pgSchemaNamed(name)})
	}
	// Table, TOAST and every index, after VACUUM ANALYZE.
	e.footprint = func(fx *fixture) float64 {
		var size int64
		if err := pool.QueryRow(context.Background(), "SELECT pg_total_relation_size($1::regclass)",
			pgTableNamed(fx.key.name())).Scan(&size); err != nil {
			tb.Fatal(err)
		}
		return float64(size) / float64(fx.n)
	}
	return e.init(tb)
}

func pgSchema(n int) string { return pgSchemaNamed(fixtureKey{n: n}.name()) }
func pgTable(n int) string  { return pgTableNamed(fixtureKey{n: n}.name()) }

func pgSchemaNamed(name string) string { return "bench_" + name }
func pgTableNamed(name string) string {
	return pgx.Identifier{pgSchemaNamed(name), "a2a_tasks"}.Sanitize()
}

func (e *env) init(tb testing.TB) *env {
	e.fixtures = map[fixtureKey]*fixture{}
	tb.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.releaseLocked(func(fixtureKey) bool { return true })
	})
	return e
}

// releaseLocked closes and forgets the fixtures whose key drop accepts.
// REQUIRES: e.mu held.
func (e *env) releaseLocked(drop func(fixtureKey) bool) {
	for k, fx := range e.fixtures {
		if !drop(k) {
			continue
		}
		if c, ok := fx.store.(io.Closer); ok {
			c.Close()
		}
		delete(e.fixtures, k)
	}
}

// fixture is a store holding n generated tasks (internal/taskgen, fixed
// seeds) and what the benchmarks need to know about it.
type fixture struct {
	key   fixtureKey
	n     int
	store engine.Store
	// order is every task's cursor in list order right after loading, and
	// ctx, state, stamp and owner its context, state, status timestamp and
	// owner ("" without).
	order []engine.Cursor
	ctx   []string
	state []a2a.TaskState
	stamp []time.Time
	owner []string
	// bodies is a pool of generated task contents for writes.
	bodies []*a2a.Task
	// bytesPerTask is the store's footprint right after loading.
	bytesPerTask float64
	// loaded is how long the writes of the load took (scale fixtures:
	// the bulk path, shown beside the figures).
	loaded time.Duration
	// extra holds footprint figures by unit (scale fixtures: the
	// process's resident bytes per task on mem; the LSM's write
	// amplification and compaction debt on pebble).
	extra map[string]float64
	// pg only: index sizes in bytes, by name.
	indexBytes map[string]int64
}

// fixture returns the group's fixture of size n, loading it on first use.
func (e *env) fixture(tb testing.TB, n int) *fixture {
	return e.fixtureOf(tb, fixtureKey{n: n, scale: e.scale})
}

// lightFixture returns the group's fixture of n light tasks (lightTask),
// loading it on first use.
func (e *env) lightFixture(tb testing.TB, n int) *fixture {
	return e.fixtureOf(tb, fixtureKey{n: n, light: true})
}

// ownedFixture returns the group's fixture of n tasks with owners, loading
// it on first use after releasing the group's other fixtures (memory: they
// are not used again). It skips tb when the store records no owners.
func (e *env) ownedFixture(tb testing.TB, n int) *fixture {
	return e.fixtureOf(tb, fixtureKey{n: n, owners: benchOwners})
}

func (e *env) fixtureOf(tb testing.TB, k fixtureKey) *fixture {
	e.mu.Lock()
	defer e.mu.Unlock()
	if fx := e.fixtures[k]; fx != nil {
		return fx
	}
	if k.owners > 0 {
		if e.noOwners {
			tb.Skip("the store is not an engine.OwnerStore")
		}
		e.releaseLocked(func(other fixtureKey) bool { return other.owners == 0 })
	}
	start := time.Now()
	fx, err := load(tb, e, k)
	if errors.Is(err, errNoOwners) {
		e.noOwners = true
		tb.Skip("the store is not an engine.OwnerStore")
	}
	if err != nil {
		tb.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "bench: fixture backend=%s %s loaded in %v, %.0f bytes/task\n",
		e.name, k.name(), time.Since(start).Round(time.Millisecond), fx.bytesPerTask)
	e.fixtures[k] = fx
	return fx
}

// errNoOwners is load's report that an owned fixture's store records no
// owners.
var errNoOwners = errors.New("bench: the store is not an engine.OwnerStore")

// benchOwners is how many owners an owned fixture draws from.
const benchOwners = 1000

// drawOwners returns the owners of the n tasks of an owned fixture:
// skewed (Zipf, s = 1.1) over k owners, user-0000 the busiest, from a
// fixed seed.
func drawOwners(n, k int) []string {
	z := rand.NewZipf(rand.New(rand.NewPCG(3, 7)), 1.1, 1, uint64(k-1))
	owners := make([]string, n)
	for i := range owners {
		owners[i] = ownerName(int(z.Uint64()))
	}
	return owners
}

func ownerName(i int) string { return fmt.Sprintf("user-%04d", i) }

// load builds a fixture: n tasks from taskgen's default shape (seed 1:
// Zipf contexts, 3 history messages, one 256-byte artifact), created in
// order under a clock that hands out every timestamp four times (equal
// UpdatedAt runs; pg stamps its own time); with owners, each created by
// CreateOwned for an owner of drawOwners.
func load(tb testing.TB, e *env, k fixtureKey) (*fixture, error) {
	clock := &taskgen.StepClock{Start: 1_700_000_000_000_000, Every: 4}
	s, err := e.open(tb, k.name(), clock.Now)
	if err != nil {
		return nil, err
	}
	n := k.n
	fx := &fixture{key: k, n: n, store: s}
	create := func(ctx context.Context, t *a2a.Task, _ int) error { _, err := s.Create(ctx, t); return err }
	if k.owners > 0 || k.scale {
		owned, ok := s.(engine.OwnerStore)
		if !ok {
			if c, ok := s.(io.Closer); ok {
				c.Close()
			}
			return nil, errNoOwners
		}
		var owners []string
		if k.scale {
			owners = scaleOwners(n)
		} else {
			owners = drawOwners(n, k.owners)
		}
		create = func(ctx context.Context, t *a2a.Task, i int) error {
			_, err := owned.CreateOwned(ctx, t, owners[i])
			return err
		}
	}
	ctx := context.Background()
	gen := taskgen.New(taskgen.Shape{})
	start := time.Now()
	progress := func(int) {}
	if k.scale {
		fx.extra = map[string]float64{"rss-before": float64(residentBytes())}
		progress = loadProgress(e, fx)
	}
	if imp, ok := s.(engine.Importer); ok && k.scale {
		if err := importScale(ctx, imp, fx, gen, clock, progress); err != nil {
			return nil, err
		}
	} else if e.parallel {
		type item struct {
			t *a2a.Task
			i int
		}
		tasks := make(chan item, 256)
		errs := make(chan error, 4)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for it := range tasks {
					if err := create(ctx, it.t, it.i); err != nil {
						errs <- err
						for range tasks {
						}
						return
					}
				}
			})
		}
		for i := range n {
			tasks <- item{k.task(gen, i), i}
			progress(i + 1)
		}
		close(tasks)
		wg.Wait()
		select {
		case err := <-errs:
			return nil, err
		default:
		}
	} else {
		for i := range n {
			if err := create(ctx, k.task(gen, i), i); err != nil {
				return nil, err
			}
			progress(i + 1)
		}
	}
	fx.loaded = time.Since(start)
	if k.scale {
		if err := settleScale(ctx, e, fx); err != nil {
			return nil, err
		}
	} else if e.pool != nil {
		if _, err := e.pool.Exec(ctx, "VACUUM ANALYZE "+pgTableNamed(k.name())); err != nil {
			return nil, err
		}
	}
	fx.bytesPerTask = e.footprint(fx)
	warmHeap()
	if e.pool != nil && k.scale {
		// No creation-sequence column: adding one rewrites the table and
		// every index (minutes at 1e7); the OFFSET peer counts in list
		// order instead (benchPGOffset).
		if fx.indexBytes, err = pgIndexBytes(e.pool, pgTableNamed(k.name())); err != nil {
			return nil, err
		}
	} else if e.pool != nil && k.owners == 0 {
		if err := pgExtras(e.pool, fx); err != nil {
			return nil, err
		}
	}
	// The list order as the store serves it: a light traversal.
	fx.order = make([]engine.Cursor, 0, n)
	req := &engine.ListRequest{PageSize: 100, Projection: engine.ProjectionLight}
	for {
		resp, err := s.List(ctx, req)
		if err != nil {
			return nil, err
		}
		for i, t := range resp.Tasks {
			fx.order = append(fx.order, resp.TaskCursors[i])
			fx.ctx = append(fx.ctx, t.ContextID)
			fx.state = append(fx.state, t.Status.State)
			fx.stamp = append(fx.stamp, *t.Status.Timestamp)
			owner := ""
			if len(resp.TaskOwners) == len(resp.Tasks) {
				owner = resp.TaskOwners[i]
			}
			fx.owner = append(fx.owner, owner)
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	if len(fx.order) != n {
		return nil, fmt.Errorf("traversal saw %d tasks, want %d", len(fx.order), n)
	}
	bg := taskgen.New(taskgen.Shape{Seed: 2})
	for i := range 256 {
		fx.bodies = append(fx.bodies, bg.Task(i))
	}
	return fx, nil
}

// pgExtras records index sizes, then adds what the old scheme needs: a
// creation-sequence column (filled in physical order, which is insertion
// order here) and its index.
func pgExtras(pool *pgxpool.Pool, fx *fixture) error {
	ctx := context.Background()
	var err error
	table := pgTableNamed(fx.key.name())
	if fx.indexBytes, err = pgIndexBytes(pool, table); err != nil {
		return err
	}
	for _, stmt := range []string{
		"ALTER TABLE %s ADD COLUMN created bigserial",
		"CREATE INDEX ON %s (created)",
		"VACUUM ANALYZE %s",
	} {
		if _, err := pool.Exec(ctx, fmt.Sprintf(stmt, table)); err != nil {
			return err
		}
	}
	return nil
}

// positions returns k list positions drawn uniformly (fixed seed) from
// those followed by at least page+1 tasks, so every page is full.
func (fx *fixture) positions(k, page int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 1))
	pos := make([]int, k)
	for i := range pos {
		pos[i] = rng.IntN(max(fx.n-page-1, 1))
	}
	return pos
}

// token is the page token whose page starts at list position i.
func (fx *fixture) token(i int) string {
	if i == 0 {
		return ""
	}
	return engine.EncodeToken(fx.order[i-1])
}

// task returns a write body for id: a pooled generated task, shallow-copied.
func (fx *fixture) task(i int, id a2a.TaskID) *a2a.Task {
	t := *fx.bodies[i%len(fx.bodies)]
	t.ID = id
	return &t
}

// pgIndexBytes returns the size in bytes of each index of table, by name.
func pgIndexBytes(pool *pgxpool.Pool, table string) (map[string]int64, error) {
	rows, err := pool.Query(context.Background(), `SELECT c.relname::text, pg_relation_size(c.oid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = $1::regclass`, table)
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return nil, err
		}
		sizes[name] = size
	}
	return sizes, rows.Err()
}
