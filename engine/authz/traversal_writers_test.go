package authz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
)

// TestDispatcherTraversalUnderWriters: traversals through
// the dispatcher's scan path (policies that scan and re-read) and its
// exact path run while writers create, replace, cancel and delete
// "volatile" tasks of both owners. Alice's pages show only her tasks, in
// strictly descending cursors, each at most once, and every "stable" task
// of hers that matches the filters exactly once (L7, A5); a one-page
// answer's total equals its page (L8). Every list path runs: exact
// (OwnerPolicy), inexact owner scope, scanned with light and full
// projections, and scanned admitting everyone. The seed is logged and set
// with -authz.seed.
func TestDispatcherTraversalUnderWriters(t *testing.T) {
	policies := map[string]authz.Policy{
		"owner":            authz.OwnerPolicy{},
		"inexactOwner":     inexactOwner{},
		"scanOwner/light":  scanOwner{proj: engine.ProjectionLight},
		"scanOwner/full":   scanOwner{proj: engine.ProjectionFull},
		"ownedAll/scanned": ownedAll{admitAll},
	}
	for name, pol := range policies {
		t.Run(name, func(t *testing.T) { runDispatcherTraversal(t, pol, name == "ownedAll/scanned") })
	}
}

func runDispatcherTraversal(t *testing.T, pol authz.Policy, everyone bool) {
	seed := seedValue(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	c := storetest.NewManualClock(1_000_000)
	mem := memstore.New(memstore.Options{Clock: c.Now})
	d := authz.New(mem, pol)
	bg := context.Background()
	ctxs := []string{"c1", "c2", "c3"}
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateInputRequired}
	type info struct {
		owner, ctx string
		state      a2a.TaskState
	}
	stable := map[a2a.TaskID]info{}
	var volatile []a2a.TaskID
	for i := range 300 {
		if rng.IntN(3) != 0 {
			c.Advance(1)
		}
		id := a2a.TaskID(fmt.Sprintf("task-%03d", i))
		in := info{[]string{"alice", "bob"}[rng.IntN(2)], ctxs[rng.IntN(3)], states[rng.IntN(3)]}
		if _, err := mem.CreateOwned(bg, &a2a.Task{ID: id, ContextID: in.ctx, Status: a2a.TaskStatus{State: in.state}}, in.owner); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(2) == 0 {
			stable[id] = in
		} else {
			volatile = append(volatile, id)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w+10)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.Advance(r.Int64N(2))
				id := volatile[r.IntN(len(volatile))]
				tk := &a2a.Task{ID: id, ContextID: ctxs[r.IntN(3)], Status: a2a.TaskStatus{State: states[r.IntN(3)]}}
				switch r.IntN(4) {
				case 0:
					_, _ = mem.CreateOwned(bg, tk, []string{"alice", "bob"}[r.IntN(2)])
				case 1:
					_, _ = mem.Replace(bg, tk, 0)
				case 2:
					_, _ = mem.Cancel(bg, id)
				case 3:
					_ = mem.Delete(bg, id)
				}
			}
		}()
	}
	alice := authz.WithCaller(bg, "alice")
	defer func() { close(stop); wg.Wait() }()
	for trav := range 150 {
		req := engine.ListRequest{PageSize: 1 + rng.IntN(20), IncludeTotalSize: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			req.ContextID = ctxs[rng.IntN(3)]
		}
		if rng.IntN(2) == 0 {
			req.Status = states[rng.IntN(3)]
		}
		if rng.IntN(2) == 0 {
			req.Projection = engine.ProjectionLight
		}
		if req.IncludeTotalSize && rng.IntN(2) == 0 {
			req.PageSize = 100
		}
		seen := map[a2a.TaskID]bool{}
		var last *engine.Cursor
		for {
			resp, err := d.List(alice, &req)
			if errors.Is(err, authz.ErrListContention) {
				continue // retry the same page
			}
			if err != nil {
				t.Fatalf("seed %d traversal %d %+v: %v", seed, trav, req, err)
			}
			if req.IncludeTotalSize && req.PageToken == "" && resp.NextPageToken == "" && resp.TotalSize != len(resp.Tasks) {
				t.Errorf("seed %d traversal %d %+v: one-page total %d, page %d", seed, trav, req, resp.TotalSize, len(resp.Tasks))
			}
			for i, tk := range resp.Tasks {
				cur := resp.TaskCursors[i]
				if last != nil && cur.Compare(*last) <= 0 {
					t.Errorf("seed %d traversal %d %+v: cursor %+v not after %+v", seed, trav, req, cur, *last)
				}
				last = &cur
				if seen[tk.ID] {
					t.Errorf("seed %d traversal %d: %q twice", seed, trav, tk.ID)
				}
				seen[tk.ID] = true
				if !everyone && resp.TaskOwners[i] != "alice" {
					t.Fatalf("seed %d: alice sees %q of %q", seed, tk.ID, resp.TaskOwners[i])
				}
				if req.ContextID != "" && tk.ContextID != req.ContextID || req.Status != "" && tk.Status.State != req.Status {
					t.Errorf("seed %d traversal %d %+v: %q does not match (%s %s)", seed, trav, req, tk.ID, tk.ContextID, tk.Status.State)
				}
			}
			if resp.NextPageToken == "" {
				break
			}
			req.PageToken = resp.NextPageToken
		}
		for id, in := range stable {
			if (everyone || in.owner == "alice") && (req.ContextID == "" || req.ContextID == in.ctx) && (req.Status == "" || req.Status == in.state) && !seen[id] {
				t.Errorf("seed %d traversal %d %+v: stable %q missed", seed, trav, req, id)
			}
		}
		if t.Failed() {
			return
		}
	}
}
