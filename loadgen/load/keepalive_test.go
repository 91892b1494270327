package load

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestKeepAliveClient: 16 workers calling one server keep their
// connections: about one per worker is opened (a few more when a call
// starts while another's connection is on its way back to the pool; at
// most 2 per worker here). Go's default client keeps 2 idle per host:
// there 16 workers opened 87 connections for these 800 calls.
func TestKeepAliveClient(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	const workers = 16
	c := keepAliveClient(workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range 50 {
				resp, err := c.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if n := conns.Load(); n > 2*workers {
		t.Fatalf("%d workers opened %d connections for 800 calls", workers, n)
	}
}
