package lg

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/pebblestore"
)

// metrics is loadgen's own Prometheus view, prefixed a2astore_loadgen_.
type metrics struct {
	duration   *prometheus.HistogramVec // op, outcome
	violations *prometheus.CounterVec   // kind
	traversals *prometheus.CounterVec   // result: ok, violated, abandoned
	pages      prometheus.Histogram     // pages per completed traversal
	inFlight   prometheus.Gauge
	known      prometheus.GaugeFunc
}

// MetricNames are the series loadgen itself registers (histograms expand to
// _bucket, _sum and _count).
var MetricNames = []string{
	"a2astore_loadgen_operation_duration_seconds",
	"a2astore_loadgen_violations_total",
	"a2astore_loadgen_traversals_total",
	"a2astore_loadgen_traversal_pages",
	"a2astore_loadgen_in_flight_operations",
	"a2astore_loadgen_live_tasks",
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
	reg.MustRegister(m.duration, m.violations, m.traversals, m.pages, m.inFlight, m.known)
	return m
}

// PebbleCollector exports a Pebble store's LSM health, read on every scrape
// (a2astore_pebble_*): read amplification, compactions, compaction debt,
// flushes, and L0 size. The server registers none of these; loadgen does for
// an embedded Pebble target.
type PebbleCollector struct {
	s                                                                   *pebblestore.Store
	readAmp, compactions, debt, inProgress, flushes, l0Files, diskBytes *prometheus.Desc
}

// PebbleMetricNames are the series a PebbleCollector exports.
var PebbleMetricNames = []string{
	"a2astore_pebble_read_amplification",
	"a2astore_pebble_compactions_total",
	"a2astore_pebble_compaction_debt_bytes",
	"a2astore_pebble_compactions_in_progress",
	"a2astore_pebble_flushes_total",
	"a2astore_pebble_l0_files",
	"a2astore_pebble_disk_usage_bytes",
}

// NewPebbleCollector returns a collector over s.
func NewPebbleCollector(s *pebblestore.Store) *PebbleCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, nil, prometheus.Labels{"backend": "pebble"})
	}
	return &PebbleCollector{s: s,
		readAmp:     d(PebbleMetricNames[0], "Read amplification: L0 sublevels plus non-empty levels below."),
		compactions: d(PebbleMetricNames[1], "Compactions completed."),
		debt:        d(PebbleMetricNames[2], "Estimated bytes compactions must still rewrite."),
		inProgress:  d(PebbleMetricNames[3], "Compactions running now."),
		flushes:     d(PebbleMetricNames[4], "Memtable flushes completed."),
		l0Files:     d(PebbleMetricNames[5], "Sstables in L0."),
		diskBytes:   d(PebbleMetricNames[6], "Bytes the database occupies on disk."),
	}
}

// Describe implements prometheus.Collector.
func (c *PebbleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.readAmp, c.compactions, c.debt, c.inProgress, c.flushes, c.l0Files, c.diskBytes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PebbleCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.s.Metrics()
	ch <- prometheus.MustNewConstMetric(c.readAmp, prometheus.GaugeValue, float64(m.ReadAmp()))
	ch <- prometheus.MustNewConstMetric(c.compactions, prometheus.CounterValue, float64(m.Compact.Count))
	ch <- prometheus.MustNewConstMetric(c.debt, prometheus.GaugeValue, float64(m.Compact.EstimatedDebt))
	ch <- prometheus.MustNewConstMetric(c.inProgress, prometheus.GaugeValue, float64(m.Compact.NumInProgress))
	ch <- prometheus.MustNewConstMetric(c.flushes, prometheus.CounterValue, float64(m.Flush.Count))
	ch <- prometheus.MustNewConstMetric(c.l0Files, prometheus.GaugeValue, float64(m.Levels[0].TablesCount))
	ch <- prometheus.MustNewConstMetric(c.diskBytes, prometheus.GaugeValue, float64(m.DiskSpaceUsage()))
}
