package load

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics is loadgen's own Prometheus view, prefixed a2astore_loadgen_.
type metrics struct {
	duration   *prometheus.HistogramVec // op, outcome
	violations *prometheus.CounterVec   // kind
	traversals *prometheus.CounterVec   // result: ok, violated, abandoned
	pages      prometheus.Histogram     // pages per completed traversal
	inFlight   prometheus.Gauge
	known      prometheus.GaugeFunc
	push       *prometheus.CounterVec // outcome: deliveries the push receiver got
}

func newMetrics(reg prometheus.Registerer, workload, target string, tr *tracker) *metrics {
	cl := prometheus.Labels{"workload": workload, "target": target}
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "a2astore_loadgen_operation_duration_seconds",
			Help:        "Latency of loadgen operations as the client sees them, by operation class and outcome (ok or error class).",
			ConstLabels: cl,
			Buckets:     prometheus.ExponentialBuckets(20e-6, 2, 20),
			// Native histogram too, for Prometheus servers that scrape them.
			NativeHistogramBucketFactor: 1.1,
		}, []string{"op", "outcome"}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2astore_loadgen_violations_total", Help: "Live-traversal guarantee violations seen (SPEC L7), by kind.", ConstLabels: cl,
		}, []string{"kind"}),
		traversals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2astore_loadgen_traversals_total", Help: "Checked traversals by result (ok, violated, abandoned at the end of the run).", ConstLabels: cl,
		}, []string{"result"}),
		pages: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "a2astore_loadgen_traversal_pages", Help: "Pages read per completed traversal.", ConstLabels: cl,
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "a2astore_loadgen_in_flight_operations", Help: "Operations started and not finished.", ConstLabels: cl,
		}),
		push: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2astore_loadgen_push_deliveries_total", ConstLabels: cl,
			Help: "Push deliveries loadgen's webhook receiver got, by outcome: ok, duplicate, order (a revision after a higher one of its task), malformed.",
		}, []string{"outcome"}),
		known: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "a2astore_loadgen_live_tasks", Help: "Tasks loadgen created and did not delete.", ConstLabels: cl,
		}, func() float64 { return float64(tr.live()) }),
	}
	// Every label value exists from the start, so dashboards show zeros.
	for _, k := range ViolationKinds {
		m.violations.WithLabelValues(k)
	}
	for _, r := range []string{"ok", "violated", "abandoned"} {
		m.traversals.WithLabelValues(r)
	}
	for _, o := range []string{pushOK, pushDuplicate, pushOrder, pushMalformed} {
		m.push.WithLabelValues(o)
	}
	reg.MustRegister(m.duration, m.violations, m.traversals, m.pages, m.inFlight, m.known, m.push)
	return m
}
