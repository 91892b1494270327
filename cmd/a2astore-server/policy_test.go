package main

import (
	"context"
	"errors"
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
	b, err := openBackend(t.Context(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Store.Close()
	if _, ok := b.Store.(engine.OwnerStore); !ok {
		t.Skipf("backend %s does not record task owners (not an engine.OwnerStore): -policy owner refuses it", cfg.Backend)
	}
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
