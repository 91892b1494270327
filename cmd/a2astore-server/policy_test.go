package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/taskiter"
)

// as returns a context whose calls carry caller as the identity header.
func as(ctx context.Context, caller string) context.Context {
	return a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{"X-A2astore-Caller": {caller}})
}

// TestOwnerPolicy (A6, A2 through the wire): with -policy owner each caller
// lists and reads only the tasks it created, on every transport; another
// caller's task is "not found", exactly like a missing one; totals count
// visible tasks only.
func TestOwnerPolicy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg config) {
		cfg.Policy, cfg.CallerHeader = "owner", "X-A2astore-Caller"
		requireOwners(t, cfg)
		cfg.Agent = agentConfig{StatusUpdates: 1}
		ts := startServer(t, cfg)

		owned := map[string]map[a2a.TaskID]bool{"alice": {}, "bob": {}}
		for i := range 9 {
			caller := []string{"alice", "bob", "alice"}[i%3]
			c := ts.clients[transports[i%len(transports)]]
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("mine"))
			res, err := c.SendMessage(as(t.Context(), caller), &a2a.SendMessageRequest{Message: msg})
			if err != nil {
				t.Fatalf("%s SendMessage: %v", caller, err)
			}
			owned[caller][res.(*a2a.Task).ID] = true
		}

		for caller, mine := range owned {
			for _, tr := range transports {
				ctx := as(t.Context(), caller)
				got := map[a2a.TaskID]bool{}
				for task, err := range taskiter.All(ctx, ts.clients[tr], &a2a.ListTasksRequest{PageSize: 2}) {
					if err != nil {
						t.Fatalf("%s over %s: %v", caller, tr, err)
					}
					if !mine[task.ID] {
						t.Errorf("%s over %s sees %s, which it does not own", caller, tr, task.ID)
					}
					got[task.ID] = true
				}
				if len(got) != len(mine) {
					t.Errorf("%s over %s sees %d tasks, owns %d", caller, tr, len(got), len(mine))
				}
				resp, err := ts.clients[tr].ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 1})
				if err != nil || resp.TotalSize != len(mine) {
					t.Errorf("%s over %s: totalSize %v (%v), want %d", caller, tr, resp, err, len(mine))
				}
				for other, theirs := range owned {
					if other == caller {
						continue
					}
					for id := range theirs {
						if _, err := ts.clients[tr].GetTask(ctx, &a2a.GetTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotFound) {
							t.Errorf("%s GetTask of %s's task over %s: %v, want not found", caller, other, tr, err)
						}
						break
					}
				}
			}
		}

		// No identity: the caller must authenticate, on every transport.
		for _, tr := range transports {
			resp, err := ts.clients[tr].ListTasks(t.Context(), &a2a.ListTasksRequest{})
			if !errors.Is(err, a2a.ErrUnauthenticated) {
				t.Errorf("anonymous list over %s: %+v, %v; want unauthenticated", tr, resp, err)
			}
		}
	})
}

// requireOwners skips the test when cfg's backend does not record task
// owners (-policy owner refuses it: TestOwnerPolicyNeedsOwners).
func requireOwners(t *testing.T, cfg config) {
	t.Helper()
	if !recordsOwners(t, cfg) {
		t.Skipf("backend %s does not record task owners (not an engine.OwnerStore): -policy owner refuses it", cfg.Backend)
	}
}

// recordsOwners reports whether cfg's backend records task owners.
func recordsOwners(t testing.TB, cfg config) bool {
	t.Helper()
	b, err := openBackend(t.Context(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Store.Close()
	_, ok := b.Store.(engine.OwnerStore)
	return ok
}

// TestOwnerPolicyNeedsOwners: -policy owner over a store that does not
// record owners refuses to start, rather than serve a store on which
// every SendMessage fails.
func TestOwnerPolicyNeedsOwners(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	cfg := config{Backend: "custom", Policy: "owner", CallerHeader: "X-A2astore-Caller"}
	if _, err := applyPolicy(&cfg, struct{ engine.Store }{mem}); !errors.Is(err, errNoOwners) {
		t.Fatalf("applyPolicy over a store without owners: %v, want errNoOwners", err)
	}
	if s, err := applyPolicy(&cfg, mem); err != nil || s == nil {
		t.Fatalf("applyPolicy over memstore: %v", err)
	}
}

// seedForeign creates n small tasks owned by owner in contextID directly in
// the backend, numbered from first.
func seedForeign(t testing.TB, ts *testServer, first, n int, owner, contextID string) {
	t.Helper()
	os, ok := ts.backend.(engine.OwnerStore)
	if !ok {
		t.Fatalf("backend %T does not record owners", ts.backend)
	}
	for i := first; i < first+n; i++ {
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("foreign-%07d", i)), ContextID: contextID,
			Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
		if _, err := os.CreateOwned(t.Context(), task, owner); err != nil {
			t.Fatal(err)
		}
	}
}

// listCost is what the store lists of the server have cost so far: index
// entries examined (summed over every page) and entries counted for totals.
func listCost(t testing.TB, ts *testServer) (examined, counted float64) {
	t.Helper()
	mfs, err := ts.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "a2astore_store_list_examined_entries":
			examined = mf.GetMetric()[0].GetHistogram().GetSampleSum()
		case "a2astore_store_list_counted_entries_total":
			counted = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return examined, counted
}

// TestOwnerListCost (O6 through the wire, #15): under -policy owner a
// caller with one task gets the same ListTasks answers at the same store
// cost — at most its one index entry examined, and counted only for a
// total by context and state, which memstore counts among the caller's
// own entries — whether the store holds no other task or 100,000 of
// another caller's, also when it filters by that caller's busy context
// (the timing oracle of #15: that page used to scan every task of the
// context).
func TestOwnerListCost(t *testing.T) {
	if testing.Short() {
		t.Skip("100k tasks")
	}
	cfg := config{Backend: "mem", Policy: "owner", CallerHeader: "X-A2astore-Caller", Agent: agentConfig{StatusUpdates: 1}}
	ts := startServer(t, cfg)
	alice := as(t.Context(), "alice")
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("mine"))
	msg.ContextID = "ctx-alice"
	if _, err := ts.clients[transports[0]].SendMessage(alice, &a2a.SendMessageRequest{Message: msg}); err != nil {
		t.Fatal(err)
	}
	reqs := []*a2a.ListTasksRequest{{}, {ContextID: "ctx-bob"}, {ContextID: "ctx-alice", Status: a2a.TaskStateCompleted}}
	answers := func() []string {
		var out []string
		for _, tr := range transports {
			for _, req := range reqs {
				e0, c0 := listCost(t, ts)
				resp, err := ts.clients[tr].ListTasks(alice, req)
				if err != nil {
					t.Fatalf("%s %+v: %v", tr, req, err)
				}
				e1, c1 := listCost(t, ts)
				if e1-e0 > 1 || c1-c0 > 1 {
					t.Errorf("%s %+v: the list examined %v entries and counted %v, want alice's one at most", tr, req, e1-e0, c1-c0)
				}
				raw, _ := json.Marshal(resp)
				out = append(out, fmt.Sprintf("%s examined=%v counted=%v", raw, e1-e0, c1-c0))
			}
		}
		return out
	}
	before := answers()
	seedForeign(t, ts, 0, 100_000, "bob", "ctx-bob")
	if after := answers(); !slices.Equal(before, after) {
		t.Fatalf("alice's answers changed with 100k foreign tasks:\n%q\n%q", before, after)
	}
	if resp, err := ts.clients[transports[0]].ListTasks(as(t.Context(), "bob"), &a2a.ListTasksRequest{PageSize: 1}); err != nil || resp.TotalSize != 100_000 {
		t.Fatalf("bob's total: %v, %v", resp, err)
	}
}
