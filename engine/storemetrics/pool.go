package storemetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// PoolStats is a snapshot of a database connection pool. It mirrors the
// counters of pgxpool.Stat without importing pgx, so any pool can report.
type PoolStats struct {
	MaxConns      int32 // configured maximum
	TotalConns    int32 // open connections
	IdleConns     int32 // open and idle
	AcquiredConns int32 // checked out

	AcquireCount         int64         // successful acquires, cumulative
	EmptyAcquireCount    int64         // acquires that had to wait for a connection, cumulative
	CanceledAcquireCount int64         // acquires abandoned by their context, cumulative
	AcquireDuration      time.Duration // total time spent in successful acquires, cumulative
}

// PoolCollector exports a pool's statistics, read on every scrape:
//
//	a2astore_pool_max_connections{backend}                 gauge
//	a2astore_pool_connections{backend,state=idle|acquired} gauge
//	a2astore_pool_acquires_total{backend}                  counter
//	a2astore_pool_empty_acquires_total{backend}            counter
//	a2astore_pool_canceled_acquires_total{backend}         counter
//	a2astore_pool_acquire_seconds_total{backend}           counter
//
// For pgx: NewPoolCollector("pg", func() PoolStats { s := pool.Stat(); return PoolStats{…} }).
type PoolCollector struct {
	stat func() PoolStats

	maxConns, conns, acquires, empty, canceled, acquireSeconds *prometheus.Desc
}

var _ prometheus.Collector = (*PoolCollector)(nil)

// NewPoolCollector returns a collector that calls stat on every scrape.
func NewPoolCollector(backend string, stat func() PoolStats) *PoolCollector {
	labels := prometheus.Labels{"backend": backend}
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("a2astore_pool_"+name, help, variable, labels)
	}
	return &PoolCollector{
		stat:           stat,
		maxConns:       d("max_connections", "Configured maximum number of pool connections."),
		conns:          d("connections", "Open pool connections by state.", "state"),
		acquires:       d("acquires_total", "Successful connection acquires."),
		empty:          d("empty_acquires_total", "Acquires that waited because the pool had no idle connection."),
		canceled:       d("canceled_acquires_total", "Acquires abandoned because their context ended."),
		acquireSeconds: d("acquire_seconds_total", "Total time spent acquiring connections."),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.maxConns, c.conns, c.acquires, c.empty, c.canceled, c.acquireSeconds} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	ch <- prometheus.MustNewConstMetric(c.maxConns, prometheus.GaugeValue, float64(s.MaxConns))
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(s.AcquiredConns), "acquired")
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.AcquireCount))
	ch <- prometheus.MustNewConstMetric(c.empty, prometheus.CounterValue, float64(s.EmptyAcquireCount))
	ch <- prometheus.MustNewConstMetric(c.canceled, prometheus.CounterValue, float64(s.CanceledAcquireCount))
	ch <- prometheus.MustNewConstMetric(c.acquireSeconds, prometheus.CounterValue, s.AcquireDuration.Seconds())
}
