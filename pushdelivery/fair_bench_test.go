package pushdelivery_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pushdelivery"
)

// BenchmarkOtherOwnerDelivery (SPEC N4): an owner's event, from its
// commit to its webhook's having it (loopback), while another owner has
// 0, 48 or 240 webhooks that never answer (16 per task), on the memory
// backend with the worker's defaults (4 workers, 2 per owner) and a
// client timeout of 1 s. The bound N4 states: p99-ms at most one client
// timeout (timeout-ms) whatever the number hanging; before the per-owner
// limit it grew with hanging / workers × timeout (issue #51: 11 s with
// 48). hanging-posts: the most posts of the other owner seen hanging at
// the end of an iteration (proof that they hung all along, and at most
// the per-owner limit, 2).
func BenchmarkOtherOwnerDelivery(b *testing.B) {
	const timeout = time.Second
	for _, hanging := range []int{0, 48, 240} {
		b.Run(fmt.Sprintf("hanging=%d", hanging), func(b *testing.B) {
			release := make(chan struct{})
			var inFlight atomic.Int64
			arrived := make(chan struct{}, 1)
			hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				inFlight.Add(1)
				defer inFlight.Add(-1)
				select {
				case arrived <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-r.Context().Done():
				}
				w.WriteHeader(http.StatusServiceUnavailable)
			})
			urls := make([]string, hanging)
			for i := range urls {
				srv := httptest.NewServer(hang)
				b.Cleanup(srv.Close)
				urls[i] = srv.URL
			}
			b.Cleanup(func() { close(release) }) // before the servers close
			e := openBenchEnv(b, "mem", nil, pushdelivery.Options{
				Client: pushdelivery.NewClient(pushdelivery.ClientOptions{AllowPrivate: true, Timeout: timeout}),
			})
			owners := e.store.(engine.OwnerStore)
			ctx := context.Background()
			for i, u := range urls {
				task := a2a.TaskID(fmt.Sprintf("a%02d", i/16))
				p, _ := url.Parse(u)
				if err := e.outbox.Save(ctx, &pushdelivery.Record{TaskID: task, Config: a2a.PushConfig{TaskID: task, ID: fmt.Sprint("c", i), URL: u},
					Dest: p.Scheme + "://" + p.Host, Created: time.Now()}); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < hanging; i += 16 {
				task := a2a.TaskID(fmt.Sprintf("a%02d", i/16))
				if _, err := owners.CreateOwned(ctx, &a2a.Task{ID: task, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}, "alice"); err != nil {
					b.Fatal(err)
				}
				e.w.Wake(task)
			}
			if hanging > 0 { // alice's posts hang
				select {
				case <-arrived:
				case <-time.After(time.Minute):
					b.Fatal("alice's webhooks got no post within a minute")
				}
			}
			got := make(chan string, 16)
			e.hook(b, "b1", received(b, got, nil))
			if _, err := owners.CreateOwned(ctx, &a2a.Task{ID: "b1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}, "bob"); err != nil {
				b.Fatal(err)
			}
			e.w.Wake("b1")
			waitFor(b, got, "b1/1")
			var lat []time.Duration
			var most int64
			for b.Loop() {
				start := time.Now()
				rev := e.event(b, "b1")
				e.w.Wake("b1")
				waitFor(b, got, fmt.Sprintf("b1/%d", rev))
				lat = append(lat, time.Since(start))
				most = max(most, inFlight.Load())
			}
			slices.Sort(lat)
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			b.ReportMetric(ms(timeout), "timeout-ms")
			b.ReportMetric(float64(most), "hanging-posts")
		})
	}
}
