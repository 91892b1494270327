package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/retention"
	"github.com/a2astore/a2astore/engine/tasklog"
)

// retainConfig is the retention part of the configuration (R1, R2):
// -retain and its knobs.
type retainConfig struct {
	Age      time.Duration // -retain: remove terminal tasks older than this; 0 = off
	StuckAge time.Duration // -retain-stuck: remove unfinished tasks older than this; 0 = off
	Batch    int           // -retain-batch
	Pause    time.Duration // -retain-pause
	Interval time.Duration // -retain-interval; 0 = a tenth of the age, at most a minute
	Once     bool          // -retain-once: sweep once and exit, without serving
	LogAge   time.Duration // -log-retention: trim the task logs of tasks idle this long

	clock retention.Clock // tests drive it; nil = the wall clock
}

// retainFlags registers the retention flags on fs.
func retainFlags(fs *flag.FlagSet, rc *retainConfig) {
	fs.DurationVar(&rc.Age, "retain", 0, "remove tasks in a terminal state (completed, failed, canceled, rejected) whose last update is older than this, e.g. 720h; 0 = keep every task")
	fs.DurationVar(&rc.StuckAge, "retain-stuck", 0, "with -retain, also remove tasks in other states whose last update is older than this (at least -retain); 0 = never")
	fs.IntVar(&rc.Batch, "retain-batch", retention.DefaultBatchSize, fmt.Sprintf("tasks one retention batch examines (1..%d)", engine.MaxRetainLimit))
	fs.DurationVar(&rc.Pause, "retain-pause", retention.DefaultPause, "pause between two retention batches (negative = none)")
	fs.DurationVar(&rc.Interval, "retain-interval", 0, "time between retention sweeps (0 = a tenth of -retain, at most a minute)")
	fs.BoolVar(&rc.Once, "retain-once", false, "run one retention sweep with -retain and exit, without serving")
	fs.DurationVar(&rc.LogAge, "log-retention", tasklog.DefaultRetention, "keep a task's log (the events subscribers and cluster mode read) until the task has been idle this long")
}

// options is rc as retention options over backend (nil: none yet, to
// check the flags): its election, when it has one (pgstore: an advisory
// lock, so that one of several servers sweeps at a time), and its clock,
// when it stamps its own times (pgstore: the database's, R1).
// retention.New checks them, but for the batch size, whose 0 would mean
// its default there: here it is bad input.
func (rc *retainConfig) options(cfg *config, backend engine.Store) (retention.Options, error) {
	if rc.Batch < 1 {
		return retention.Options{}, fmt.Errorf("-retain-batch %d: want 1..%d", rc.Batch, engine.MaxRetainLimit)
	}
	locker, _ := backend.(retention.Locker)
	clock, _ := backend.(engine.LogClock)
	return retention.Options{Age: rc.Age, StuckAge: rc.StuckAge, BatchSize: rc.Batch, Pause: rc.Pause,
		Interval: rc.Interval, Locker: locker, Logger: cfg.Logger, Clock: rc.clock, StoreClock: clock}, nil
}

// newRetention returns the retention service over store (the metered,
// scoped store: batches show as remove_expired) when -retain is set (else
// nil), its metrics registered. It refuses a backend that cannot remove
// expired tasks.
func newRetention(cfg *config, store, backend engine.Store, reg *prometheus.Registry) (*retention.Service, error) {
	rc := &cfg.Retain
	if rc.Age == 0 {
		if rc.StuckAge != 0 {
			return nil, errors.New("-retain-stuck needs -retain")
		}
		return nil, nil
	}
	opts, err := rc.options(cfg, backend)
	if err != nil {
		return nil, err
	}
	svc, err := retention.New(store, opts)
	if err != nil {
		return nil, fmt.Errorf("-retain: %w", err)
	}
	reg.MustRegister(svc.Metrics())
	return svc, nil
}

// startRetention starts the sweeps of -retain, once the server is built
// (shutdown stops them before closing the store).
func (s *server) startRetention() {
	if s.retain == nil {
		return
	}
	s.retain.Start()
	rc := &s.cfg.Retain
	s.cfg.Logger.Info("retention on", "age", rc.Age, "stuck-age", rc.StuckAge, "batch", rc.Batch, "pause", rc.Pause)
}

// retainOnce runs one sweep (-retain-once) on the configured backend and
// reports what it removed.
func retainOnce(ctx context.Context, cfg config) error {
	if cfg.Retain.Age <= 0 {
		return errors.New("-retain-once needs -retain")
	}
	if _, err := cfg.Retain.options(&cfg, nil); err != nil {
		return err
	}
	b, err := openBackend(ctx, &cfg)
	if err != nil {
		return err
	}
	opts, _ := cfg.Retain.options(&cfg, b.Store)
	svc, err := retention.New(b.Store, opts)
	if err != nil {
		_ = b.Store.Close()
		return fmt.Errorf("-retain: %w", err)
	}
	start := time.Now()
	res, err := svc.Sweep(ctx)
	cfg.Logger.Info("retention sweep", "removed", res.Removed, "batches", res.Batches, "skipped (another server holds the lock)", res.Skipped,
		"took", time.Since(start).Round(time.Millisecond))
	if cerr := b.Store.Close(); err == nil {
		err = cerr
	}
	return err
}
