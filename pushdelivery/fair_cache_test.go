package pushdelivery

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// countingLocal is a memory outbox that counts its claims.
type countingLocal struct {
	*Local
	claims atomic.Int64
}

func (c *countingLocal) Claim(ctx context.Context, now time.Time, busy []string, skip ...a2a.TaskID) (Lease, error) {
	c.claims.Add(1)
	return c.Local.Claim(ctx, now, busy, skip...)
}

// TestFairOwnerWithMoreTasksThanOwnerCache (SPEC N4, review D): an owner
// at its limit (one hanging post) with more due tasks than the worker's
// owner cache (maxOwnerCache) must not keep another owner's due record
// from being claimed. The fair pass passes over the owner's tasks by the
// cache's task list; each claim of an uncached task of the owner is given
// back (Release, its NextAt unchanged, so still first), 8 a round; once
// the cache is full it is cleared and the same tasks come first again:
// the other owner's record, due after them, is never claimed.
func TestFairOwnerWithMoreTasksThanOwnerCache(t *testing.T) {
	b := newBlocking()
	hang := newReceiver(t, b.answer)
	ok := newReceiver(t, nil)
	var out *countingLocal
	// Set before the worker starts and put back after it stops (cleanups
	// run last first): the worker reads the bound.
	t.Cleanup(SetMaxOwnerCache(64)) // the production cap, 1 << 14, behaves alike: it takes more tasks
	h := newHarness(t, func(o *Options) {
		out = &countingLocal{Local: NewMemory(o.Store, LocalOptions{Clock: o.Clock, Rescan: time.Hour, Lease: time.Hour})}
		o.Outbox = out
		o.Workers, o.PerOwner, o.PerDest = 2, 1, 1<<20
		o.Client = NewClient(ClientOptions{AllowPrivate: true, Timeout: time.Hour})
	})
	t.Cleanup(func() { close(b.release) }) // before the worker and the receivers close
	n := maxOwnerCache + 16
	t0 := h.clock.Now()
	save := func(task a2a.TaskID, u string, at time.Time) {
		r := &Record{TaskID: task, Config: a2a.PushConfig{TaskID: task, ID: "c", URL: u},
			Dest: u, Created: at, NextAt: at}
		if err := out.Save(h.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n { // mallory's, m0 first: it hangs and holds her one slot
		id := a2a.TaskID(fmt.Sprintf("m%05d", i))
		h.createOwned(id, "mallory")
		save(id, hang.srv.URL, t0.Add(-time.Hour+time.Duration(i)*time.Microsecond))
	}
	h.createOwned("v", "victor")
	save("v", ok.srv.URL, t0) // due after every one of mallory's
	h.clock.Advance(time.Second)
	h.w.Wake("")
	eventually(t, "mallory's first post hanging", func() bool { return b.count() == 1 })
	// Without starvation victor's record comes after at most one claim per
	// record ahead of it; allow four times that.
	limit := int64(4 * n)
	delivered := func() bool { return slices.Contains(ok.revs("v"), 1) }
	eventually(t, "victor's record delivered or the claims past the limit", func() bool { return delivered() || out.claims.Load() > limit })
	if !delivered() {
		h.w.mu.Lock()
		cached := len(h.w.mu.owners)
		h.w.mu.Unlock()
		t.Fatalf("victor's record not delivered after %d claims (%d of mallory's records ahead of it, %d tasks in the owner cache, cap %d)", out.claims.Load(), n, cached, maxOwnerCache)
	}
	if b.count() != 1 {
		t.Fatalf("%d of mallory's posts hanging, want 1", b.count())
	}
}
