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
	var conns connCount
	open, peak := &conns.open, &conns.peak
	urls := conns.receivers(t, dests)
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

// connCount counts the connections its receivers hold open, as they see
// them (a close is seen a little late), and the most at once.
type connCount struct{ open, peak atomic.Int64 }

func (c *connCount) track(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		n := c.open.Add(1)
		for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
		}
	case http.StateClosed, http.StateHijacked:
		c.open.Add(-1)
	}
}

// receivers starts n webhooks answering 200 whose connections c counts,
// closed at cleanup, and returns their URLs.
func (c *connCount) receivers(tb testing.TB, n int) []string {
	urls := make([]string, n)
	for i := range urls {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.Config.ConnState = c.track
		srv.Start()
		tb.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	return urls
}
