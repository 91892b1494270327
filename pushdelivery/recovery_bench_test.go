package pushdelivery

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// refusing is a RoundTripper whose requests are refused (ECONNREFUSED,
// as from a receiver whose process is down) while down holds.
type refusing struct {
	down *atomic.Bool
	next http.RoundTripper
}

func (r refusing) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.down.Load() {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return r.next.RoundTrip(req)
}

// BenchmarkBacklogRecovery (issue #51: backlog recovery after a 60 s
// outage at 50 events/s, target ≤ 5 s after the first success): 200
// tasks with a webhook each on one destination get 50 events a second
// for 60 s while the destination refuses connections; then it answers
// 200. The clock is the test's (the worker's, the store's): the outage
// passes in steps of 1 s, the worker failing, backing off and opening
// the destination's breaker as it would; after the recovery the clock
// moves 1 s at a time until the first post succeeds, then stands still.
//
//   - s-to-first-2xx: clock time from the recovery to the first 2xx: the
//     wait for the breaker's next probe (its cool-down doubles per failed
//     probe up to MaxBackoff, 60 s) or a record's next retry.
//   - ms-first-2xx-to-all: wall time from the first 2xx to the last
//     (the receiver's clock), with the test's clock standing still: the recovery's
//     DueNow makes every waiting record due at once, so no record waits
//     out its own backoff (target ≤ 5 s).
//   - events: the backlog delivered (each task's creation and its
//     updates).
//
// ns/op is the whole scenario's wall time, outage included: read the
// metrics.
func BenchmarkBacklogRecovery(b *testing.B) {
	const tasks, rate, outage = 200, 50, 60 * time.Second
	var toFirst, toAll time.Duration
	var events int
	for b.Loop() {
		var down atomic.Bool
		down.Store(true)
		var first, last atomic.Int64 // wall times of the first and the last post answered 200 (Unix ns)
		rc := newReceiver(b, func(*http.Request, int) int {
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			last.Store(now)
			return 0
		})
		h := newHarness(b, func(o *Options) {
			c := NewClient(ClientOptions{AllowPrivate: true, Timeout: time.Second})
			c.Transport = refusing{&down, c.Transport}
			o.Client = c
		})
		ids := make([]a2a.TaskID, tasks)
		for i := range ids {
			ids[i] = a2a.TaskID(fmt.Sprint("t", i))
			h.config(ids[i], "c", rc.srv.URL)
			h.create(ids[i])
		}
		n := tasks
		for sec := range int(outage / time.Second) {
			for j := range rate {
				h.update(ids[(sec*rate+j)%tasks], a2a.TaskStateWorking)
				n++
			}
			h.settle()
			h.clock.Advance(time.Second)
		}
		if rc.requests() > 0 {
			b.Fatalf("%d posts arrived during the outage", rc.requests())
		}
		down.Store(false)
		up := h.clock.Now()
		for h.settle(); first.Load() == 0; h.settle() {
			if h.clock.Now().Sub(up) > 10*time.Minute {
				b.Fatal("no post succeeded within 10 minutes of the recovery")
			}
			h.clock.Advance(time.Second)
		}
		toFirst += h.clock.Now().Sub(up)
		if !within(5*time.Minute, func() bool { return len(rc.hits()) >= n }) {
			b.Fatalf("%d of %d events delivered 5 minutes after the first success, the clock standing still", len(rc.hits()), n)
		}
		toAll += time.Duration(last.Load() - first.Load())
		events += n
	}
	b.ReportMetric(toFirst.Seconds()/float64(b.N), "s-to-first-2xx")
	b.ReportMetric(float64(toAll.Milliseconds())/float64(b.N), "ms-first-2xx-to-all")
	b.ReportMetric(float64(events)/float64(b.N), "events")
}
