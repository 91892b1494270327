package storemetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterStats is a snapshot of one server's share of a cluster
// (pgcluster, a2astore-server -cluster), without importing it.
type ClusterStats struct {
	WorkWaiting, WorkRunning int64 // open work items of the whole cluster, by state (queue depth)
	ExecutionsRunning        int64 // executions this instance holds a lease for
	Claims                   int64 // work items this instance claimed
	Takeovers                int64 // expired leases (dead instances' work) this instance returned to the queue
	Retries                  int64 // failed work items returned for another attempt
	GaveUp                   int64 // work items given up after their last attempt
	GiveUpsSetAside          int64 // work items whose give-up failed, set aside by this instance's rescuer
	CanceledExecutions       int64 // executions here stopped by a CancelTask on any instance
	EventsDelivered          int64 // events this instance's subscribers received
	Notifications            int64 // notifications the listener received
	ListenerReconnects       int64 // times the notification connection was re-established
	CancelsObserved          int64 // executions stopped because a heartbeat or a recheck found their task canceled (K8)
	AnsweredItems            int64 // executions completed without running again: their message was answered (K8)
	FollowUpWaits            int64 // follow-up messages that waited for the task's previous execution to finish
	CleanedRows              int64 // rows the retention cleaner deleted
}

// ClusterCollector exposes ClusterStats (a2astore_cluster_*) and the event
// delivery latency histogram, fed by ObserveDelivery.
type ClusterCollector struct {
	stat     func() ClusterStats
	work     *prometheus.Desc
	running  *prometheus.Desc
	counters []clusterCounter
	delivery prometheus.Histogram
}

type clusterCounter struct {
	desc *prometheus.Desc
	get  func(*ClusterStats) int64
}

var _ prometheus.Collector = (*ClusterCollector)(nil)

// NewClusterCollector returns a collector that calls stat on every scrape.
func NewClusterCollector(backend string, stat func() ClusterStats) *ClusterCollector {
	labels := prometheus.Labels{"backend": backend}
	d := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("a2astore_cluster_"+name, help, variable, labels)
	}
	c := &ClusterCollector{
		stat:    stat,
		work:    d("work_items", "Open work items of the cluster by state (waiting, running).", "state"),
		running: d("executions_running", "Executions this instance holds a lease for."),
		delivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "a2astore_cluster_event_delivery_seconds", ConstLabels: labels,
			Help:    "Time from an event's commit (its log entry's storage time) to its delivery to a subscriber on this instance.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms .. 4 s
		}),
	}
	for _, m := range []struct {
		name, help string
		get        func(*ClusterStats) int64
	}{
		{"claims_total", "Work items this instance claimed.", func(s *ClusterStats) int64 { return s.Claims }},
		{"takeovers_total", "Expired leases (work of dead instances) this instance returned to the queue.", func(s *ClusterStats) int64 { return s.Takeovers }},
		{"retries_total", "Failed work items this instance returned for another attempt.", func(s *ClusterStats) int64 { return s.Retries }},
		{"gave_up_total", "Work items given up after their last attempt (executions: task finished as FAILED).", func(s *ClusterStats) int64 { return s.GaveUp }},
		{"give_ups_set_aside_total", "Work items whose give-up failed (the rescuer goes on and tries them again later).", func(s *ClusterStats) int64 { return s.GiveUpsSetAside }},
		{"canceled_executions_total", "Executions on this instance stopped by a CancelTask on any instance.", func(s *ClusterStats) int64 { return s.CanceledExecutions }},
		{"events_delivered_total", "Events this instance's subscribers received.", func(s *ClusterStats) int64 { return s.EventsDelivered }},
		{"notifications_total", "Notifications this instance's listener received.", func(s *ClusterStats) int64 { return s.Notifications }},
		{"listener_reconnects_total", "Times the notification connection was re-established.", func(s *ClusterStats) int64 { return s.ListenerReconnects }},
		{"cancels_observed_total", "Executions here stopped because a heartbeat or a recheck found their task canceled (every cancel notification lost).", func(s *ClusterStats) int64 { return s.CancelsObserved }},
		{"answered_items_total", "Executions completed (on a claim, a return or a give-up) without running the agent again: an earlier attempt answered the message.", func(s *ClusterStats) int64 { return s.AnsweredItems }},
		{"followup_waits_total", "Follow-up messages that waited for the task's previous execution to finish.", func(s *ClusterStats) int64 { return s.FollowUpWaits }},
		{"cleaned_rows_total", "Rows the retention cleaner deleted (events and work items).", func(s *ClusterStats) int64 { return s.CleanedRows }},
	} {
		c.counters = append(c.counters, clusterCounter{d(m.name, m.help), m.get})
	}
	return c
}

// ObserveDelivery records one event's delivery latency.
func (c *ClusterCollector) ObserveDelivery(d time.Duration) { c.delivery.Observe(d.Seconds()) }

// Describe implements prometheus.Collector.
func (c *ClusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.work
	ch <- c.running
	for _, m := range c.counters {
		ch <- m.desc
	}
	c.delivery.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *ClusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	ch <- prometheus.MustNewConstMetric(c.work, prometheus.GaugeValue, float64(s.WorkWaiting), "waiting")
	ch <- prometheus.MustNewConstMetric(c.work, prometheus.GaugeValue, float64(s.WorkRunning), "running")
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(s.ExecutionsRunning))
	for _, m := range c.counters {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(m.get(&s)))
	}
	c.delivery.Collect(ch)
}
