package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/loadgen/load"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
)

// openAgain opens a second store, with its own pool, on dsn.
func openAgain(t testing.TB, dsn string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var churnStates = []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateFailed}

// churn runs one random write (seeded by rng) on s over a pool of ids
// tasks in a few contexts and owners. Expected refusals (missing task,
// existing task, terminal task) are not errors; the rest are, except when
// tolerate says so.
func churn(ctx context.Context, s *pgstore.Store, rng *rand.Rand, ids int) error {
	id := a2a.TaskID(fmt.Sprint("t", rng.IntN(ids)))
	tk := task(string(id), fmt.Sprint("c", rng.IntN(3)), churnStates[rng.IntN(len(churnStates))])
	var err error
	switch rng.IntN(6) {
	case 0:
		_, err = s.CreateOwned(ctx, tk, fmt.Sprint("o", rng.IntN(3)))
	case 1:
		_, err = s.Create(ctx, tk)
	case 2:
		_, err = s.Replace(ctx, tk, 0)
	case 3:
		_, err = s.Cancel(ctx, id)
	case 4:
		_, err = s.AppendHistory(ctx, id, msg(fmt.Sprint("m", rng.IntN(4)), "x"))
	default:
		err = s.Delete(ctx, id)
	}
	for _, ok := range []error{engine.ErrNotFound, engine.ErrAlreadyExists, engine.ErrNotCancelable} {
		if errors.Is(err, ok) {
			return nil
		}
	}
	return err
}

// L5, L8 with the counters: writers on two pools churn fewer than a page
// of tasks while readers list every shape with totals; since count and
// page come from one snapshot, each total equals the page it came with.
// At the end every counter equals a recount.
func TestCountsConcurrent(t *testing.T) {
	seed, _ := testRand(t)
	s1, dsn := open(t)
	stores := []*pgstore.Store{s1, openAgain(t, dsn)}
	const ids, writers, ops = 90, 6, 150
	ctx := context.Background()
	after := time.Now().Add(-time.Hour)
	shapes := []engine.ListRequest{
		{}, {Status: a2a.TaskStateWorking}, {ContextID: "c1"}, {ContextID: "c1", Status: a2a.TaskStateCompleted},
		{Owner: "o1"}, {Owner: "o1", Status: a2a.TaskStateSubmitted}, {Owner: "o2", ContextID: "c0"},
		{StatusTimestampAfter: &after},
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	errs := make(chan error, writers+2)
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for range ops {
				if err := churn(ctx, stores[w%2], rng, ids); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	var readers sync.WaitGroup
	var lists atomic.Int64
	for r := range 2 {
		readers.Go(func() {
			for i := 0; !stop.Load(); i++ {
				req := shapes[i%len(shapes)]
				req.PageSize, req.IncludeTotalSize = 100, true
				resp, err := stores[r].List(ctx, &req)
				if err != nil {
					errs <- fmt.Errorf("reader: %w", err)
					return
				}
				if resp.TotalSize != len(resp.Tasks) || resp.NextPageToken != "" {
					errs <- fmt.Errorf("%+v: total %d with a page of %d (L8)", req, resp.TotalSize, len(resp.Tasks))
					return
				}
				lists.Add(1)
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("seed %d: %v", seed, err)
	}
	t.Logf("%d checked lists", lists.Load())
	checkShapes(t, s1, connect(t, dsn))
}

// Issue 11: backends killed (pg_terminate_backend) in the middle of writes
// leave the counters exact: a killed transaction's counter changes roll
// back with its rows. Killed are store writers at random points and a
// multi-row UPDATE whose row triggers have already run.
func TestCountsTerminateBackend(t *testing.T) {
	seed, _ := testRand(t)
	ctx := context.Background()
	s, dsn := open(t)
	admin := connect(t, dsn)
	for i := range 60 {
		must(t)(s.CreateOwned(ctx, task(fmt.Sprint("t", i), fmt.Sprint("c", i%3), a2a.TaskStateWorking), fmt.Sprint("o", i%3)))
	}

	// A multi-row UPDATE that has changed (and counted) some rows, then
	// waits for a row another transaction holds.
	holder := connect(t, dsn)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM a2a_tasks WHERE id = 't9' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	updater := connect(t, dsn)
	done := make(chan error, 1)
	go func() {
		_, err := updater.Exec(ctx, `UPDATE a2a_tasks SET state = 'TASK_STATE_FAILED', context_id = 'moved', owner = 'x'`)
		done <- err
	}()
	var pids []int32
	waitFor(t, "the UPDATE to wait for the held row", func() bool {
		pids = blocked(t, admin)
		return len(pids) == 1
	})
	var killed bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pids[0]).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate: %v %v", killed, err)
	}
	if err := <-done; err == nil {
		t.Fatal("killed UPDATE succeeded")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	checkShapes(t, s, admin)

	// Store writers, killed wherever they are.
	var wg sync.WaitGroup
	var stop atomic.Bool
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for !stop.Load() {
				_ = churn(ctx, s, rng, 60) // killed calls fail; that is the point
			}
		})
	}
	kills := 0
	for kills < 20 {
		var pid int32
		err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
  AND query LIKE '%a2a_tasks%' LIMIT 1`).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		kills++
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("seed %d: %d backends killed during writes", seed, kills)
	// A backend picked while active may have finished its call and gone
	// back to the pool idle before it was killed: the pool cannot know
	// that connection is dead until it uses it. Check on fresh ones.
	s.Pool().Reset()
	checkShapes(t, s, admin)
}

// Issue 11: installing the counters on a live table misses no write. A
// table of the previous release is written by raw SQL (as an older
// release's servers would) while several stores start on it at once; the
// first installs the owner column, the indexes and the counters under the
// locks documented in install.go. When the writers stop, every counter
// equals a recount.
func TestInstallRacesWriters(t *testing.T) {
	seed, _ := testRand(t)
	ctx := context.Background()
	dsn, conn, _ := oldReleaseWithOwners(t)
	execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, revision, state)
SELECT 'old' || i, 'c' || (i % 7), 1, 'TASK_STATE_WORKING' FROM generate_series(1, 3000) i`)
	var wg sync.WaitGroup
	var stop atomic.Bool
	var writes atomic.Int64
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Go(func() {
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close(ctx)
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; !stop.Load(); i++ {
				var err error
				switch rng.IntN(3) {
				case 0:
					_, err = c.Exec(ctx, `INSERT INTO a2a_tasks (id, context_id, revision, state) VALUES ($1, $2, 1, 'TASK_STATE_SUBMITTED')`,
						fmt.Sprintf("w%d-%d", w, i), fmt.Sprint("c", rng.IntN(7)))
				case 1:
					_, err = c.Exec(ctx, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED', context_id = $2 WHERE id = $1`,
						fmt.Sprint("old", 1+rng.IntN(3000)), fmt.Sprint("c", rng.IntN(7)))
				default:
					_, err = c.Exec(ctx, `DELETE FROM a2a_tasks WHERE id = $1`, fmt.Sprint("old", 1+rng.IntN(3000)))
				}
				if err != nil {
					errs <- err
					return
				}
				writes.Add(1)
			}
		})
	}
	waitFor(t, "the writers to start", func() bool { return writes.Load() > 100 })
	var starts sync.WaitGroup
	stores := make([]*pgstore.Store, 3)
	openErrs := make([]error, len(stores))
	for i := range stores {
		starts.Go(func() { stores[i], openErrs[i] = pgstore.Open(ctx, dsn, pgstore.Options{}) })
	}
	starts.Wait()
	before := writes.Load()
	waitFor(t, "writes after the install", func() bool { return writes.Load() > before+100 })
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("writer: %v", err)
	}
	for i, err := range openErrs {
		if err != nil {
			t.Fatalf("store %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	t.Logf("seed %d: %d raw writes around the install", seed, writes.Load())
	checkShapes(t, stores[0], conn)
}

// alternating is an engine.Store that sends each call to the next of its
// stores in turn: consecutive pages of one traversal, and consecutive
// writes, go through different pools.
type alternating struct {
	stores []engine.Store
	next   atomic.Uint64
}

func (a *alternating) pick() engine.Store {
	return a.stores[a.next.Add(1)%uint64(len(a.stores))]
}

func (a *alternating) Create(ctx context.Context, t *a2a.Task) (engine.Record, error) {
	return a.pick().Create(ctx, t)
}

func (a *alternating) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return a.pick().Get(ctx, id)
}

func (a *alternating) Replace(ctx context.Context, t *a2a.Task, rev int64) (engine.Record, error) {
	return a.pick().Replace(ctx, t, rev)
}

func (a *alternating) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return a.pick().Cancel(ctx, id)
}

func (a *alternating) AppendHistory(ctx context.Context, id a2a.TaskID, m *a2a.Message) (engine.Record, error) {
	return a.pick().AppendHistory(ctx, id, m)
}

func (a *alternating) Delete(ctx context.Context, id a2a.TaskID) error {
	return a.pick().Delete(ctx, id)
}

func (a *alternating) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	return a.pick().List(ctx, req)
}

// Several application processes on one database: two stores with
// independent pools serve loadgen's traversal-under-churn workload, every
// call (and so every page of a traversal) going to the other pool than
// the one before. Loadgen checks L7 over each traversal; at the end every
// counter equals a recount. (cmd/a2astore-server's TestTwoServers does the
// same with two server processes.)
func TestTwoPoolsUnderLoad(t *testing.T) {
	seed, _ := testRand(t)
	s1, dsn := open(t)
	s2 := openAgain(t, dsn)
	loadTwo(t, seed, 3000, s1, s2)
	checkShapes(t, s1, connect(t, dsn))
}

// loadTwo runs loadgen's traversal-under-churn over s1 and s2 in turn
// (runTwo) and fails t on any violation or when no traversal was checked.
func loadTwo(t *testing.T, seed uint64, ops int64, s1, s2 engine.Store) *load.Result {
	t.Helper()
	res := runTwo(t, seed, ops, s1, s2)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ops, %d traversals of %d pages, %d tasks checked exactly once", res.Total.Count, res.Traversals, res.TraversalPages, res.ExactlyOnce)
	if res.Traversals == 0 || res.ExactlyOnce == 0 {
		t.Fatal("no traversal was checked")
	}
	return res
}

// runTwo runs loadgen's traversal-under-churn, ops operations (a fifth of
// them under -short), each call on the other of s1 and s2 than the one
// before.
func runTwo(t *testing.T, seed uint64, ops int64, s1, s2 engine.Store) *load.Result {
	t.Helper()
	if testing.Short() {
		ops /= 5
	}
	res, err := load.Run(context.Background(), load.Config{
		Store:       &alternating{stores: []engine.Store{s1, s2}},
		Workload:    "traversal-under-churn",
		Concurrency: 6,
		Ops:         ops,
		Initial:     400,
		PageSize:    20,
		Seed:        seed,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
