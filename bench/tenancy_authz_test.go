package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// BenchmarkTenancyAuthz (#15): per-owner pages and totals through the authz
// dispatcher, on every backend that records owners (others are skipped),
// at n = 1e5 and 1e6 (the sizes of the run from 1e5 up; BENCH_FULL=1 adds
// 1e6; a run whose sizes are all smaller uses them) with 1,000 owners
// (Zipf: owner=large holds the most tasks, owner=small the fewest):
//
//	op=page/n=N/page=50/policy=allowall                  unscoped first page, dispatcher pass-through: the baseline
//	op=page-owner/n=N/page=50/owner=O/policy=owner       the owner's first page (OwnerPolicy: one store call on the owner index)
//	op=total-owner/n=N/owner=O/policy=owner              the owner's total (page of 1; the store's counters)
//	op=list-owner/n=N/page=50/owner=O/policy=owner       page and total, as every ListTasks asks
//
// Targets: page-owner (owner=large) at most 1.5x page; page and total of
// an owner independent of n. Each owner op also runs its peer, the owner
// policy before #15, with /impl=metadata-scan appended: the owner kept in
// task metadata, lists not narrowed, so its pages scan past other owners'
// tasks and its totals scan every task (expected at least 100x slower for
// owner=small). Every page is full-projection, as the wire asks for.
func BenchmarkTenancyAuthz(b *testing.B) {
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			e := be.setup(b)
			for _, n := range tenancySizes() {
				fx := ownedFixture(b, e, n)
				if fx == nil {
					b.Skipf("%s does not record task owners", e.name)
				}
				benchTenancy(b, fx)
			}
		})
	}
}

// tenancySizes are the sizes of the run from 1e5 up, or all of them when
// every size is smaller.
func tenancySizes() []int {
	var out []int
	for _, n := range sizes() {
		if n >= 1e5 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return sizes()
	}
	return out
}

func benchTenancy(b *testing.B, fx *owned) {
	n := fx.n
	b.Run(fmt.Sprintf("op=page/n=%d/page=50/policy=allowall", n), func(b *testing.B) {
		req := &engine.ListRequest{PageSize: 50, IncludeArtifacts: true}
		benchList(b, authz.New(fx.store, authz.AllowAll{}), func(int) *engine.ListRequest { return req })
	})
	for _, op := range []struct {
		name string
		req  engine.ListRequest
	}{
		{"page-owner/n=%d/page=50", engine.ListRequest{PageSize: 50, IncludeArtifacts: true}},
		{"total-owner/n=%d", engine.ListRequest{PageSize: 1, IncludeTotalSize: true}},
		{"list-owner/n=%d/page=50", engine.ListRequest{PageSize: 50, IncludeArtifacts: true, IncludeTotalSize: true}},
	} {
		for _, who := range []struct{ name, owner string }{{"large", fx.large}, {"small", fx.small}} {
			name := fmt.Sprintf("op="+op.name+"/owner=%s/policy=owner", n, who.name)
			for _, peer := range []struct {
				suffix string
				policy authz.Policy
			}{{"", authz.OwnerPolicy{}}, {"/impl=metadata-scan", metadataOwner{}}} {
				b.Run(name+peer.suffix, func(b *testing.B) {
					req := op.req
					s := asCaller{Store: authz.New(fx.store, peer.policy), caller: who.owner}
					benchList(b, s, func(int) *engine.ListRequest { return &req })
					b.ReportMetric(float64(fx.tasks[who.owner]), "owner-tasks")
				})
			}
		}
	}
}

// asCaller runs every List of the store as caller.
type asCaller struct {
	engine.Store
	caller string
}

func (a asCaller) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	return a.Store.List(authz.WithCaller(ctx, a.caller), req)
}

// metadataOwnerKey is where the pre-#15 owner policy kept the owner.
const metadataOwnerKey = "a2astore.owner"

// metadataOwner is the owner policy before #15, kept here as a benchmark
// peer: the owner is in the task's metadata, ScopeTaskList cannot narrow
// by owner, so every List scans (light batches) and every total scans
// every task.
type metadataOwner struct{}

func (metadataOwner) ScopeTaskList(ctx context.Context, req engine.ListRequest) (engine.ListRequest, error) {
	if _, ok := authz.CallerFrom(ctx); !ok {
		return req, authz.ErrEmptyScope
	}
	return req, nil
}

func (metadataOwner) CanAccessTask(ctx context.Context, t *a2a.Task) (bool, error) {
	caller, ok := authz.CallerFrom(ctx)
	owner, _ := t.Metadata[metadataOwnerKey].(string)
	return ok && owner == caller, nil
}

func (metadataOwner) Projection() engine.Projection { return engine.ProjectionLight }

// owned is a fixture of n generated tasks (the shared fixture's generator
// and clock) owned by 1,000 owners drawn from a Zipf distribution (s =
// 1.1, fixed seed). Each task's owner is recorded by the store
// (CreateOwned) and, for the metadata-scan peer only, in its metadata.
type owned struct {
	n            int
	store        engine.Store
	tasks        map[string]int // tasks per owner
	large, small string         // the owners with the most and the fewest tasks
}

var (
	ownedMu       sync.Mutex
	ownedFixtures = map[string]*owned{} // by backend and n
)

// ownedFixture returns the fixture of size n on e's backend, loading it on
// first use, or nil when the backend does not record owners. It lives
// until the backend's group ends.
func ownedFixture(b *testing.B, e *env, n int) *owned {
	ownedMu.Lock()
	defer ownedMu.Unlock()
	key := fmt.Sprint(e.name, n)
	if fx := ownedFixtures[key]; fx != nil {
		return fx
	}
	start := time.Now()
	clock := &taskgen.StepClock{Start: 1_700_000_000_000_000, Every: 4}
	// A name of its own, so the shared fixtures' stores (same directory
	// or schema naming) are never reused.
	name := fmt.Sprintf("n%d_authz", n)
	s, err := e.open(b, name, clock.Now)
	if err != nil {
		b.Fatal(err)
	}
	ostore, ok := s.(engine.OwnerStore)
	if !ok {
		if c, ok := s.(io.Closer); ok {
			c.Close()
		}
		return nil
	}
	fx := &owned{n: n, store: s, tasks: map[string]int{}}
	b.Cleanup(func() {
		ownedMu.Lock()
		defer ownedMu.Unlock()
		delete(ownedFixtures, key)
		if c, ok := s.(io.Closer); ok {
			c.Close()
		}
	})
	zipf := rand.NewZipf(rand.New(rand.NewPCG(21, 1)), 1.1, 1, 999)
	owners := make([]string, n)
	for i := range owners {
		owners[i] = fmt.Sprintf("owner-%03d", zipf.Uint64())
		fx.tasks[owners[i]]++
	}
	if err := loadOwned(e, ostore, owners); err != nil {
		b.Fatal(err)
	}
	if e.pool != nil {
		if _, err := e.pool.Exec(context.Background(), "VACUUM ANALYZE "+pgTableNamed(name)); err != nil {
			b.Fatal(err)
		}
	}
	for o, k := range fx.tasks {
		if fx.large == "" || k > fx.tasks[fx.large] || (k == fx.tasks[fx.large] && o < fx.large) {
			fx.large = o
		}
		if fx.small == "" || k < fx.tasks[fx.small] || (k == fx.tasks[fx.small] && o < fx.small) {
			fx.small = o
		}
	}
	fmt.Fprintf(os.Stderr, "bench: owned fixture backend=%s n=%d loaded in %v; %d owners, large %s (%d tasks), small %s (%d)\n",
		e.name, n, time.Since(start).Round(time.Millisecond), len(fx.tasks), fx.large, fx.tasks[fx.large], fx.small, fx.tasks[fx.small])
	ownedFixtures[key] = fx
	return fx
}

// loadOwned creates task i of the shared fixture's generator owned by
// owners[i], from four goroutines when the backend loads in parallel.
func loadOwned(e *env, s engine.OwnerStore, owners []string) error {
	type item struct {
		task  *a2a.Task
		owner string
	}
	workers := 1
	if e.parallel {
		workers = 4
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		items = make(chan item, 256)
	)
	for range workers {
		wg.Go(func() {
			for it := range items {
				if _, err := s.CreateOwned(context.Background(), it.task, it.owner); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	gen := taskgen.New(taskgen.Shape{})
	for i, owner := range owners {
		t := gen.Task(i)
		t.Metadata = maps.Clone(t.Metadata)
		if t.Metadata == nil {
			t.Metadata = map[string]any{}
		}
		t.Metadata[metadataOwnerKey] = owner
		items <- item{t, owner}
	}
	close(items)
	wg.Wait()
	return first
}
