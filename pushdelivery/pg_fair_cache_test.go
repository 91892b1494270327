package pushdelivery_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/pushdelivery"
)

// countingPG is a PostgreSQL outbox that counts its claims.
type countingPG struct {
	*pushdelivery.PG
	claims atomic.Int64
}

func (c *countingPG) Claim(ctx context.Context, now time.Time, busy []string, skip ...a2a.TaskID) (pushdelivery.Lease, error) {
	c.claims.Add(1)
	return c.PG.Claim(ctx, now, busy, skip...)
}

// TestPGFairOwnerWithMoreTasksThanOwnerCache is
// TestFairOwnerWithMoreTasksThanOwnerCache on the PostgreSQL outbox
// (review D): mallory at her limit with more due tasks than the owner
// cache does not keep victor's record, due after hers, from its claim.
func TestPGFairOwnerWithMoreTasksThanOwnerCache(t *testing.T) {
	defer pushdelivery.SetMaxOwnerCache(16)()
	ctx := context.Background()
	e := fresh(t, "fair-cache")
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	var got atomic.Bool
	ok := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { got.Store(true) }))
	defer ok.Close()
	defer close(release) // before the servers close
	out := &countingPG{PG: e.o}
	const n = 16 + 8
	now := time.Now()
	save := func(id a2a.TaskID, owner, u string, at time.Time) {
		if _, err := e.s.CreateOwned(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, owner); err != nil {
			t.Fatal(err)
		}
		if err := e.o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c", URL: u}, Dest: u, Created: at, NextAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		save(a2a.TaskID(fmt.Sprintf("m%03d", i)), "mallory", hang.URL, now.Add(-time.Hour+time.Duration(i)*time.Millisecond))
	}
	save("v", "victor", ok.URL, now.Add(-time.Minute))
	w := pushdelivery.Start(ctx, pushdelivery.Options{Outbox: out, Store: e.s, Workers: 2, PerOwner: 1, PerDest: 1 << 20,
		Poll: time.Hour, Client: pushdelivery.NewClient(pushdelivery.ClientOptions{AllowPrivate: true, Timeout: time.Hour})})
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = w.Close(cctx)
	}()
	w.Wake("")
	waitDelivery(t, "victor's record delivered or the claims past the limit", func() bool { return got.Load() || out.claims.Load() > 4*n })
	if !got.Load() {
		t.Fatalf("victor's record not delivered after %d claims (%d of mallory's records ahead of it, owner cache 16)", out.claims.Load(), n)
	}
}
