package bench

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"golang.org/x/sync/errgroup"

	"github.com/a2astore/a2astore/engine"
)

// BenchmarkStatusPage is C7's pair: pages filtered by a rare state, alone
// and with an owner (every list under OwnerPolicy), by context with an
// owner and by context with a state, against the unfiltered first page, on
// every backend, named
//
//	BenchmarkStatusPage/backend=B/n=N/filter=F[/deep]
//
// Each size loads its own store (statusTask, settle): the rare tasks are the
// oldest, so a page of them without a status-ordered index walks every
// other task, and every filtered page holds a full page (PageSize tasks)
// like the unfiltered one, so the ratio compares equal work. "deep" starts
// from the token of the filtered traversal's middle page. examined/page is
// what C7 bounds: PageSize+1 on memory and Pebble (PostgreSQL reports the
// rows returned; its plans are checked by pgstore's TestStatusPlans). A
// context+state page may read the context's tasks (C7). Figures for the
// results page come from a quiet machine only.
func BenchmarkStatusPage(b *testing.B) {
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			e := be.setup(b)
			for _, n := range sizes() {
				b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
					s := loadStatusFixture(b, e, n)
					benchStatusFilters(b, s)
					if e.pool != nil {
						reportIndexBytes(b, e, n)
					}
				})
			}
		})
	}
}

// statusFilters are BenchmarkStatusPage's filters; statusFixture gives each
// at least two full pages.
var statusFilters = []struct {
	name string
	req  engine.ListRequest
}{
	{"none", engine.ListRequest{}},
	{"status", engine.ListRequest{Status: a2a.TaskStateInputRequired}},
	{"owner+status", engine.ListRequest{Owner: "owner-00", Status: a2a.TaskStateInputRequired}},
	{"context+owner", engine.ListRequest{ContextID: "ctx-00", Owner: "owner-00"}},
	{"context+status", engine.ListRequest{ContextID: "ctx-00", Status: a2a.TaskStateInputRequired}},
}

func benchStatusFilters(b *testing.B, s engine.OwnerStore) {
	for _, f := range statusFilters {
		b.Run("filter="+f.name, func(b *testing.B) {
			benchList(b, s, func(int) *engine.ListRequest { r := f.req; return &r })
		})
		if f.name == "none" || f.name == "context+status" {
			continue
		}
		b.Run("filter="+f.name+"/deep", func(b *testing.B) {
			r := f.req
			r.PageToken = middleToken(b, s, r)
			benchList(b, s, func(int) *engine.ListRequest { r := r; return &r })
		})
	}
}

// middleToken pages through req's traversal and returns the token of a
// middle page that is full.
func middleToken(b *testing.B, s engine.Store, req engine.ListRequest) string {
	var tokens []string
	for {
		resp, err := s.List(context.Background(), &req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.NextPageToken == "" {
			break
		}
		tokens = append(tokens, resp.NextPageToken)
		req.PageToken = resp.NextPageToken
	}
	if len(tokens) == 0 {
		b.Fatalf("filter %+v: one page only", req)
	}
	return tokens[(len(tokens)-1)/2]
}

// statusTask is the fixture's i-th task of n. The oldest rare ones
// (rare = max(n/1000, 4 pages)) are input-required: the first half of them
// owned by owner-00 in ctx-00 (so the owner's and the context's filtered
// pages lie behind the other owners' rare tasks), the rest spread over the
// other owners and contexts. The others are working or completed, of 20
// owners in 50 contexts.
func statusTask(i, n int) (*a2a.Task, string) {
	rare := max(n/1000, 4*engine.DefaultPageSize)
	owner, ctx := i%20, i%50
	state := a2a.TaskStateWorking
	switch {
	case i < rare/2:
		owner, ctx, state = 0, 0, a2a.TaskStateInputRequired
	case i < rare:
		owner, ctx, state = 1+i%19, 1+i%49, a2a.TaskStateInputRequired
	case i%3 == 0:
		state = a2a.TaskStateCompleted
	}
	t := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("status-%08d", i)), ContextID: fmt.Sprintf("ctx-%02d", ctx), Status: a2a.TaskStatus{State: state}}
	return t, fmt.Sprintf("owner-%02d", owner)
}

// loadStatusFixture opens a store of e and loads BenchmarkStatusPage's n
// tasks into it: the rare ones first, one at a time (they are the oldest),
// then the rest (from 8 goroutines where e loads in parallel); the store is
// closed when b ends.
func loadStatusFixture(b *testing.B, e *env, n int) engine.OwnerStore {
	b.Helper()
	st, err := e.open(b, fmt.Sprintf("status_%d", n), nil)
	if err != nil {
		b.Fatal(err)
	}
	if c, ok := st.(io.Closer); ok {
		b.Cleanup(func() { c.Close() })
	}
	s, ok := st.(engine.OwnerStore)
	if !ok {
		b.Fatalf("%T is not an engine.OwnerStore", st)
	}
	rare := max(n/1000, 4*engine.DefaultPageSize)
	load := func(from, to, step int) error {
		for i := from; i < to; i += step {
			t, owner := statusTask(i, n)
			if _, err := s.CreateOwned(context.Background(), t, owner); err != nil {
				return err
			}
		}
		return nil
	}
	if err := load(0, rare, 1); err != nil {
		b.Fatal(err)
	}
	workers := 1
	if e.parallel {
		workers = 8
	}
	var g errgroup.Group
	for w := range workers {
		g.Go(func() error { return load(rare+w, n, workers) })
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	settle(b, e, st, fmt.Sprintf("status_%d", n))
	return s
}

// settle brings a freshly loaded store to the state a steady write rate
// leaves it in, so that every page of a group is measured against the
// same store: PostgreSQL's table vacuumed and analyzed (what autovacuum
// does; the status plans do not depend on it: TestStatusPlans) and
// checkpointed, Pebble's LSM compacted (no compaction left running under
// the measurements).
func settle(b *testing.B, e *env, st engine.Store, name string) {
	b.Helper()
	ctx := context.Background()
	if e.pool != nil {
		// CHECKPOINT: the pages VACUUM dirtied are written now, not by the
		// checkpointer under the first measurement.
		for _, stmt := range []string{"VACUUM ANALYZE " + pgTableNamed(name), "CHECKPOINT"} {
			if _, err := e.pool.Exec(ctx, stmt); err != nil {
				b.Fatal(err)
			}
		}
	}
	if c, ok := st.(interface{ Compact(context.Context) error }); ok {
		if err := c.Compact(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// reportIndexBytes runs BenchmarkStatusPage's …/indexes leaf on
// PostgreSQL: the bytes per task of each ordering index of the fixture of
// n tasks, so that the status indexes' space is read beside the global
// and context indexes'.
func reportIndexBytes(b *testing.B, e *env, n int) {
	b.Run("indexes", func(b *testing.B) {
		sizes, err := pgIndexBytes(e.pool, pgTableNamed(fmt.Sprintf("status_%d", n)))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
		}
		for name, unit := range map[string]string{
			"idx_a2a_tasks_updated":             "updated-B/task",
			"idx_a2a_tasks_context_updated":     "context-B/task",
			"idx_a2a_tasks_state_updated":       "state-B/task",
			"idx_a2a_tasks_owner_state_updated": "owner+state-B/task",
		} {
			b.ReportMetric(float64(sizes[name])/float64(n), unit)
		}
	})
}
