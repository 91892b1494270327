package storemetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ReplicaStats is where a store's reads ran — its primary or one of its
// hot standbys — and how the standbys are. It mirrors pgstore.ReplicaStats
// without importing it.
type ReplicaStats struct {
	PrimaryReads   int64            // reads run on the primary, cumulative
	PrimaryRetries int64            // primary reads taken again for a commit not yet visible there
	Nudges         int64            // WAL flushes waiting standby reads asked of the primary
	Fallbacks      map[string]int64 // reads run on the primary although standbys are configured, by reason
	Standbys       []StandbyStats
	// WaitCounts[i] counts standby reads that waited for catch-up at most
	// WaitBuckets[i] seconds (the last element: longer); WaitSum is the
	// total wait.
	WaitBuckets []float64
	WaitCounts  []int64
	WaitSum     time.Duration
}

// StandbyStats is one standby.
type StandbyStats struct {
	Name     string
	Reads    int64 // reads it served, cumulative
	Healthy  bool
	Lag      time.Duration
	LagBytes int64
}

// ReplicaCollector exports ReplicaStats, read on every scrape:
//
//	a2astore_replica_reads_total{backend,target=primary|standby-N}   counter
//	a2astore_replica_fallbacks_total{backend,reason}                counter
//	a2astore_replica_primary_retries_total{backend}                 counter
//	a2astore_replica_nudges_total{backend}                          counter
//	a2astore_replica_healthy{backend,standby}                       gauge (0/1)
//	a2astore_replica_lag_seconds{backend,standby}                   gauge
//	a2astore_replica_lag_bytes{backend,standby}                     gauge
//	a2astore_replica_catchup_wait_seconds{backend}                  histogram
type ReplicaCollector struct {
	stat func() ReplicaStats

	reads, fallbacks, retries, nudges, healthy, lag, lagBytes, wait *prometheus.Desc
}

var _ prometheus.Collector = (*ReplicaCollector)(nil)

// NewReplicaCollector returns a collector that calls stat on every scrape.
func NewReplicaCollector(backend string, stat func() ReplicaStats) *ReplicaCollector {
	labels := prometheus.Labels{"backend": backend}
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("a2astore_replica_"+name, help, variable, labels)
	}
	return &ReplicaCollector{
		stat:      stat,
		reads:     d("reads_total", "Get and List calls by where they ran: the primary or a standby.", "target"),
		fallbacks: d("fallbacks_total", "Reads run on the primary although standbys are configured, by reason.", "reason"),
		retries:   d("primary_retries_total", "Primary reads taken again because a commit already in the WAL was not yet visible there."),
		nudges:    d("nudges_total", "WAL flushes that standby reads waiting for replay asked of the primary."),
		healthy:   d("healthy", "1 when the health monitor last found the standby able to serve.", "standby"),
		lag:       d("lag_seconds", "How long the primary has been ahead of the standby's replay position.", "standby"),
		lagBytes:  d("lag_bytes", "WAL bytes the primary has that the standby has not replayed.", "standby"),
		wait:      d("catchup_wait_seconds", "Time a standby read waited for the standby to replay up to the read's start (0: none)."),
	}
}

// Describe implements prometheus.Collector.
func (c *ReplicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.reads, c.fallbacks, c.retries, c.nudges, c.healthy, c.lag, c.lagBytes, c.wait} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ReplicaCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	counter := func(d *prometheus.Desc, v int64, label ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), label...)
	}
	gauge := func(d *prometheus.Desc, v float64, label string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, label)
	}
	counter(c.reads, s.PrimaryReads, "primary")
	counter(c.retries, s.PrimaryRetries)
	counter(c.nudges, s.Nudges)
	for reason, n := range s.Fallbacks {
		counter(c.fallbacks, n, reason)
	}
	for _, sb := range s.Standbys {
		counter(c.reads, sb.Reads, sb.Name)
		up := 0.0
		if sb.Healthy {
			up = 1
		}
		gauge(c.healthy, up, sb.Name)
		gauge(c.lag, sb.Lag.Seconds(), sb.Name)
		gauge(c.lagBytes, float64(sb.LagBytes), sb.Name)
	}
	buckets := make(map[float64]uint64, len(s.WaitBuckets))
	var total uint64
	for i, n := range s.WaitCounts {
		total += uint64(n)
		if i < len(s.WaitBuckets) {
			buckets[s.WaitBuckets[i]] = total
		}
	}
	ch <- prometheus.MustNewConstHistogram(c.wait, total, s.WaitSum.Seconds(), buckets)
}
