package pushdelivery

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkClientConns (SPEC N4): posts to 1,000 distinct destinations
// (loopback receivers, 4 at a time, as the worker's 4 deliveries) through
// one NewClient with its default connection cap (DefaultMaxConns), then
// the connections the receivers still hold open. Before the cap every
// destination kept an idle connection (an fd and two goroutines) for
// 90 s: 1,000 after 1,000 destinations.
//
//   - open-at-end: open when the last post has returned (a receiver
//     sees a close a little late, so it may exceed the cap briefly);
//   - open-settled: open once they have seen the closes (at most the
//     cap; waited for up to 10 s);
//   - peak: the most open at once during the posts, as the receivers
//     count them (late closes included);
//   - client-peak: the most the client had open at once (its sockets,
//     from dial to close): at most the cap;
//   - cap: the client's cap.
func BenchmarkClientConns(b *testing.B) {
	const dests, parallel = 1000, 4
	b.Run(fmt.Sprintf("dests=%d", dests), func(b *testing.B) {
		var conns connCount
		open, peak := &conns.open, &conns.peak
		urls := conns.receivers(b, dests)
		var atEnd, settled, peaks, clientPeaks int64
		for b.Loop() {
			peak.Store(open.Load())
			var sockets connCount // this client's
			c := NewClient(ClientOptions{AllowPrivate: true, wrapDial: sockets.wrap})
			next := make(chan string)
			var wg sync.WaitGroup
			var failed atomic.Int64
			for range parallel {
				wg.Go(func() {
					for u := range next {
						req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u, strings.NewReader("{}"))
						resp, err := c.Do(req)
						if err != nil {
							failed.Add(1)
							continue
						}
						resp.Body.Close()
					}
				})
			}
			for _, u := range urls {
				next <- u
			}
			close(next)
			wg.Wait()
			if failed.Load() > 0 {
				b.Fatalf("%d posts failed", failed.Load())
			}
			atEnd += open.Load()
			within(10*time.Second, func() bool { return open.Load() <= DefaultMaxConns })
			settled += open.Load()
			peaks += peak.Load()
			clientPeaks += sockets.peak.Load()
			b.StopTimer()
			// A dial the transport began for a request another connection
			// then served ends in the idle pool later: close idle ones
			// until the receivers see none, so the next client starts alone.
			if !within(10*time.Second, func() bool { c.CloseIdleConnections(); return open.Load() == 0 }) {
				b.Fatalf("%d connections still open after closing the idle ones", open.Load())
			}
			b.StartTimer()
		}
		n := float64(b.N)
		b.ReportMetric(float64(atEnd)/n, "open-at-end")
		b.ReportMetric(float64(settled)/n, "open-settled")
		b.ReportMetric(float64(peaks)/n, "peak")
		b.ReportMetric(float64(clientPeaks)/n, "client-peak")
		b.ReportMetric(DefaultMaxConns, "cap")
	})
}
