package pushdelivery

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// signalling is a webhook that answers 200 and sends each notification's
// revision on got.
func signalling(b *testing.B, got chan int64) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rev, _ := strconv.ParseInt(r.Header.Get(HeaderRevision), 10, 64)
		got <- rev
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkDeliveryLatency: one task's event committed through memstore
// and the worker woken, to the receiver's having it (loopback HTTP, one
// process); p50 and p99 reported in µs.
func BenchmarkDeliveryLatency(b *testing.B) {
	b.Run("backend=mem", func(b *testing.B) {
		got := make(chan int64, 1)
		h := newHarness(b, nil)
		h.config("t1", "c", signalling(b, got))
		h.create("t1")
		h.w.Wake("t1")
		<-got
		var lat []time.Duration
		b.ReportAllocs()
		for b.Loop() {
			start := time.Now()
			rev := h.update("t1", a2a.TaskStateWorking)
			h.w.Wake("t1")
			for r := <-got; r != rev; r = <-got {
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
}

// BenchmarkDeliveries: every task of many gets an event; the time until
// all their webhooks (on four destinations) have them, as deliveries/s.
func BenchmarkDeliveries(b *testing.B) {
	for _, n := range []int{64, 512} {
		b.Run(fmt.Sprintf("backend=mem/tasks=%d", n), func(b *testing.B) {
			got := make(chan int64, n)
			h := newHarness(b, nil)
			var urls []string
			for range 4 {
				urls = append(urls, signalling(b, got))
			}
			ids := make([]a2a.TaskID, n)
			for i := range ids {
				ids[i] = a2a.TaskID(fmt.Sprintf("t%d", i))
				h.config(ids[i], "c", urls[i%len(urls)])
				h.create(ids[i])
			}
			h.w.Wake("")
			for range n {
				<-got
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, id := range ids {
					h.update(id, a2a.TaskStateWorking)
				}
				h.w.Wake("")
				for range n {
					<-got
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}
