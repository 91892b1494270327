package lg

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine/storemetrics"
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

// lsmStats maps Pebble's metrics to storemetrics.LSMStats, the way
// a2astore-server does, so an embedded Pebble target exports the same
// a2astore_lsm_* series as the server.
func lsmStats(m *pebble.Metrics) storemetrics.LSMStats {
	return storemetrics.LSMStats{
		DiskBytes:           m.DiskSpaceUsage(),
		ReadAmp:             m.ReadAmp(),
		CompactionDebtBytes: m.Compact.EstimatedDebt,
		Compactions:         m.Compact.Count,
		Flushes:             m.Flush.Count,
		MemtableBytes:       m.MemTable.Size,
		WALBytes:            m.WAL.Size,
		BlockCacheBytes:     m.BlockCache.Size,
		BlockCacheHits:      m.BlockCache.Hits,
		BlockCacheMisses:    m.BlockCache.Misses,
	}
}

// newLSMCollector exports s's LSM health as a2astore_lsm_*{backend="pebble"}.
func newLSMCollector(s *pebblestore.Store) prometheus.Collector {
	return storemetrics.NewLSMCollector("pebble", func() storemetrics.LSMStats { return lsmStats(s.Metrics()) })
}
