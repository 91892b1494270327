package pushdelivery

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are push delivery's Prometheus metrics, named a2astore_push_*.
// Their labels are outcomes and reasons only: never a URL, a host or a
// credential. A nil *Metrics records nothing.
type Metrics struct {
	deliveries *prometheus.CounterVec // outcome: delivered, failed, dropped
	attempts   prometheus.Counter
	failures   *prometheus.CounterVec // reason
	leaseLost  prometheus.Counter
	latency    prometheus.Histogram
	setAsides  *prometheus.CounterVec // kind
}

// Kinds of records set aside (the kind label of
// a2astore_push_set_aside_total, SPEC N4).
const (
	// SetAsideUnreadableTask: the store failed to read a record's task
	// (memory and Pebble outboxes); the task is read again at each claim
	// and its records go on once it reads.
	SetAsideUnreadableTask = "unreadable_task"
	// SetAsideUndecodable: a stored record does not decode (PostgreSQL);
	// it stays aside until its configuration is saved again.
	SetAsideUndecodable = "undecodable_record"
)

// Outcomes of a delivery attempt (the outcome label of
// a2astore_push_deliveries_total).
const (
	OutcomeDelivered = "delivered"
	OutcomeFailed    = "failed" // will be retried
	OutcomeDropped   = "dropped"
)

// NewMetrics registers push delivery's metrics with reg. depth, called at
// each scrape, reports the records waiting for delivery and the age of the
// oldest due one (the outbox's Depth); nil leaves those gauges out.
func NewMetrics(reg prometheus.Registerer, depth func() (int, time.Duration)) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2astore_push_deliveries_total",
			Help: "Push deliveries by outcome: delivered (2xx), failed (to be retried), dropped (failing past the deadline, or unsent: older than the deadline, or its destination set aside past it).",
		}, []string{"outcome"}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "a2astore_push_attempts_total",
			Help: "Push notification POSTs made.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2astore_push_failures_total",
			Help: "Failed push attempts by reason: status_3xx, status_4xx, status_5xx, timeout, refused, blocked (SSRF), other; and entries dropped unsent: expired (older than the deadline), or their destination's last reason.",
		}, []string{"reason"}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "a2astore_push_lease_lost_total",
			Help: "Deliveries whose lease was lost before their commit (another worker may deliver again), or too near its end to post when their claim returned (nothing posted).",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "a2astore_push_delivery_latency_seconds",
			Help:    "Time from an event's commit to its webhook's 2xx.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14), // 1ms .. ~2.5h
		}),
		setAsides: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "a2astore_push_set_aside_total",
			Help: "Push records set aside by kind: unreadable_task (the store failed to read the task), undecodable_record (a stored record does not decode). Other records go on.",
		}, []string{"kind"}),
	}
	reg.MustRegister(m.deliveries, m.attempts, m.failures, m.leaseLost, m.latency, m.setAsides)
	// Every outcome and reason from the start, at zero: rates and panels
	// have series before the first failure.
	for _, o := range []string{OutcomeDelivered, OutcomeFailed, OutcomeDropped} {
		m.deliveries.WithLabelValues(o)
	}
	for _, r := range failureReasons {
		m.failures.WithLabelValues(r)
	}
	for _, k := range []string{SetAsideUnreadableTask, SetAsideUndecodable} {
		m.setAsides.WithLabelValues(k)
	}
	if depth != nil {
		reg.MustRegister(depthCollector(depth))
	}
	return m
}

func (m *Metrics) attempt(reason, outcome string, latency time.Duration) {
	if m == nil {
		return
	}
	m.attempts.Inc()
	m.deliveries.WithLabelValues(outcome).Inc()
	if outcome == OutcomeDelivered {
		if latency >= 0 {
			m.latency.Observe(latency.Seconds())
		}
		return
	}
	m.failures.WithLabelValues(reason).Inc()
}

// unsent counts an entry dropped unsent (for its age, ReasonExpired, or
// its destination's failures past the deadline, their last reason): a
// delivery dropped and a failure, not an attempt (no POST).
func (m *Metrics) unsent(reason string) {
	if m != nil {
		m.deliveries.WithLabelValues(OutcomeDropped).Inc()
		m.failures.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) setAside(kind string) {
	if m != nil {
		m.setAsides.WithLabelValues(kind).Inc()
	}
}

func (m *Metrics) lostLease() {
	if m != nil {
		m.leaseLost.Inc()
	}
}

var (
	depthDesc = prometheus.NewDesc("a2astore_push_queue_depth",
		"Push configurations with events still to deliver.", nil, nil)
	oldestDesc = prometheus.NewDesc("a2astore_push_oldest_due_seconds",
		"Age of the oldest due push delivery.", nil, nil)
)

// depthCollector reports the outbox's depth, asking once per scrape.
type depthCollector func() (int, time.Duration)

func (d depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- depthDesc
	ch <- oldestDesc
}

func (d depthCollector) Collect(ch chan<- prometheus.Metric) {
	n, oldest := d()
	ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, oldest.Seconds())
}
