package tasklog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2astore/a2astore/engine"
)

// DefaultRetention is how long a task's log is kept after its last write.
const DefaultRetention = time.Hour

// trimBatch is how many tasks one TrimLog call examines.
const trimBatch = 1000

// Trimmer is the log retention service: every interval (a tenth of the
// retention, at most a minute) it trims, in batches, the logs of the tasks
// whose last write is older than the retention (LogStore.TrimLog), oldest
// first. A task's log then holds at most its revisions of the last
// retention window, however long the task lives idle; a deleted task's log
// went with it already.
type Trimmer struct {
	store     engine.LogStore
	retention time.Duration
	now       func() time.Time
	logger    *slog.Logger
	trimmed   atomic.Int64

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewTrimmer returns a stopped trimmer of store's logs; retention 0 means
// DefaultRetention, now nil the wall clock (it must agree with the
// store's clock; a store that is an engine.LogClock — PostgreSQL, whose
// times are the database server's — gives the time itself, and now is
// not used), logger nil slog.Default().
func NewTrimmer(store engine.LogStore, retention time.Duration, now func() time.Time, logger *slog.Logger) *Trimmer {
	if retention <= 0 {
		retention = DefaultRetention
	}
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Trimmer{store: store, retention: retention, now: now, logger: logger}
}

// Trimmed counts the logs trimmed since NewTrimmer (for metrics).
func (t *Trimmer) Trimmed() int64 { return t.trimmed.Load() }

// Trim runs one pass: batches until one comes back short.
func (t *Trimmer) Trim(ctx context.Context) error {
	now := t.now().UnixMicro()
	if c, ok := t.store.(engine.LogClock); ok {
		var err error
		if now, err = c.LogNow(ctx); err != nil {
			return err
		}
	}
	before := max(now-t.retention.Microseconds(), 0)
	for {
		n, err := t.store.TrimLog(ctx, before, trimBatch)
		t.trimmed.Add(int64(n))
		if err != nil || n < trimBatch {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Start runs a pass at every interval until Close.
func (t *Trimmer) Start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	interval := min(t.retention/10, time.Minute)
	go func() {
		defer close(t.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := t.Trim(ctx); err != nil && !errors.Is(err, context.Canceled) {
				t.logger.Warn("tasklog: trimming the task log failed; retrying next interval", "error", err)
			}
		}
	}()
}

// Close stops the service and waits for a pass in flight.
func (t *Trimmer) Close() error {
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}
