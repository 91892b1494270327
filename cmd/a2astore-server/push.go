package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/backends"
	"github.com/a2astore/a2astore/pgcluster"
	"github.com/a2astore/a2astore/pushdelivery"
)

// pushConfig is the push-notification part of the configuration.
type pushConfig struct {
	Enabled      bool
	AllowPrivate bool
	Deadline     time.Duration
	Workers      int
	PerDest      int
	PerOwner     int    // 0: half of Workers (pushdelivery.Options.PerOwner)
	MaxConns     int    // 0: pushdelivery's default (ClientOptions.MaxConns)
	Dir          string // pebble: the outbox's directory
	// wrapOutbox, when set, wraps the outbox (tests inject faults).
	wrapOutbox func(pushdelivery.Outbox) pushdelivery.Outbox
}

// pushSweepInterval is how often configurations of tasks that no longer
// exist are deleted; pushSweepGrace how old such a configuration must be
// (a configuration may be saved just before its task's first write).
const (
	pushSweepInterval = time.Minute
	pushSweepGrace    = 10 * time.Minute
	pushSweepBatch    = 1000
)

func addPushFlags(fs *flag.FlagSet, c *pushConfig) {
	fs.BoolVar(&c.Enabled, "push", true, "deliver push notifications: the agent card declares them, the push-config methods work, and each task's events are POSTed to its webhooks at least once, in order, with retries")
	fs.BoolVar(&c.AllowPrivate, "push-allow-private", false, "let webhooks be on loopback, private, link-local and metadata addresses (staging and tests only: refused by default against SSRF)")
	fs.DurationVar(&c.Deadline, "push-deadline", time.Hour, "how long an event is retried for a webhook that fails before it is dropped and counted; an event not delivered this long after it was logged is dropped unsent")
	fs.IntVar(&c.Workers, "push-workers", 4, "concurrent deliveries of this server")
	fs.IntVar(&c.PerDest, "push-per-dest", 2, "concurrent deliveries to one webhook destination (scheme, host and port)")
	fs.IntVar(&c.PerOwner, "push-per-owner", 0, "concurrent deliveries of one owner's tasks (of one task, without an owner), below -push-workers so that no owner's webhooks hold every worker; 0 = half of -push-workers")
	fs.IntVar(&c.MaxConns, "push-max-conns", pushdelivery.DefaultMaxConns, "connections open to all webhooks together (half of them may stay idle, 2 per destination); at least -push-workers")
	fs.StringVar(&c.Dir, "push-dir", "", "pebble: directory of the push outbox (default: -pebble-dir with .push appended)")
}

// validate refuses push settings the worker would silently change or
// that break the fairness bound (SPEC N4): a clear error naming the flag,
// and the server does not start (exit 2).
func (c *pushConfig) validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("-push-workers %d: want at least 1", c.Workers)
	case c.PerDest < 1:
		return fmt.Errorf("-push-per-dest %d: want at least 1", c.PerDest)
	case c.Deadline <= 0:
		return fmt.Errorf("-push-deadline %v: want a positive duration", c.Deadline)
	case c.PerOwner < 0 || c.PerOwner > max(1, c.Workers-1):
		return fmt.Errorf("-push-per-owner %d: want 1 to %d (below -push-workers, %d, when it is above 1, so that one owner's webhooks never hold every worker), or 0 for half of -push-workers",
			c.PerOwner, max(1, c.Workers-1), c.Workers)
	case c.MaxConns < c.Workers:
		return fmt.Errorf("-push-max-conns %d: want at least -push-workers (%d), so that a delivery never waits for a connection another owner's hanging webhook holds",
			c.MaxConns, c.Workers)
	}
	return nil
}

// workerOptions are the delivery worker's options and its client's
// from the flags (Outbox, Store, Metrics and Logger are the caller's).
func (c *pushConfig) workerOptions() (pushdelivery.Options, pushdelivery.ClientOptions) {
	co := pushdelivery.ClientOptions{AllowPrivate: c.AllowPrivate, MaxConns: c.MaxConns}
	return pushdelivery.Options{
		Workers:  c.Workers,
		PerDest:  c.PerDest,
		PerOwner: c.PerOwner,
		Deadline: c.Deadline,
	}, co
}

// startPush opens the backend's outbox, starts the delivery worker and
// returns the handler option that gives a2a-go the push-config store (and
// the worker's Sender, which only wakes the worker: a2a-go's own sender
// makes one POST and forgets it). Nil when push is off.
func (s *server) startPush(ctx context.Context, b *backends.Backend, logs engine.LogStore) (a2asrv.RequestHandlerOption, error) {
	pc := s.cfg.Push
	if !pc.Enabled || s.cfg.A2AInMemory { // a2a-go's InMemory keeps no task log to deliver from
		return nil, nil
	}
	var opened atomic.Value // the outbox, once open: metrics come first, the outbox counts in them
	depth := func() (int, time.Duration) {
		o, _ := opened.Load().(pushdelivery.Outbox)
		if o == nil {
			return 0, 0
		}
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, age, _ := o.Depth(dctx, time.Now()) // zero when the outbox does not answer
		return n, age
	}
	metrics := pushdelivery.NewMetrics(s.registry, depth)
	outbox, closeOutbox, err := s.openOutbox(ctx, b, metrics)
	if err != nil {
		return nil, fmt.Errorf("push outbox: %w", err)
	}
	opened.Store(outbox)
	s.closeOutbox = closeOutbox
	if pc.wrapOutbox != nil {
		outbox = pc.wrapOutbox(outbox)
	}
	s.pushConfigs = pushdelivery.NewConfigStore(outbox, b.Store)
	wo, co := pc.workerOptions()
	wo.Outbox, wo.Store, wo.Client = outbox, logs, pushdelivery.NewClient(co)
	wo.Metrics, wo.Logger = metrics, s.cfg.Logger
	wo.Tracer = s.tracerOf("github.com/a2astore/a2astore/pushdelivery")
	s.pusher = pushdelivery.Start(context.WithoutCancel(ctx), wo)
	s.sweepStop = make(chan struct{})
	s.sweepDone = make(chan struct{})
	go s.sweepPush(outbox)
	var configs push.ConfigStore = s.pushConfigs
	if s.cfg.Cluster.Enabled {
		configs = pgcluster.FencePushConfigs(configs) // a failed lookup is retried, not a FAILED task
	} else {
		configs = pushdelivery.LenientList(configs, s.cfg.Logger, s.pusher.Wake) // a failed lookup fails nothing: delivery reads the log
	}
	return a2asrv.WithPushNotifications(configs, s.pusher.Sender()), nil
}

// openOutbox opens the outbox of the configured backend: PostgreSQL's
// table on the store's pool (shared by every instance), a Pebble database
// beside the store's, or memory (best effort, as the memory store).
func (s *server) openOutbox(ctx context.Context, b *backends.Backend, m *pushdelivery.Metrics) (pushdelivery.Outbox, func() error, error) {
	none := func() error { return nil }
	switch s.cfg.Backend {
	case "pg":
		pooled, ok := b.Store.(interface{ Pool() *pgxpool.Pool })
		if !ok {
			return nil, nil, errors.New("backend pg without a pool")
		}
		o, err := pushdelivery.NewPG(ctx, pooled.Pool(), pushdelivery.PGOptions{Metrics: m, Logger: s.cfg.Logger})
		return o, none, err
	case "pebble":
		dir := s.cfg.Push.Dir
		if dir == "" {
			dir = filepath.Clean(s.cfg.PebbleDir) + ".push"
		}
		o, err := pushdelivery.OpenPebble(dir, b.Store, pushdelivery.LocalOptions{Metrics: m, Log: s.cfg.Logger})
		if err != nil {
			return nil, nil, err
		}
		s.checkpointOutbox = o.Checkpoint
		return o, o.Close, nil
	}
	return pushdelivery.NewMemory(b.Store, pushdelivery.LocalOptions{Metrics: m, Log: s.cfg.Logger}), none, nil
}

// sweepPush deletes, every pushSweepInterval, the configurations of tasks
// that were deleted or retained away, until stopPush.
func (s *server) sweepPush(o pushdelivery.Outbox) {
	defer close(s.sweepDone)
	t := time.NewTicker(pushSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.sweepStop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := o.Sweep(ctx, pushSweepGrace, pushSweepBatch); err != nil {
			s.cfg.Logger.Warn("push config sweep failed", "error", err)
		}
		cancel()
	}
}

// pushInterceptors are the call interceptors push needs after the task
// guard: ListTaskPushConfigs by pages (a2a-go v2.3.1 ignores pageSize and
// pageToken), and SendMessage's push config checked before a2a-go saves
// it. None when push is off (the capability guard answers first).
func (s *server) pushInterceptors() []a2asrv.CallInterceptor {
	if s.pushConfigs == nil {
		return nil
	}
	return []a2asrv.CallInterceptor{a2aserver.PushConfigPages(s.pushConfigs), a2aserver.PushConfigCheck(s.pushConfigs.Check)}
}

// stopPush stops delivering: the sweeper, then the worker (in-flight
// deliveries get until ctx ends, then their leases expire and another
// instance, or the next start, delivers them), then the outbox.
func (s *server) stopPush(ctx context.Context) {
	if s.pusher == nil {
		return
	}
	close(s.sweepStop)
	<-s.sweepDone
	if err := s.pusher.Close(ctx); err != nil {
		s.cfg.Logger.Warn("push deliveries still in flight at shutdown: they are retried", "error", err)
	}
	if err := s.closeOutbox(); err != nil {
		s.cfg.Logger.Error("closing the push outbox", "error", err)
	}
}
