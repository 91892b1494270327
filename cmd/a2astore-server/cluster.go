package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/internal/backends"
	"github.com/a2astore/a2astore/pgcluster"
)

// clusterConfig is -cluster and its settings: a2a-go's cluster mode on
// the pg backend (pgcluster), so that several servers on one database
// behave as one A2A service (SPEC K1–K6).
type clusterConfig struct {
	Enabled   bool
	Instance  string        // lease owner name; "" = host:pid
	Lease     time.Duration // lease timeout
	Retention time.Duration // of finished work items and ended tasks' events
	Poll      time.Duration // safety-net poll
}

func addClusterFlags(fs *flag.FlagSet, c *clusterConfig) {
	fs.BoolVar(&c.Enabled, "cluster", false, "cluster mode (needs -backend pg): several servers on one PostgreSQL behave as one A2A service; implies -finish-abandoned=false")
	fs.StringVar(&c.Instance, "cluster-instance", "", "this server's name in work leases (default host:pid)")
	fs.DurationVar(&c.Lease, "cluster-lease", pgcluster.DefaultLeaseTimeout, "cluster: a dead server's work is taken over this long (plus a quarter) after its last heartbeat")
	fs.DurationVar(&c.Retention, "cluster-retention", pgcluster.DefaultRetention, "cluster: keep finished work items and the events of ended tasks this long")
	fs.DurationVar(&c.Poll, "cluster-poll", pgcluster.DefaultPollInterval, "cluster: safety-net poll for a lost notification")
}

var errClusterBackend = errors.New("-cluster needs -backend pg")

// startCluster starts the instance's pgcluster over the backend's pool
// and returns the handler option that puts a2a-go in cluster mode with ts
// (the scoped, metered task store) as its task store.
func (s *server) startCluster(ctx context.Context, b *backends.Backend, ts taskstore.Store) (a2asrv.RequestHandlerOption, error) {
	pooled, ok := b.Store.(interface{ Pool() *pgxpool.Pool })
	if !ok || s.cfg.Backend != "pg" {
		return nil, errClusterBackend
	}
	cc := s.cfg.Cluster
	c, err := pgcluster.New(ctx, pooled.Pool(), pgcluster.Options{
		Instance:     cc.Instance,
		TaskStore:    a2aserver.TaskStore(b.Store), // unscoped: the cluster's own bookkeeping
		LeaseTimeout: cc.Lease,
		Retention:    cc.Retention,
		PollInterval: cc.Poll,
		Logger:       s.cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	s.cluster = c
	s.registry.MustRegister(clusterCollector{c})
	s.cfg.Logger.Info("cluster mode", "instance", c.Instance(), "lease", cc.Lease, "retention", cc.Retention)
	return a2asrv.WithClusterMode(a2asrv.ClusterConfig{
		QueueManager: c.QueueManager(),
		WorkQueue:    c.WorkQueue(),
		TaskStore:    ts,
	}), nil
}

// Metrics of cluster mode.
var (
	clusterQueueDepth = prometheus.NewDesc("a2astore_cluster_work_items", "Open cluster work items by state (waiting, running).", []string{"state"}, nil)
	clusterRunning    = prometheus.NewDesc("a2astore_cluster_executions_running", "Executions this instance holds a lease for.", nil, nil)
	clusterCounters   = []struct {
		desc *prometheus.Desc
		get  func(*pgcluster.Stats) int64
	}{
		{prometheus.NewDesc("a2astore_cluster_claims_total", "Work items this instance claimed.", nil, nil), func(s *pgcluster.Stats) int64 { return s.Claimed.Load() }},
		{prometheus.NewDesc("a2astore_cluster_takeovers_total", "Expired leases (work of dead instances) this instance returned to the queue.", nil, nil), func(s *pgcluster.Stats) int64 { return s.Takeovers.Load() }},
		{prometheus.NewDesc("a2astore_cluster_retries_total", "Failed work items this instance returned for another attempt.", nil, nil), func(s *pgcluster.Stats) int64 { return s.Retries.Load() }},
		{prometheus.NewDesc("a2astore_cluster_gave_up_total", "Work items given up after their last attempt (executions: task finished as FAILED).", nil, nil), func(s *pgcluster.Stats) int64 { return s.GaveUp.Load() }},
		{prometheus.NewDesc("a2astore_cluster_canceled_executions_total", "Executions on this instance stopped by a CancelTask on any instance.", nil, nil), func(s *pgcluster.Stats) int64 { return s.CanceledHere.Load() }},
		{prometheus.NewDesc("a2astore_cluster_events_delivered_total", "Events this instance's subscribers received.", nil, nil), func(s *pgcluster.Stats) int64 { return s.Events.Load() }},
		{prometheus.NewDesc("a2astore_cluster_notifications_total", "Notifications this instance's listener received.", nil, nil), func(s *pgcluster.Stats) int64 { return s.Notifications.Load() }},
		{prometheus.NewDesc("a2astore_cluster_listener_reconnects_total", "Times the notification connection was re-established.", nil, nil), func(s *pgcluster.Stats) int64 { return s.Reconnects.Load() }},
		{prometheus.NewDesc("a2astore_cluster_cleaned_rows_total", "Rows the retention cleaner deleted (events and work items).", nil, nil), func(s *pgcluster.Stats) int64 {
			return s.CleanedEvents.Load() + s.CleanedWorkItems.Load()
		}},
	}
)

// clusterCollector exposes a pgcluster's counters and queue depth.
type clusterCollector struct{ c *pgcluster.Cluster }

func (cc clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- clusterQueueDepth
	ch <- clusterRunning
	for _, m := range clusterCounters {
		ch <- m.desc
	}
}

func (cc clusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if waiting, running, err := cc.c.QueueDepth(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(clusterQueueDepth, prometheus.GaugeValue, float64(waiting), "waiting")
		ch <- prometheus.MustNewConstMetric(clusterQueueDepth, prometheus.GaugeValue, float64(running), "running")
	}
	ch <- prometheus.MustNewConstMetric(clusterRunning, prometheus.GaugeValue, float64(cc.c.ExecutionsRunning()))
	st := cc.c.Stats()
	for _, m := range clusterCounters {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(m.get(st)))
	}
}

// closeListeners closes what listen bound, for a newServer that fails
// after it.
func (s *server) closeListeners() {
	for _, ln := range []net.Listener{s.httpLn, s.grpcLn, s.metricsLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}
