package pushdelivery

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SPEC N4: 200 distinct destinations, posted to at once, leave at most
// the client's MaxConns connections open (counted by the receivers: a
// connection open until they see it closed). Before, every destination
// kept an idle connection for 90 s.
func TestClientCapsOpenConnections(t *testing.T) {
	const dests, maxConns = 200, 16
	var open, peak atomic.Int64
	track := func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n := open.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	urls := make([]string, dests)
	for i := range urls {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		srv.Config.ConnState = track
		srv.Start()
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	c := NewClient(ClientOptions{AllowPrivate: true, MaxConns: maxConns})
	var wg sync.WaitGroup
	errs := make(chan error, dests)
	for _, u := range urls {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u, strings.NewReader("{}"))
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("post: %v", err)
	}
	if !within(10*time.Second, func() bool { return open.Load() <= maxConns }) {
		t.Fatalf("%d connections still open after the posts, cap %d", open.Load(), maxConns)
	}
	t.Logf("open after: %d, peak seen by the receivers: %d (cap %d; a receiver sees a close late)", open.Load(), peak.Load(), maxConns)
}
