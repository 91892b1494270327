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

// LSMStats is a snapshot of an LSM storage engine such as Pebble. It names
// the figures worth alerting on without importing the engine, so the
// backend's owner maps its own metrics into it.
type LSMStats struct {
	DiskBytes           uint64 // total disk space used (tables, WAL, blobs)
	ReadAmp             int    // sublevels + non-empty levels a read may consult
	CompactionDebtBytes uint64 // estimated bytes left to compact
	Compactions         int64  // cumulative
	Flushes             int64  // cumulative
	MemtableBytes       uint64 // allocated memtable memory
	WALBytes            uint64 // live write-ahead log size
	BlockCacheBytes     int64  // bytes in the block cache
	BlockCacheHits      int64  // cumulative
	BlockCacheMisses    int64  // cumulative
}

// LSMCollector exports LSMStats, read on every scrape, as
// a2astore_lsm_{disk_bytes, read_amplification, compaction_debt_bytes,
// compactions_total, flushes_total, memtable_bytes, wal_bytes,
// block_cache_bytes, block_cache_hits_total, block_cache_misses_total}{backend}.
type LSMCollector struct {
	stat  func() LSMStats
	descs map[string]*prometheus.Desc
}

var _ prometheus.Collector = (*LSMCollector)(nil)

var lsmHelp = map[string]string{
	"disk_bytes":               "Disk space used by the LSM (tables, WAL, blobs).",
	"read_amplification":       "Number of sublevels and levels a point read may consult.",
	"compaction_debt_bytes":    "Estimated bytes left to compact.",
	"compactions_total":        "Compactions completed.",
	"flushes_total":            "Memtable flushes completed.",
	"memtable_bytes":           "Memory allocated to memtables.",
	"wal_bytes":                "Live write-ahead log size.",
	"block_cache_bytes":        "Bytes held in the block cache.",
	"block_cache_hits_total":   "Block cache hits.",
	"block_cache_misses_total": "Block cache misses.",
}

// NewLSMCollector returns a collector that calls stat on every scrape.
func NewLSMCollector(backend string, stat func() LSMStats) *LSMCollector {
	c := &LSMCollector{stat: stat, descs: map[string]*prometheus.Desc{}}
	for name, help := range lsmHelp {
		c.descs[name] = prometheus.NewDesc("a2astore_lsm_"+name, help, nil, prometheus.Labels{"backend": backend})
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *LSMCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *LSMCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	gauge := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v)
	}
	counter := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, v)
	}
	gauge("disk_bytes", float64(s.DiskBytes))
	gauge("read_amplification", float64(s.ReadAmp))
	gauge("compaction_debt_bytes", float64(s.CompactionDebtBytes))
	counter("compactions_total", float64(s.Compactions))
	counter("flushes_total", float64(s.Flushes))
	gauge("memtable_bytes", float64(s.MemtableBytes))
	gauge("wal_bytes", float64(s.WALBytes))
	gauge("block_cache_bytes", float64(s.BlockCacheBytes))
	counter("block_cache_hits_total", float64(s.BlockCacheHits))
	counter("block_cache_misses_total", float64(s.BlockCacheMisses))
}
