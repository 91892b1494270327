package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
)

// The tests of reads from hot standbys (L10) run on pgtest's replicated
// cluster, one at a time. Routing is forced (RouteReads) where a test
// needs a read on a given standby whatever its health; SetGates(false)
// shows what the same test sees without the mechanism.

// openReplicated opens a store on primary reading from standbys.
func openReplicated(t testing.TB, primary string, standbys []string, wait time.Duration) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), primary, pgstore.Options{
		Replicas: standbys, ReplicaWait: wait, ReplicaCheckInterval: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// routeCycle routes the store's reads to targets in turn (-1: the
// primary), starting with the first.
func routeCycle(s *pgstore.Store, targets ...int) {
	var n atomic.Int64
	s.RouteReads(func() int { return targets[(n.Add(1)-1)%int64(len(targets))] })
}

// traversal is what one walk of every task saw.
type traversal struct {
	seen  map[a2a.TaskID]int // times each ID was returned
	pages int
	err   error // a broken L7 rule other than counts (cursor order)
}

// traverse walks every task with page size n.
func traverse(ctx context.Context, s engine.Store, n int) traversal {
	tr := traversal{seen: map[a2a.TaskID]int{}}
	req := engine.ListRequest{PageSize: n}
	var last *engine.Cursor
	for {
		resp, err := s.List(ctx, &req)
		if err != nil {
			tr.err = err
			return tr
		}
		tr.pages++
		for i, tk := range resp.Tasks {
			c := resp.TaskCursors[i]
			if last != nil && c.Compare(*last) <= 0 {
				tr.err = fmt.Errorf("page %d: cursor %v does not descend after %v", tr.pages, c, *last)
			}
			last = &c
			tr.seen[tk.ID]++
		}
		if resp.NextPageToken == "" {
			return tr
		}
		req.PageToken = resp.NextPageToken
	}
}

// check returns the L7 violations of tr: an ID twice, or a task of want
// (existed at the start, not mutated since) not exactly once.
func (tr traversal) check(want []a2a.TaskID) []string {
	var v []string
	if tr.err != nil {
		v = append(v, tr.err.Error())
	}
	for id, n := range tr.seen {
		if n > 1 {
			v = append(v, fmt.Sprintf("%s returned %d times", id, n))
		}
	}
	for _, id := range want {
		if tr.seen[id] != 1 {
			v = append(v, fmt.Sprintf("%s (not mutated) returned %d times", id, tr.seen[id]))
		}
	}
	return v
}

// createN creates tasks t000 … in context c.
func createN(t testing.TB, s engine.Store, n int) []a2a.TaskID {
	t.Helper()
	var ids []a2a.TaskID
	for i := range n {
		id := fmt.Sprintf("t%03d", i)
		must(t)(s.Create(context.Background(), task(id, "c", a2a.TaskStateWorking)))
		ids = append(ids, a2a.TaskID(id))
	}
	return ids
}

// L7 over pages that alternate between a current standby and one whose
// replay is paused. Every sixth task is moved to the front after the
// pause: the current standby lists it first, the paused one still at its
// old place. Without the gates a moved task comes back in a later page
// (the control: the test reaches what it guards); with them the pages
// routed to the paused standby wait, fall back to the primary, and every
// task is returned exactly once.
func TestStandbyTraversalPaused(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	s := openReplicated(t, p, sbs, 20*time.Millisecond)
	ids := createN(t, s, 60)
	set.WaitReplayed(t)
	set.Standby(0).PauseReplay(t)
	for i := 0; i < len(ids); i += 6 {
		must(t)(s.Replace(ctx, task(string(ids[i]), "c", a2a.TaskStateCompleted), 0))
	}
	set.WaitReplayed(t) // standby 1 has the moves; standby 0 is paused
	for _, gates := range []bool{false, true} {
		s.SetGates(gates)
		routeCycle(s, 1, 0) // page 1 from the current standby
		tr := traverse(ctx, s, 10)
		v := tr.check(ids)
		switch {
		case !gates && len(v) == 0:
			t.Fatalf("without gates, %d pages from a paused and a current standby broke no L7 rule: the test does not reach the mechanism", tr.pages)
		case !gates:
			t.Logf("without gates (control): %d violations, e.g. %s", len(v), v[0])
		case len(v) > 0:
			t.Fatalf("with gates: %d L7 violations: %v", len(v), v)
		}
	}
	st := s.ReplicaStats()
	if st.Fallbacks[pgstore.ReasonCatchup] == 0 || st.Standbys[1].Reads == 0 {
		t.Fatalf("pages routed to the paused standby should have fallen back after waiting, the others run on the current one: %+v", st)
	}
}

// L7 while writers move, create and delete tasks, over pages cycling
// through a paused standby, a current one and the primary, from two store
// instances: each traversal returns no ID twice, in descending cursor
// order, and every task that existed at its start and that no writer
// touched since exactly once. Randomized: the seed is logged.
func TestStandbyTraversalUnderChurn(t *testing.T) {
	seed, _ := testRand(t)
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	readers := []*pgstore.Store{openReplicated(t, p, sbs, 5*time.Millisecond), openReplicated(t, p, sbs, 5*time.Millisecond)}
	writer := openAgain(t, p)
	ids := createN(t, writer, 120)
	set.WaitReplayed(t)
	set.Standby(0).PauseReplay(t)
	routeCycle(readers[0], 1, 0, -1)
	routeCycle(readers[1], 0, 1, -1)

	// A writer marks the ID it writes while holding writing (shared), so
	// a traversal's start (exclusive) sees no write in flight: the tasks
	// listed then and not marked since are the ones L7 says it must
	// return exactly once.
	var writing sync.RWMutex
	var mu sync.Mutex
	touched := map[a2a.TaskID]bool{}
	stop := churning(ctx, seed, writer, func(rng *rand.Rand, write func(a2a.TaskID) error) error {
		id := a2a.TaskID(fmt.Sprintf("t%03d", rng.IntN(len(ids)+20)))
		writing.RLock()
		defer writing.RUnlock()
		mu.Lock()
		touched[id] = true
		mu.Unlock()
		return write(id)
	})
	for i := range 12 {
		writing.Lock()
		clear(touched)
		before := existing(t, writer)
		writing.Unlock()
		tr := traverse(ctx, &alternating{stores: []engine.Store{readers[0], readers[1]}}, 15)
		mu.Lock()
		var want []a2a.TaskID
		for _, id := range before {
			if !touched[id] {
				want = append(want, id)
			}
		}
		mu.Unlock()
		if v := tr.check(want); len(v) > 0 {
			t.Fatalf("seed %d, traversal %d (%d pages): %v", seed, i, tr.pages, v)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("seed %d: writer: %v", seed, err)
	}
}

// churning starts three writers, each calling churnOne through next (which
// picks the ID) until the returned stop is called; stop returns the first
// writer's error.
func churning(ctx context.Context, seed uint64, s *pgstore.Store, next func(*rand.Rand, func(a2a.TaskID) error) error) (stop func() error) {
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			write := func(id a2a.TaskID) error { return churnOne(ctx, s, rng, id) }
			for !done.Load() {
				if err := next(rng, write); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	return func() error {
		done.Store(true)
		wg.Wait()
		close(errs)
		return <-errs
	}
}

// churnOne moves (Replace), cancels, deletes or (re)creates task id.
func churnOne(ctx context.Context, s *pgstore.Store, rng *rand.Rand, id a2a.TaskID) error {
	var err error
	switch rng.IntN(5) {
	case 0, 1:
		_, err = s.Replace(ctx, task(string(id), "c", churnStates[rng.IntN(len(churnStates))]), 0)
	case 2:
		_, err = s.Cancel(ctx, id)
	case 3:
		err = s.Delete(ctx, id)
	default:
		_, err = s.Create(ctx, task(string(id), "c", a2a.TaskStateSubmitted))
	}
	for _, ok := range []error{engine.ErrNotFound, engine.ErrAlreadyExists, engine.ErrNotCancelable} {
		if errors.Is(err, ok) {
			return nil
		}
	}
	return err
}

// existing lists every task ID on the primary (a store without standbys).
func existing(t testing.TB, s *pgstore.Store) []a2a.TaskID {
	t.Helper()
	tr := traverse(context.Background(), s, 100)
	if tr.err != nil {
		t.Fatal(tr.err)
	}
	var ids []a2a.TaskID
	for id := range tr.seen {
		ids = append(ids, id)
	}
	return ids
}

// Read-your-writes across instances (L10): a task created through one
// store is found by Get and by List (with an exact total) through
// another whose reads go to a standby with replay paused — they wait,
// then run on the primary. Without the gates the paused standby answers
// not found (the control).
func TestStandbyReadYourWrites(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	writer := openAgain(t, p)
	reader := openReplicated(t, p, sbs, 10*time.Millisecond)
	set.Standby(0).PauseReplay(t)
	reader.RouteReads(func() int { return 0 })
	for i, gates := range []bool{false, true} {
		reader.SetGates(gates)
		id := fmt.Sprint("ryw", i)
		must(t)(writer.Create(ctx, task(id, "ryw", a2a.TaskStateSubmitted)))
		_, getErr := reader.Get(ctx, a2a.TaskID(id))
		resp, err := reader.List(ctx, &engine.ListRequest{ContextID: "ryw", IncludeTotalSize: true})
		if err != nil {
			t.Fatal(err)
		}
		listed := len(resp.Tasks) == i+1 && resp.TotalSize == i+1
		switch {
		case !gates && getErr == nil && listed:
			t.Fatal("without gates the paused standby found the new task: the test does not reach the mechanism")
		case gates && (getErr != nil || !listed):
			t.Fatalf("with gates: Get %v; List %d tasks, total %d, want %d", getErr, len(resp.Tasks), resp.TotalSize, i+1)
		}
	}
	if st := reader.ReplicaStats(); st.Fallbacks[pgstore.ReasonCatchup] < 2 {
		t.Fatalf("the reads should have fallen back after waiting for the paused standby: %+v", st)
	}
}

// Read-your-writes for a writer with synchronous_commit off, through a
// current standby: its commit is visible (and acknowledged) before its
// WAL is flushed (by the WAL writer, or by another session's synchronous
// commit, as a background writer makes here), so a read waits for the
// primary's insert position, not the flushed one. The control shows the
// premise: right after such a commit (nothing else writing) the flush
// position is short of the insert position, so a read gated on the flush
// position could miss the acknowledged task.
func TestStandbyReadYourAsyncWrites(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	writer := openAgain(t, p+" options='-c synchronous_commit=off'")
	short := 0
	for i := range 20 {
		must(t)(writer.Create(ctx, task(fmt.Sprint("pre", i), "a", a2a.TaskStateSubmitted)))
		var behind bool
		if err := writer.Pool().QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn()`).Scan(&behind); err != nil {
			t.Fatal(err)
		}
		if behind {
			short++
		}
	}
	if short == 0 {
		t.Fatal("the flush position covered every asynchronous commit at once: the test does not reach the guard")
	}
	t.Logf("control: after %d of 20 asynchronous commits the flush position was short of the insert position", short)

	background := openAgain(t, p)
	reader := openReplicated(t, p, sbs, time.Second)
	reader.RouteReads(func() int { return 1 })
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if _, err := background.Create(ctx, task(fmt.Sprint("bg", i), "bg", a2a.TaskStateSubmitted)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer wg.Wait()
	defer stop.Store(true)
	for i := range 40 {
		id := a2a.TaskID(fmt.Sprint("async", i))
		must(t)(writer.Create(ctx, task(string(id), "a", a2a.TaskStateSubmitted)))
		must(t)(reader.Get(ctx, id))
	}
	if st := reader.ReplicaStats(); st.Standbys[1].Reads == 0 {
		t.Fatalf("no read ran on the standby: %+v", st)
	}
}

// L5, L8 on standbys: writers create and delete fewer than a page of
// tasks while readers list them with totals, each read on the next of
// standby 1, standby 2 and the primary; count and page come from one
// snapshot wherever they run, so each total equals the page it came with
// (a recount in the same snapshot).
func TestStandbyTotals(t *testing.T) {
	seed, _ := testRand(t)
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	writer := openAgain(t, p)
	reader := openReplicated(t, p, sbs, 50*time.Millisecond)
	routeCycle(reader, 0, 1, -1)
	stop := churning(ctx, seed, writer, func(rng *rand.Rand, write func(a2a.TaskID) error) error {
		return write(a2a.TaskID(fmt.Sprint("t", rng.IntN(80))))
	})
	for i := range 150 {
		req := engine.ListRequest{ContextID: "c", PageSize: 100, IncludeTotalSize: true}
		if i%2 == 1 {
			req.Status = a2a.TaskStateCanceled
		}
		resp, err := reader.List(ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.TotalSize != len(resp.Tasks) {
			t.Fatalf("seed %d: list %d: total %d with a page of %d (L8)", seed, i, resp.TotalSize, len(resp.Tasks))
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("seed %d: writer: %v", seed, err)
	}
	st := reader.ReplicaStats()
	if st.Standbys[0].Reads+st.Standbys[1].Reads == 0 {
		t.Fatalf("no list ran on a standby: %+v", st)
	}
	t.Logf("reads: %d primary, %d and %d on the standbys", st.PrimaryReads, st.Standbys[0].Reads, st.Standbys[1].Reads)
}

// A standby killed mid-traversal: the pages routed to it fail over to the
// primary (every task still exactly once), the health monitor marks it
// disconnected, reads routed by health go to the other standby, and once
// it is started again it is found healthy and serves reads again.
func TestStandbyKilledMidTraversal(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	s := openReplicated(t, p, sbs, 50*time.Millisecond)
	ids := createN(t, s, 50)
	set.WaitReplayed(t)
	s.RouteReads(func() int { return 0 })
	req := engine.ListRequest{PageSize: 10}
	seen := traversal{seen: map[a2a.TaskID]int{}}
	for page := 0; ; page++ {
		if page == 2 {
			set.Standby(0).Kill(t)
		}
		resp, err := s.List(ctx, &req)
		if err != nil {
			t.Fatalf("page %d: %v", page+1, err)
		}
		for _, tk := range resp.Tasks {
			seen.seen[tk.ID]++
		}
		if req.PageToken = resp.NextPageToken; req.PageToken == "" {
			break
		}
	}
	if v := seen.check(ids); len(v) > 0 {
		t.Fatalf("L7: %v", v)
	}
	if st := s.ReplicaStats(); st.Standbys[0].Reads != 2 || st.Fallbacks[pgstore.ReasonError] == 0 {
		t.Fatalf("2 pages should have run on standby 1, the rest failed over: %+v", st)
	}
	s.RouteReads(nil)
	waitFor(t, "standby 1 marked disconnected", func() bool {
		return s.ReplicaStats().Standbys[0].Reason == pgstore.ReasonDisconnected
	})
	before := s.ReplicaStats()
	for range 4 {
		must(t)(s.Get(ctx, ids[0]))
	}
	after := s.ReplicaStats()
	if after.Standbys[0].Reads != before.Standbys[0].Reads || after.Standbys[1].Reads != before.Standbys[1].Reads+4 {
		t.Fatalf("reads by health should all go to standby 2 while standby 1 is down: before %+v, after %+v", before, after)
	}
	set.Standby(0).Start(t)
	waitFor(t, "standby 1 healthy again", func() bool { return s.ReplicaStats().Standbys[0].Healthy })
	set.WaitReplayed(t)
	for range 2 {
		must(t)(s.Get(ctx, ids[0]))
	}
	if again := s.ReplicaStats(); again.Standbys[0].Reads == after.Standbys[0].Reads {
		t.Fatalf("standby 1 serves no read after coming back: %+v", again)
	}
}

// The health monitor finds a paused standby (reason paused: reads skip
// it, as fallbacks when it is the only one), a resumed one healthy, and
// reports the lag of the paused one growing while the primary writes.
func TestStandbyHealth(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	s := openReplicated(t, p, sbs[:1], 50*time.Millisecond)
	waitFor(t, "standby healthy", func() bool { return s.ReplicaStats().Standbys[0].Healthy })
	set.Standby(0).PauseReplay(t)
	waitFor(t, "paused standby found paused", func() bool { return s.ReplicaStats().Standbys[0].Reason == pgstore.ReasonPaused })
	n := 0
	waitFor(t, "lag of the paused standby reported", func() bool {
		must(t)(s.Create(ctx, task(fmt.Sprint("h", n), "h", a2a.TaskStateSubmitted)))
		n++
		st := s.ReplicaStats().Standbys[0]
		return st.LagBytes > 0 && st.Lag > 0
	})
	must(t)(s.Get(ctx, "h0"))
	if st := s.ReplicaStats(); st.Fallbacks[pgstore.ReasonPaused] == 0 || st.Standbys[0].Reads != 0 {
		t.Fatalf("a read with the only standby paused should fall back for that reason: %+v", st)
	}
	set.Standby(0).ResumeReplay(t)
	waitFor(t, "resumed standby healthy", func() bool { return s.ReplicaStats().Standbys[0].Healthy })
	set.WaitReplayed(t)
	must(t)(s.Get(ctx, "h0"))
	if st := s.ReplicaStats(); st.Standbys[0].Reads != 1 {
		t.Fatalf("the resumed standby should serve again: %+v", st)
	}
}

// A standby ahead of the primary: with synchronous replication a commit
// is replayed on a standby before the primary marks it visible (here the
// quorum's other standby is paused, so the commit waits there). A
// traversal whose first page comes from the standby that has the commit
// (a task moved to the front) and whose later pages fall back to the
// primary must not find the task again at its old place. Without the
// primary gate it does (the control); with it the primary pages wait
// until the commit is visible there.
func TestStandbyAheadOfPrimary(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	s := openReplicated(t, p, sbs, 50*time.Millisecond)
	ids := createN(t, s, 40)
	set.WaitReplayed(t)
	set.SetSynchronous(t, "ANY 2 (standby0, standby1)")
	writer := openAgain(t, p+" options='-c synchronous_commit=remote_apply'")
	t.Cleanup(func() { set.Standby(1).ResumeReplay(t) }) // before the writer closes: its pool waits for the commit
	standby0, primary := connect(t, sbs[0]), connect(t, p)
	for round, gates := range []bool{false, true} {
		moved := ids[round] // among the oldest: its old place is on a later page
		set.Standby(1).PauseReplay(t)
		done := make(chan error, 1)
		go func() {
			_, err := writer.Replace(ctx, task(string(moved), "c", a2a.TaskStateCompleted), 0)
			done <- err
		}()
		waitFor(t, "the move replayed on standby 1", func() bool {
			var rev int64
			err := standby0.QueryRow(ctx, "SELECT revision FROM a2a_tasks WHERE id = $1", string(moved)).Scan(&rev)
			return err == nil && rev == 2
		})
		var rev int64
		if err := primary.QueryRow(ctx, "SELECT revision FROM a2a_tasks WHERE id = $1", string(moved)).Scan(&rev); err != nil || rev != 1 {
			t.Fatalf("the primary already shows the move (revision %d, %v): the test does not reach the window", rev, err)
		}
		s.SetGates(gates)
		routeCycle(s, append([]int{0}, slices.Repeat([]int{-1}, 20)...)...)
		result := make(chan traversal, 1)
		retries := s.ReplicaStats().PrimaryRetries
		go func() { result <- traverse(ctx, s, 10) }()
		if gates {
			waitFor(t, "a primary page held by its gate", func() bool { return s.ReplicaStats().PrimaryRetries > retries })
		}
		var tr traversal
		if !gates {
			tr = <-result
		}
		set.Standby(1).ResumeReplay(t)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if gates {
			tr = <-result
		}
		v := tr.check(slices.DeleteFunc(slices.Clone(ids), func(id a2a.TaskID) bool { return id == ids[0] || id == ids[1] }))
		switch {
		case !gates && len(v) == 0:
			t.Fatal("without gates the primary pages did not repeat the moved task: the test does not reach the mechanism")
		case !gates:
			t.Logf("without gates (control): %v", v)
		case len(v) > 0:
			t.Fatalf("with gates: %v", v)
		}
	}
}

// loadgen's live checks (L7 over every traversal, internal errors) with
// traversal-under-churn on two store instances reading from two standbys,
// every call going to the other instance than the one before: no
// violation, and standbys served reads.
func TestStandbysUnderLoad(t *testing.T) {
	seed, _ := testRand(t)
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	s1, s2 := openReplicated(t, p, sbs, 0), openReplicated(t, p, sbs, 0)
	loadTwo(t, seed, 2000, s1, s2)
	var standby int64
	for _, s := range []*pgstore.Store{s1, s2} {
		st := s.ReplicaStats()
		standby += st.Standbys[0].Reads + st.Standbys[1].Reads
		t.Logf("reads: primary %d, standbys %d and %d; fallbacks %v", st.PrimaryReads, st.Standbys[0].Reads, st.Standbys[1].Reads, st.Fallbacks)
	}
	if standby == 0 {
		t.Fatal("no read ran on a standby")
	}
}

// loadgen's live checks with every other read of two instances routed to
// a standby whose replay is paused (after the schema, before the run's
// initial load) and the others to a current one. Without the gates loadgen finds
// violations (the control); with them, none.
func TestStandbysUnderLoadPaused(t *testing.T) {
	seed, _ := testRand(t)
	set := pgtest.Replicated(t)
	for _, gates := range []bool{false, true} {
		p, sbs := set.DSN(t)
		s1, s2 := openReplicated(t, p, sbs, 5*time.Millisecond), openReplicated(t, p, sbs, 5*time.Millisecond)
		for _, s := range []*pgstore.Store{s1, s2} {
			s.SetGates(gates)
			routeCycle(s, 0, 1)
		}
		set.WaitReplayed(t) // the schema is on both standbys
		set.Standby(0).PauseReplay(t)
		if !gates {
			res := runTwo(t, seed, 1000, s1, s2)
			if res.Err() == nil {
				t.Fatal("without gates loadgen found no violation with a paused standby serving half the reads: the test does not reach the mechanism")
			}
			t.Logf("without gates (control): %v", res.Err())
			set.Standby(0).ResumeReplay(t)
			continue
		}
		loadTwo(t, seed, 1000, s1, s2)
		if st := s1.ReplicaStats(); st.Fallbacks[pgstore.ReasonCatchup] == 0 || st.Standbys[1].Reads == 0 {
			t.Fatalf("reads routed to the paused standby should fall back, the others run on the current one: %+v", st)
		}
	}
}

// A standby that lags by seconds (recovery_min_apply_delay) while the
// primary writes is found lagging and skipped: reads run on the other
// standby, or count as lagging fallbacks when it is the only one.
func TestStandbyLagging(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	s, err := pgstore.Open(ctx, p, pgstore.Options{Replicas: sbs[:1], ReplicaWait: 20 * time.Millisecond,
		ReplicaMaxLag: 200 * time.Millisecond, ReplicaCheckInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	set.Standby(0).SetApplyDelay(t, 3*time.Second)
	n := 0
	waitFor(t, "the delayed standby found lagging", func() bool {
		must(t)(s.Create(ctx, task(fmt.Sprint("lag", n), "lag", a2a.TaskStateSubmitted)))
		n++
		return s.ReplicaStats().Standbys[0].Reason == pgstore.ReasonLagging
	})
	must(t)(s.Get(ctx, "lag0"))
	st := s.ReplicaStats()
	if st.Fallbacks[pgstore.ReasonLagging] == 0 || st.Standbys[0].Lag < 200*time.Millisecond {
		t.Fatalf("a read with the only standby lagging should fall back for that reason: %+v", st)
	}
	t.Logf("lag %v (%d bytes) after %d writes", st.Standbys[0].Lag, st.Standbys[0].LagBytes, n)
}

// The task log stays on the primary: with the only standby paused, a log
// entry written a moment ago is read at once, and no read of the log
// counts as a read of the store (on a standby or as a fallback).
func TestStandbyReadLogOnPrimary(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	s, err := pgstore.Open(ctx, p, pgstore.Options{Replicas: sbs[:1], Log: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	set.Standby(0).PauseReplay(t)
	s.RouteReads(func() int { return 0 })
	must(t)(s.Create(ctx, task("log1", "c", a2a.TaskStateSubmitted)))
	before := s.ReplicaStats()
	entries, err := s.ReadLog(ctx, "log1", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	after := s.ReplicaStats()
	if len(entries) != 1 || after.Standbys[0].Reads != before.Standbys[0].Reads || after.PrimaryReads != before.PrimaryReads {
		t.Fatalf("ReadLog: %d entries (want 1); stats before %+v, after %+v", len(entries), before, after)
	}
}

// A read whose target WAL sits unflushed on the primary: a commit with
// synchronous_commit off, with the WAL writer's round set to 10 s, leaves
// its record in a partial WAL page no one flushes, so no standby can
// replay it. The read nudges the primary to flush and runs on the standby
// at once; without the nudge (the control) it waits its full ReplicaWait
// and falls back.
func TestStandbyNudge(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	set.SetPrimary(t, "wal_writer_delay", "10s")
	set.SetPrimary(t, "autovacuum", "off") // its commits would flush the WAL too
	// No roll-ups: their synchronous commits would flush the WAL.
	writer, err := pgstore.Open(ctx, p+" options='-c synchronous_commit=off'", pgstore.Options{CountRollupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	reader, err := pgstore.Open(ctx, p, pgstore.Options{Replicas: sbs, ReplicaWait: 500 * time.Millisecond, CountRollupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	reader.RouteReads(func() int { return 0 })
	for i, nudges := range []bool{false, true} {
		reader.SetNudges(nudges)
		set.WaitReplayed(t)
		id := a2a.TaskID(fmt.Sprint("nudge", i))
		must(t)(writer.Create(ctx, task(string(id), "n", a2a.TaskStateSubmitted)))
		before := reader.ReplicaStats()
		start := time.Now()
		must(t)(reader.Get(ctx, id))
		took := time.Since(start)
		after := reader.ReplicaStats()
		onStandby := after.Standbys[0].Reads > before.Standbys[0].Reads
		switch {
		case !nudges && onStandby:
			t.Fatalf("without nudges the standby served a task whose commit was never flushed (%v): the test does not reach the guard", took)
		case !nudges:
			t.Logf("without nudges (control): fell back after %v", took)
		case !onStandby || after.Nudges == before.Nudges:
			t.Fatalf("with nudges: standby read %t, nudges %d → %d, %v", onStandby, before.Nudges, after.Nudges, took)
		default:
			t.Logf("with nudges: on the standby after %v", took)
		}
	}
}

// A store with standbys on a role that cannot see other sessions' wait
// events (no superuser, no pg_read_all_stats) would run a primary gate
// that sees nothing: New refuses it, and accepts it once the role has
// pg_read_all_stats.
func TestStandbyRolePrivilege(t *testing.T) {
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	admin := connect(t, p)
	role := fmt.Sprintf("reader_%d", time.Now().UnixNano())
	db := p[strings.LastIndex(p, "dbname=")+len("dbname="):]
	for _, stmt := range []string{"CREATE ROLE " + role + " LOGIN", "GRANT ALL ON SCHEMA public TO " + role, "GRANT ALL ON DATABASE " + db + " TO " + role} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = admin.Exec(context.Background(), "DROP ROLE "+role)
	})
	dsn := strings.Replace(p, "user=postgres", "user="+role, 1)
	if _, err := pgstore.Open(ctx, dsn, pgstore.Options{Replicas: sbs}); !errors.Is(err, pgstore.ErrReplicaPrivilege) {
		t.Fatalf("Open without pg_read_all_stats: %v, want ErrReplicaPrivilege", err)
	}
	if _, err := admin.Exec(ctx, "GRANT pg_read_all_stats TO "+role); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.Open(ctx, dsn, pgstore.Options{Replicas: sbs})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
