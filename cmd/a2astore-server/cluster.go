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

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine/storemetrics"
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
	logs, logged := b.Store.(pgcluster.LogStore)
	if !ok || !logged || s.cfg.Backend != "pg" {
		return nil, errClusterBackend
	}
	cc := s.cfg.Cluster
	var c *pgcluster.Cluster
	metrics := storemetrics.NewClusterCollector("pg", func() storemetrics.ClusterStats { return clusterStats(c) })
	c, err := pgcluster.New(ctx, pooled.Pool(), pgcluster.Options{
		Instance:        cc.Instance,
		TaskStore:       a2aserver.TaskStore(b.Store), // unscoped: the cluster's own bookkeeping
		Log:             logs,
		LeaseTimeout:    cc.Lease,
		Retention:       cc.Retention,
		PollInterval:    cc.Poll,
		Logger:          s.cfg.Logger,
		ObserveDelivery: metrics.ObserveDelivery,
		Tracer:          s.tracerOf("github.com/a2astore/a2astore/pgcluster"),
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	s.cluster = c
	s.registry.MustRegister(metrics)
	s.cfg.Logger.Info("cluster mode", "instance", c.Instance(), "lease", cc.Lease, "retention", cc.Retention)
	return a2asrv.WithClusterMode(a2asrv.ClusterConfig{
		QueueManager: c.QueueManager(),
		WorkQueue:    c.WorkQueue(),
		TaskStore:    c.FenceTaskStore(ts), // an execution that lost its lease writes nothing
	}), nil
}

// handOver, at a shutdown whose grace ran out in cluster mode, stops the
// executions still running without failing their tasks and gives their
// work items back to the queue, where another server claims them at once
// and resumes the stored tasks (pgcluster.Cluster.HandOver); with no other
// server running, the next one to start does.
func (s *server) handOver(ctx context.Context) {
	log := s.cfg.Logger
	log.Warn("shutdown timeout: handing the agent executions still running over to the other servers", "running", s.execs.Running())
	n, err := s.cluster.HandOver(ctx)
	if err != nil {
		log.Error("agent executions did not stop; other servers take them over when their leases expire", "error", err)
		return
	}
	log.Info("handed agent executions over", "executions", n)
}

// clusterStats reads c's counters and queue depth for the collector.
func clusterStats(c *pgcluster.Cluster) storemetrics.ClusterStats {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st := c.Stats()
	s := storemetrics.ClusterStats{
		ExecutionsRunning:  int64(c.ExecutionsRunning()),
		Claims:             st.Claimed.Load(),
		Takeovers:          st.Takeovers.Load(),
		Retries:            st.Retries.Load(),
		GaveUp:             st.GaveUp.Load(),
		GiveUpsSetAside:    st.GiveUpsSetAside.Load(),
		CanceledExecutions: st.CanceledHere.Load(),
		EventsDelivered:    st.Events.Load(),
		Notifications:      st.Notifications.Load(),
		ListenerReconnects: st.Reconnects.Load(),
		CancelsObserved:    st.CancelsSeen.Load(),
		AnsweredItems:      st.Answered.Load(),
		FollowUpWaits:      st.FollowUpWaits.Load(),
		CleanedRows:        st.CleanedEvents.Load() + st.CleanedWorkItems.Load(),
	}
	s.WorkWaiting, s.WorkRunning, _ = c.QueueDepth(ctx) // zero when the database does not answer
	return s
}

// abort undoes what a newServer that fails after listen started: the
// listeners and push delivery. It returns err.
func (s *server) abort(err error) error {
	s.closeListeners()
	s.stopPush(context.Background())
	return err
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
