package load

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in nanoseconds, 1 ns to 2 h, with 3 significant
// digits (HDR: relative error ≤ 0.1% at every magnitude, fixed memory).
// The range is wide because a paced run measures response times from each
// operation's scheduled start: a run that falls behind its rate for an hour
// records hour-long responses, and a 100 s cap once hid that (every
// percentile of a soak read 100,059 ms).
const (
	histMin    = 1
	histMax    = int64(2 * time.Hour)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// clampHist keeps d inside the histograms' range (clamped, never dropped).
func clampHist(d time.Duration) int64 { return min(max(int64(d), histMin), histMax) }

// opRecorder holds one operation class's histograms and error counts: the
// whole run and the current progress interval, and the whole run's service
// times (from the operation's send, where the others count from its
// scheduled start).
type opRecorder struct {
	mu struct {
		sync.Mutex
		all, interval, service *hdrhistogram.Histogram
		intervalService        *hdrhistogram.Histogram // the interval's service times
		errs                   map[string]int64        // class → count, whole run
		intervalErrs           int64
	}
}

func newOpRecorder() *opRecorder {
	r := &opRecorder{}
	r.mu.all, r.mu.interval, r.mu.service, r.mu.intervalService = newHist(), newHist(), newHist(), newHist()
	r.mu.errs = map[string]int64{}
	return r
}

// record adds one operation: d from its scheduled start (its send when
// unpaced), svc from its send. class "" = success; errors are counted and
// their latency recorded too (a slow failure is still load).
func (r *opRecorder) record(d, svc time.Duration, class string) {
	v := clampHist(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.mu.all.RecordValue(v)
	_ = r.mu.interval.RecordValue(v)
	_ = r.mu.service.RecordValue(clampHist(svc))
	_ = r.mu.intervalService.RecordValue(clampHist(svc))
	if class != "" {
		r.mu.errs[class]++
		r.mu.intervalErrs++
	}
}

// takeInterval returns the interval's histograms (response and service
// times) and error count and starts a new interval.
func (r *opRecorder) takeInterval() (h, svc *hdrhistogram.Histogram, errs int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, svc, errs = r.mu.interval, r.mu.intervalService, r.mu.intervalErrs
	r.mu.interval, r.mu.intervalService, r.mu.intervalErrs = newHist(), newHist(), 0
	return h, svc, errs
}

// OpStats summarizes one operation class. Latencies are in milliseconds.
type OpStats struct {
	Count     int64            `json:"count"`
	OpsPerSec float64          `json:"ops_per_sec"`
	MeanMs    float64          `json:"mean_ms"`
	P50Ms     float64          `json:"p50_ms"`
	P95Ms     float64          `json:"p95_ms"`
	P99Ms     float64          `json:"p99_ms"`
	P999Ms    float64          `json:"p99_9_ms"`
	MaxMs     float64          `json:"max_ms"`
	Errors    map[string]int64 `json:"errors,omitempty"` // by class

	// Service times, from each operation's send: the same as the response
	// times above in an unpaced run; in a paced run (-rate) the gap
	// between the two is time spent waiting behind the schedule.
	ServiceP50Ms float64 `json:"service_p50_ms"`
	ServiceP99Ms float64 `json:"service_p99_ms"`
}

// ErrorCount is the number of failed operations.
func (s OpStats) ErrorCount() int64 {
	var n int64
	for _, c := range s.Errors {
		n += c
	}
	return n
}

// summarize computes OpStats from a histogram over elapsed.
func summarize(h *hdrhistogram.Histogram, elapsed time.Duration, errs map[string]int64) OpStats {
	ms := func(v int64) float64 { return float64(v) / 1e6 }
	s := OpStats{Count: h.TotalCount()}
	if elapsed > 0 {
		s.OpsPerSec = float64(s.Count) / elapsed.Seconds()
	}
	if s.Count > 0 {
		s.MeanMs = h.Mean() / 1e6
		s.P50Ms = ms(h.ValueAtQuantile(50))
		s.P95Ms = ms(h.ValueAtQuantile(95))
		s.P99Ms = ms(h.ValueAtQuantile(99))
		s.P999Ms = ms(h.ValueAtQuantile(99.9))
		s.MaxMs = ms(h.Max())
	}
	if len(errs) > 0 {
		s.Errors = map[string]int64{}
		for k, v := range errs {
			s.Errors[k] = v
		}
	}
	return s
}

// snapshot summarizes the whole run so far.
func (r *opRecorder) snapshot(elapsed time.Duration) OpStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return withService(summarize(r.mu.all, elapsed, r.mu.errs), r.mu.service)
}

// withService sets s's service-time quantiles from svc.
func withService(s OpStats, svc *hdrhistogram.Histogram) OpStats {
	if svc.TotalCount() > 0 {
		s.ServiceP50Ms = float64(svc.ValueAtQuantile(50)) / 1e6
		s.ServiceP99Ms = float64(svc.ValueAtQuantile(99)) / 1e6
	}
	return s
}

// merged adds the whole-run histograms to all and service (for the total
// row).
func (r *opRecorder) merged(all, service *hdrhistogram.Histogram) {
	r.mu.Lock()
	defer r.mu.Unlock()
	all.Merge(r.mu.all)
	service.Merge(r.mu.service)
}
