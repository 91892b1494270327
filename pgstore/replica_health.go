package pgstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The standby health monitor: a background service of a store with
// standbys (started by New, stopped by Close) that probes the primary's
// WAL position and every standby each Options.ReplicaCheckInterval —
// whether it answers, is in recovery, is on the primary's timeline,
// replays (not paused), and how far
// its replay lags — and records the verdict that reads consult to skip a
// standby that cannot serve. A standby found down or behind is skipped
// until a probe finds it healthy again. The verdict is only a hint: a
// standby serves a read only when its gate passes (replica.go), whatever
// the monitor last saw.

// health is a standby's last verdict; reason "" is healthy.
type health struct {
	reason   string
	lag      time.Duration // how long the primary has been ahead of its replay position
	lagBytes int64         // WAL bytes the primary has that it has not replayed
}

// standby is one standby of the store.
type standby struct {
	name   string // "standby-1", … in Options.Replicas order
	pool   *pgxpool.Pool
	reads  atomic.Int64
	health atomic.Pointer[health]
	watch  replayWatch
}

func (sb *standby) setHealth(h health) { sb.health.Store(&h) }

// replicas is the store's standbys and the record of where reads ran.
type replicas struct {
	list         []*standby
	next         atomic.Uint64 // round robin
	wait, maxLag time.Duration
	interval     time.Duration
	nudgeAfter   time.Duration // negative: no nudges

	primary *pgxpool.Pool // for the nudges

	primaryReads   atomic.Int64
	primaryRetries atomic.Int64 // primary reads taken again because the primary gate was closed
	fallbacks      [len(reasonIndex)]atomic.Int64
	waits          waitHistogram
	nudges         atomic.Int64 // WAL flushes asked of the primary
	nudged         atomic.Int64 // the position the last nudge flushed past
	nudgeMu        sync.Mutex

	gateOff     atomic.Bool                // tests: no gates
	route       atomic.Pointer[func() int] // tests: which standby serves (-1: the primary), health ignored
	positionSQL atomic.Pointer[string]     // tests: another position query
	nudgeOff    atomic.Bool                // tests: no nudges
	hold        atomic.Int64               // tests: the advisory lock gates wait for (0: none)

	samples struct {
		sync.Mutex
		ring []lsnSample // the primary's position at recent probes, oldest first
	}
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// reasonIndex numbers the fallback reasons (Reasons order).
var reasonIndex = [...]string{ReasonDisconnected, ReasonPaused, ReasonLagging, ReasonNotStandby, ReasonCatchup, ReasonError, ReasonTimeline}

// lsnSample is the primary's insert position and timeline at a time.
type lsnSample struct {
	at  time.Time
	lsn int64
	tli int32
}

// maxSamples bounds the ring: the lag is known up to maxSamples probe
// intervals, and reported as at least that beyond.
const maxSamples = 256

// openReplicas opens a pool per standby DSN (connecting lazily: a standby
// down at startup is used once it is up).
func openReplicas(ctx context.Context, opts *Options) (*replicas, error) {
	r := &replicas{wait: opts.ReplicaWait, maxLag: opts.ReplicaMaxLag, interval: opts.ReplicaCheckInterval}
	if r.wait <= 0 {
		r.wait = DefaultReplicaWait
	}
	if r.maxLag <= 0 {
		r.maxLag = DefaultReplicaMaxLag
	}
	if r.interval <= 0 {
		r.interval = DefaultReplicaCheckInterval
	}
	if r.nudgeAfter = opts.ReplicaNudgeAfter; r.nudgeAfter == 0 {
		r.nudgeAfter = DefaultReplicaNudgeAfter
	}
	for i, dsn := range opts.Replicas {
		cfg, err := PoolConfig(dsn)
		if err == nil && cfg.ConnConfig.ConnectTimeout == 0 {
			cfg.ConnConfig.ConnectTimeout = replicaConnectTimeout
		}
		var pool *pgxpool.Pool
		if err == nil {
			cfg.AfterConnect = readCommittedSession
			cfg.ConnConfig.Tracer = opts.Tracer
			pool, err = pgxpool.NewWithConfig(ctx, cfg)
		}
		if err != nil {
			r.closePools()
			return nil, fmt.Errorf("pgstore: open: standby %d: %w", i+1, err)
		}
		sb := &standby{name: fmt.Sprintf("standby-%d", i+1), pool: pool}
		sb.setHealth(health{})
		r.list = append(r.list, sb)
	}
	return r, nil
}

// readCommittedSession makes a standby session's transactions READ
// COMMITTED unless they say otherwise, whatever the server, database or
// role sets (default_transaction_isolation): a hot standby refuses every
// statement that takes a snapshot in a SERIALIZABLE transaction, and pgx
// prepares a statement (which takes one) in a transaction of its own,
// before any BEGIN the statement is sent after. The health probe and the
// replay poller run in such implicit transactions; the gate and the read
// name their isolation level anyway (replica.go).
func readCommittedSession(ctx context.Context, c *pgx.Conn) error {
	_, err := c.Exec(ctx, "SET default_transaction_isolation = 'read committed'")
	return err
}

func (r *replicas) closePools() {
	for _, sb := range r.list {
		sb.pool.Close()
	}
}

// start starts the monitor over primary.
func (r *replicas) start(primary *pgxpool.Pool) {
	r.primary = primary
	if len(r.list) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go r.run(ctx, primary)
}

// stop stops the monitor and closes the standby pools.
func (r *replicas) stop() {
	r.stopOnce.Do(func() {
		if r.cancel != nil {
			r.cancel()
			<-r.done
		}
		r.closePools()
	})
}

func (r *replicas) run(ctx context.Context, primary *pgxpool.Pool) {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.probe(ctx, primary)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probe records the primary's position, then each standby's verdict.
func (r *replicas) probe(ctx context.Context, primary *pgxpool.Pool) {
	ctx, cancel := context.WithTimeout(ctx, max(r.interval, time.Second))
	defer cancel()
	var p int64
	var tli int32
	if err := primary.QueryRow(ctx, positionSQL).Scan(&p, &tli); err == nil {
		r.sample(lsnSample{at: time.Now(), lsn: p, tli: tli})
	}
	for _, sb := range r.list {
		sb.setHealth(r.check(ctx, sb))
	}
}

// check probes one standby.
func (r *replicas) check(ctx context.Context, sb *standby) health {
	var recovering bool
	var replay int64
	var pause string
	var tli int32
	err := sb.pool.QueryRow(ctx, `SELECT pg_is_in_recovery(), coalesce(pg_last_wal_replay_lsn() - '0/0', 0)::bigint,
  CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() ELSE '' END, `+standbyTimelineSQL).Scan(&recovering, &replay, &pause, &tli)
	switch {
	case err != nil:
		return health{reason: ReasonDisconnected}
	case !recovering:
		return health{reason: ReasonNotStandby}
	case r.timeline() != 0 && tli != r.timeline():
		return health{reason: ReasonTimeline}
	}
	h := r.lag(replay)
	switch {
	case pause != "not paused":
		h.reason = ReasonPaused
	case h.lag > r.maxLag:
		h.reason = ReasonLagging
	}
	return h
}

// timeline is the primary's timeline at the last probe that reached it
// (0 before any).
func (r *replicas) timeline() int32 {
	r.samples.Lock()
	defer r.samples.Unlock()
	if n := len(r.samples.ring); n > 0 {
		return r.samples.ring[n-1].tli
	}
	return 0
}

func (r *replicas) sample(s lsnSample) {
	r.samples.Lock()
	defer r.samples.Unlock()
	if len(r.samples.ring) == maxSamples {
		r.samples.ring = append(r.samples.ring[:0], r.samples.ring[1:]...)
	}
	r.samples.ring = append(r.samples.ring, s)
}

// lag is how far a replay position is behind the primary: in bytes, from
// the newest sample, and in time, since the first sample at which the
// primary was past it.
func (r *replicas) lag(replay int64) health {
	r.samples.Lock()
	defer r.samples.Unlock()
	ring := r.samples.ring
	if len(ring) == 0 || replay >= ring[len(ring)-1].lsn {
		return health{}
	}
	h := health{lagBytes: ring[len(ring)-1].lsn - replay}
	for _, s := range ring {
		if s.lsn > replay {
			h.lag = time.Since(s.at)
			break
		}
	}
	return h
}

// pick is the standby a read should run on: the next healthy one round
// robin. With none healthy it returns nil and the reason of the one whose
// turn it was.
func (r *replicas) pick() (*standby, string) {
	if f := r.route.Load(); f != nil {
		if i := (*f)(); i >= 0 {
			return r.list[i], ""
		}
		return nil, "" // the primary, not as a fallback
	}
	n := uint64(len(r.list))
	first := r.next.Add(1) - 1
	for i := range n {
		sb := r.list[(first+i)%n]
		if sb.health.Load().reason == "" {
			return sb, ""
		}
	}
	return nil, r.list[first%n].health.Load().reason
}

// fallback counts a read that ran on the primary for reason.
func (r *replicas) fallback(reason string) {
	for i, name := range reasonIndex {
		if name == reason {
			r.fallbacks[i].Add(1)
			return
		}
	}
}

// waitHistogram counts catch-up waits in fixed buckets (seconds).
type waitHistogram struct {
	counts [len(WaitBuckets) + 1]atomic.Int64 // the last: above every bound
	sumNs  atomic.Int64
}

// WaitBuckets are the upper bounds (seconds) of ReplicaStats.Waits.
var WaitBuckets = [...]float64{0, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}

func (h *waitHistogram) observe(d time.Duration) {
	h.sumNs.Add(int64(d))
	s := d.Seconds()
	for i, b := range WaitBuckets {
		if s <= b {
			h.counts[i].Add(1)
			return
		}
	}
	h.counts[len(WaitBuckets)].Add(1)
}
