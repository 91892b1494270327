package pushdelivery_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/pushdelivery"
)

// pathHits records the revisions posted to each path of a loopback
// receiver.
type pathHits struct {
	mu   sync.Mutex
	revs map[string][]int64
}

func newPathHits(t *testing.T) (*pathHits, string) {
	h := &pathHits{revs: map[string][]int64{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rev, _ := strconv.ParseInt(r.Header.Get(pushdelivery.HeaderRevision), 10, 64)
		h.mu.Lock()
		h.revs[r.URL.Path] = append(h.revs[r.URL.Path], rev)
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func (h *pathHits) of(path string) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int64(nil), h.revs[path]...)
}

// waitDelivery polls cond (the worker runs on the wall clock) for up to a
// minute.
func waitDelivery(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		<-tick.C
	}
}

// SPEC N1: a push config saved for a task that is then deleted and
// created again under the same ID serves nothing of the new task, on
// every backend: the worker drops it unsent, ConfigStore lists it no
// more. (Before, the old config received the new task's revisions
// 3 and 4.) A config saved on the new task gets its events.
func TestConfigOfDeletedTaskServesNoLaterTask(t *testing.T) {
	for _, backend := range []string{"mem", "pebble", "pg"} {
		t.Run(backend, func(t *testing.T) {
			ctx := context.Background()
			hits, base := newPathHits(t)
			e := openBenchEnv(t, backend, nil, pushdelivery.Options{Workers: 2, Poll: 10 * time.Millisecond})
			t.Cleanup(func() { _ = e.w.Close(context.Background()) })
			cs := pushdelivery.NewConfigStore(e.outbox, e.store)
			const task = a2a.TaskID("t1")
			e.event(t, task) // revision 1
			if _, err := cs.Save(ctx, task, &a2a.PushConfig{ID: "old", URL: base + "/old"}); err != nil {
				t.Fatal(err)
			}
			e.event(t, task) // revision 2, to the old config
			e.w.Wake(task)
			waitDelivery(t, "delivery of revision 2 to the old config", func() bool { return len(hits.of("/old")) == 1 })

			if err := e.store.Delete(ctx, task); err != nil {
				t.Fatal(err)
			}
			for range 4 { // the new task, revisions 1..4
				e.event(t, task)
			}
			e.w.Wake(task)
			// The old record is either dropped (the fix) or has
			// delivered the new task's revisions (the defect): wait for
			// either, then look at what it received.
			waitDelivery(t, "the old config's record dropped or caught up", func() bool {
				r, err := e.outbox.Get(ctx, task, "old")
				if errors.Is(err, pushdelivery.ErrNotFound) {
					return true
				}
				if err != nil {
					t.Fatal(err)
				}
				e.w.Wake(task)
				return r.Delivered >= 4
			})
			if got := hits.of("/old"); len(got) != 1 {
				t.Fatalf("the old config received %v, want only the first task's revision 2", got)
			}
			// A config saved on the new task gets its events.
			if _, err := cs.Save(ctx, task, &a2a.PushConfig{ID: "new", URL: base + "/new"}); err != nil {
				t.Fatal(err)
			}
			e.event(t, task) // revision 5
			e.w.Wake(task)
			waitDelivery(t, "revision 5 to the new config", func() bool { return len(hits.of("/new")) == 1 })
			cfgs, err := cs.List(ctx, task)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfgs) != 1 || cfgs[0].ID != "new" {
				t.Fatalf("configs of the new task: %v, want only new", cfgs)
			}
		})
	}
}

// SPEC N1: ConfigStore neither lists nor gets the config of a deleted
// incarnation once the task is created again, and a save on the new
// incarnation removes it, before any worker ran.
func TestConfigStoreHidesDeletedIncarnation(t *testing.T) {
	forConfigStores(t, func(t *testing.T, e *benchEnv, cs *pushdelivery.ConfigStore) {
		ctx := context.Background()
		const task = a2a.TaskID("t1")
		e.event(t, task)
		if _, err := cs.Save(ctx, task, &a2a.PushConfig{ID: "old", URL: "https://example.com/old"}); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Delete(ctx, task); err != nil {
			t.Fatal(err)
		}
		e.event(t, task)
		if _, err := cs.Get(ctx, task, "old"); err == nil {
			t.Fatal("Get serves the deleted task's config to the new task")
		}
		if cfgs, err := cs.List(ctx, task); err != nil || len(cfgs) != 0 {
			t.Fatalf("List = %v, %v; want none", cfgs, err)
		}
		if _, err := cs.Save(ctx, task, &a2a.PushConfig{ID: "new", URL: "https://example.com/new"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.outbox.Get(ctx, task, "old"); !errors.Is(err, pushdelivery.ErrNotFound) {
			t.Fatalf("the old record after a save on the new task: %v, want ErrNotFound", err)
		}
	})
}

// SPEC N1 (upgrade): a record saved by the release before incarnations
// has Incarnation 0, which says nothing of the incarnation it was saved
// for. Of a task deleted and created again while the deletion is still
// remembered, such a record saved after the deletion serves the new
// task: ConfigStore gets and lists it and a save on the task keeps it
// (before: 0 below the mark made it stale: hidden, and removed by the
// save); one saved before the deletion is still stale.
func TestLegacyRecordOfRecreatedTaskLives(t *testing.T) {
	forConfigStores(t, func(t *testing.T, e *benchEnv, cs *pushdelivery.ConfigStore) {
		ctx := context.Background()
		const task = a2a.TaskID("t1")
		// As the earlier release saved it, created at skew from now
		// (clear of the deletion's mark).
		legacy := func(id string, rev int64, skew time.Duration) {
			t.Helper()
			now := time.Now().Add(skew)
			if err := e.outbox.Save(ctx, &pushdelivery.Record{TaskID: task, Config: a2a.PushConfig{TaskID: task, ID: id, URL: "https://example.com/" + id},
				Dest: "https://example.com:443", Created: now, NextAt: now, Delivered: rev}); err != nil {
				t.Fatal(err)
			}
		}
		legacy("before", e.event(t, task), -time.Millisecond)
		if err := e.store.Delete(ctx, task); err != nil {
			t.Fatal(err)
		}
		legacy("after", e.event(t, task), time.Millisecond) // the task created again, then the config
		if _, err := cs.Get(ctx, task, "after"); err != nil {
			t.Fatalf("Get of the new task's config: %v", err)
		}
		if _, err := cs.Get(ctx, task, "before"); err == nil {
			t.Fatal("Get serves the deleted task's config")
		}
		list := func() []string {
			t.Helper()
			cfgs, err := cs.List(ctx, task)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, c := range cfgs {
				ids = append(ids, c.ID)
			}
			return ids
		}
		if got := list(); len(got) != 1 || got[0] != "after" {
			t.Fatalf("List = %v, want [after]", got)
		}
		if _, err := cs.Save(ctx, task, &a2a.PushConfig{ID: "new", URL: "https://example.com/new"}); err != nil {
			t.Fatal(err)
		}
		if got := list(); len(got) != 2 || got[0] != "after" || got[1] != "new" {
			t.Fatalf("List after a save = %v, want [after new]", got)
		}
		if _, err := e.outbox.Get(ctx, task, "before"); !errors.Is(err, pushdelivery.ErrNotFound) {
			t.Fatalf("the deleted task's record after a save: %v, want ErrNotFound", err)
		}
	})
}

// forConfigStores runs body on each backend with a ConfigStore over its
// outbox and store, and a worker that polls once an hour.
func forConfigStores(t *testing.T, body func(t *testing.T, e *benchEnv, cs *pushdelivery.ConfigStore)) {
	for _, backend := range []string{"mem", "pebble", "pg"} {
		t.Run(backend, func(t *testing.T) {
			e := openBenchEnv(t, backend, nil, pushdelivery.Options{Workers: 1, Poll: time.Hour})
			t.Cleanup(func() { _ = e.w.Close(context.Background()) })
			body(t, e, pushdelivery.NewConfigStore(e.outbox, e.store))
		})
	}
}
