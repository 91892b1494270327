package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/a2astore/a2astore/engine"
)

// Defaults of Options.
const (
	DefaultBatchSize   = 1000
	DefaultPause       = 20 * time.Millisecond
	MaxDefaultInterval = time.Minute
)

// Locker elects the one server that sweeps when several share a store
// (R2). pgstore.Store implements it with a session advisory lock.
type Locker interface {
	// TryRetentionLock takes the lock without waiting: acquired false
	// means another server holds it. release frees it.
	TryRetentionLock(ctx context.Context) (release func(), acquired bool, err error)
}

// A LockWatcher is a Locker whose lock can end while held (PostgreSQL's
// session lock ends with its connection, without a word): Sweep asks it
// before each batch after the first whether the lock it took still holds,
// and stops with its error when not (R2): a lock lost meanwhile lets at
// most the batch in flight run beside another server's sweep.
// pgstore.Store implements it.
type LockWatcher interface {
	RetentionLockHeld(ctx context.Context) error
}

// Options configures a Service. Age is required; every other field's
// zero value is its default.
type Options struct {
	// Age: terminal tasks whose storage update time is older than Age are
	// removed. Required, > 0.
	Age time.Duration
	// StuckAge, when not 0, also removes tasks in non-terminal states
	// whose storage update time is older than it: work never finished.
	// Default 0: off. It must not be shorter than Age.
	StuckAge time.Duration
	// BatchSize is the most tasks one batch examines (removed or not):
	// 1..engine.MaxRetainLimit. Default DefaultBatchSize.
	BatchSize int
	// Pause is the wait between two batches of a sweep. Default
	// DefaultPause; negative: none.
	Pause time.Duration
	// Interval is the wait between the end of a sweep and the next.
	// Default: Age/10, at most MaxDefaultInterval, at least 10ms.
	Interval time.Duration
	// Locker, when set, makes a sweep run only while it holds the lock
	// (several servers on one PostgreSQL). Default nil: always sweep.
	Locker Locker
	// Clock is the service's time. Default: the wall clock.
	Clock Clock
	// StoreClock, when set, is the clock the store stamps its update
	// times with (pgstore.Store: the database server's), and the age
	// cutoffs are taken from it, not from Clock (R1): a skew between this
	// process's clock and the database's neither removes tasks early (a
	// server ahead by more than the age would remove every terminal
	// task) nor keeps them late. Default nil: Clock.
	StoreClock engine.LogClock
	// Logger receives a line per sweep that removed tasks and per error.
	// Default: slog.Default().
	Logger *slog.Logger
}

// Validate checks o and fills in the defaults; bad options are
// engine.ErrInvalidArgument.
func (o *Options) Validate() error {
	switch {
	case o.Age <= 0:
		return fmt.Errorf("retention: Age %v must be positive: %w", o.Age, engine.ErrInvalidArgument)
	case o.StuckAge < 0:
		return fmt.Errorf("retention: negative StuckAge: %w", engine.ErrInvalidArgument)
	case o.StuckAge != 0 && o.StuckAge < o.Age:
		return fmt.Errorf("retention: StuckAge %v shorter than Age %v: %w", o.StuckAge, o.Age, engine.ErrInvalidArgument)
	case o.BatchSize < 0 || o.BatchSize > engine.MaxRetainLimit:
		return fmt.Errorf("retention: BatchSize %d outside 1..%d: %w", o.BatchSize, engine.MaxRetainLimit, engine.ErrInvalidArgument)
	case o.Interval < 0:
		return fmt.Errorf("retention: negative Interval: %w", engine.ErrInvalidArgument)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Pause == 0 {
		o.Pause = DefaultPause
	}
	if o.Interval == 0 {
		o.Interval = max(min(o.Age/10, MaxDefaultInterval), 10*time.Millisecond)
	}
	if o.Clock == nil {
		o.Clock = wallClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Service removes expired tasks from a store at an interval. Create it with
// New, start it with Start, stop it with Close; or call Sweep yourself.
type Service struct {
	store   engine.Retainer
	opts    Options
	metrics *Metrics

	mu struct {
		sync.Mutex
		cancel context.CancelFunc
		done   chan struct{}
	}
}

// New returns a stopped service over store, which must be able to remove
// expired tasks (engine.AsRetainer; decorators are seen through).
func New(store engine.Store, opts Options) (*Service, error) {
	r, ok := engine.AsRetainer(store)
	if !ok {
		return nil, fmt.Errorf("retention: %T: %w", store, engine.ErrRetainUnsupported)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Service{store: r, opts: opts, metrics: newMetrics()}, nil
}

// Metrics returns the service's metrics, to register.
func (s *Service) Metrics() *Metrics { return s.metrics }

// SweepResult is what one sweep did.
type SweepResult struct {
	Removed int  // tasks removed
	Batches int  // RemoveExpired calls
	Skipped bool // another server holds the lock: nothing done
	// OldestTerminal is the storage update time of the oldest terminal
	// task the sweep kept (not old enough), when it found one; zero
	// otherwise.
	OldestTerminal time.Time
}

// Sweep runs one sweep: batches until nothing older than the age is left
// to examine, with Options.Pause between them. It returns early, with the
// context's error, when ctx ends; what it removed until then stays
// removed.
func (s *Service) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	if s.opts.Locker != nil {
		release, ok, err := s.opts.Locker.TryRetentionLock(ctx)
		if err != nil {
			s.metrics.sweep("error")
			return res, fmt.Errorf("retention: lock: %w", err)
		}
		if !ok {
			s.metrics.sweep("skipped")
			res.Skipped = true
			return res, nil
		}
		defer release()
	}
	now, err := s.now(ctx)
	if err != nil {
		s.metrics.sweep("error")
		return res, fmt.Errorf("retention: the store's clock: %w", err)
	}
	req := engine.RetainRequest{TerminalBefore: cutoff(now, s.opts.Age), Limit: s.opts.BatchSize}
	if s.opts.StuckAge != 0 {
		req.StuckBefore = cutoff(now, s.opts.StuckAge)
	}
	watch, _ := s.opts.Locker.(LockWatcher)
	for {
		if watch != nil && res.Batches > 0 {
			if err := watch.RetentionLockHeld(ctx); err != nil {
				if ctx.Err() != nil {
					s.metrics.sweep("canceled")
					return res, ctx.Err()
				}
				s.metrics.sweep("error")
				return res, fmt.Errorf("retention: lock lost after batch %d: %w", res.Batches, err)
			}
		}
		b, err := s.store.RemoveExpired(ctx, req)
		if err != nil {
			s.metrics.sweep("error")
			return res, fmt.Errorf("retention: batch %d: %w", res.Batches+1, err)
		}
		res.Batches++
		res.Removed += b.Removed
		s.metrics.batch(b.Removed)
		if b.Next == nil {
			if b.OldestTerminal != nil {
				res.OldestTerminal = time.UnixMicro(b.OldestTerminal.UpdatedAt)
			}
			break
		}
		req.After = b.Next
		// Behind: due tasks remain at least as old as where the batch
		// stopped.
		s.metrics.behind(s.opts.Clock.Now(), time.UnixMicro(b.Next.UpdatedAt))
		if s.opts.Pause > 0 {
			select {
			case <-ctx.Done():
				s.metrics.sweep("canceled")
				return res, ctx.Err()
			case <-s.opts.Clock.After(s.opts.Pause):
			}
		}
	}
	s.metrics.done(now, res.OldestTerminal)
	if res.Removed > 0 {
		s.opts.Logger.Info("retention: sweep", "removed", res.Removed, "batches", res.Batches, "age", s.opts.Age)
	}
	return res, nil
}

// now is the time the age cutoffs count from: the store's clock when it
// has one (Options.StoreClock), else the service's.
func (s *Service) now(ctx context.Context) (time.Time, error) {
	if s.opts.StoreClock == nil {
		return s.opts.Clock.Now(), nil
	}
	us, err := s.opts.StoreClock.LogNow(ctx)
	return time.UnixMicro(us), err
}

// cutoff is the storage update time before which a task is older than age
// at now, in µs (0 when age reaches back before the epoch).
func cutoff(now time.Time, age time.Duration) int64 {
	return max(now.Add(-age).UnixMicro(), 0)
}

// Start runs sweeps in the background until Close: one at once, then one
// Options.Interval after each ends. Starting a started service does
// nothing.
func (s *Service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.cancel, s.mu.done = cancel, make(chan struct{})
	go func() {
		defer close(s.mu.done)
		s.run(ctx)
	}()
}

// run sweeps until ctx ends.
func (s *Service) run(ctx context.Context) {
	for {
		if _, err := s.Sweep(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.opts.Logger.Error("retention: sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(s.opts.Interval):
		}
	}
}

// Close stops the background sweeps and waits for the one in flight to
// return (its current batch is cancelled through its context). It is safe
// to call more than once, and on a service never started.
func (s *Service) Close() error {
	s.mu.Lock()
	cancel, done := s.mu.cancel, s.mu.done
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}
