package retention

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a Service's series (a prometheus.Collector):
//
//	a2astore_retention_removed_tasks_total          tasks removed
//	a2astore_retention_batches_total                RemoveExpired calls that succeeded
//	a2astore_retention_sweeps_total{result}         sweeps: ok, skipped (another server holds the lock), error, canceled
//	a2astore_retention_last_sweep_timestamp_seconds start time of the last completed sweep (0: none yet)
//	a2astore_retention_oldest_terminal_age_seconds  the age of the oldest terminal task left: at the end
//	                                                of a sweep, the oldest it kept (under the age; 0: it
//	                                                found none); during a sweep with more batches to go,
//	                                                the age where its last batch stopped (over the age:
//	                                                retention is behind)
type Metrics struct {
	removed prometheus.Counter
	batches prometheus.Counter
	sweeps  *prometheus.CounterVec
	last    prometheus.Gauge
	oldest  prometheus.Gauge
}

func newMetrics() *Metrics {
	m := &Metrics{
		removed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "a2astore", Subsystem: "retention", Name: "removed_tasks_total",
			Help: "Tasks removed by retention."}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "a2astore", Subsystem: "retention", Name: "batches_total",
			Help: "Retention batches (RemoveExpired calls) that succeeded."}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "a2astore", Subsystem: "retention", Name: "sweeps_total",
			Help: "Retention sweeps by result: ok, skipped (another server holds the lock), error, canceled."}, []string{"result"}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "a2astore", Subsystem: "retention", Name: "last_sweep_timestamp_seconds",
			Help: "Start time of the last completed retention sweep, seconds since the epoch (0: none yet)."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "a2astore", Subsystem: "retention", Name: "oldest_terminal_age_seconds",
			Help: "Age of the oldest terminal task left, in seconds: the oldest the last sweep kept (0: none), or during a sweep with more to remove, where its last batch stopped."}),
	}
	for _, r := range []string{"ok", "skipped", "error", "canceled"} {
		m.sweeps.WithLabelValues(r)
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.removed, m.batches, m.sweeps, m.last, m.oldest}
}

func (m *Metrics) batch(removed int) {
	m.batches.Inc()
	m.removed.Add(float64(removed))
}

func (m *Metrics) sweep(result string) { m.sweeps.WithLabelValues(result).Inc() }

// done records a completed sweep that started at now.
func (m *Metrics) done(now, oldestTerminal time.Time) {
	m.sweep("ok")
	m.last.Set(float64(now.UnixMicro()) / 1e6)
	if oldestTerminal.IsZero() {
		m.oldest.Set(0)
	} else {
		m.oldest.Set(now.Sub(oldestTerminal).Seconds())
	}
}

// behind records, during a sweep, that due tasks remain from at (the
// cursor where the last batch stopped) on.
func (m *Metrics) behind(now, at time.Time) { m.oldest.Set(now.Sub(at).Seconds()) }
