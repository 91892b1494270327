package load

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in nanoseconds, 1 ns to 100 s, with 3 significant
// digits (HDR: relative error ≤ 0.1% at every magnitude, fixed memory).
const (
	histMin    = 1
	histMax    = int64(100 * time.Second)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// opRecorder holds one operation class's histograms and error counts: the
// whole run and the current progress interval.
type opRecorder struct {
	mu struct {
		sync.Mutex
		all, interval *hdrhistogram.Histogram
		errs          map[string]int64 // class → count, whole run
		intervalErrs  int64
	}
}

func newOpRecorder() *opRecorder {
	r := &opRecorder{}
	r.mu.all, r.mu.interval = newHist(), newHist()
	r.mu.errs = map[string]int64{}
	return r
}

// record adds one operation. class "" = success; errors are counted and their
// latency recorded too (a slow failure is still load).
func (r *opRecorder) record(d time.Duration, class string) {
	v := min(max(int64(d), histMin), histMax)
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.mu.all.RecordValue(v)
	_ = r.mu.interval.RecordValue(v)
	if class != "" {
		r.mu.errs[class]++
		r.mu.intervalErrs++
	}
}

// takeInterval returns the interval's histogram and error count and starts
// a new interval.
func (r *opRecorder) takeInterval() (*hdrhistogram.Histogram, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, e := r.mu.interval, r.mu.intervalErrs
	r.mu.interval, r.mu.intervalErrs = newHist(), 0
	return h, e
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
	return summarize(r.mu.all, elapsed, r.mu.errs)
}

// merged returns a copy of the whole-run histogram (for the total row).
func (r *opRecorder) merged(into *hdrhistogram.Histogram) {
	r.mu.Lock()
	defer r.mu.Unlock()
	into.Merge(r.mu.all)
}
