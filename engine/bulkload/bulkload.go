package bulkload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// Config is one load. Task and N are required; the other fields are valid
// at their zero value.
type Config struct {
	// N is the number of tasks the store holds from this load when Load
	// returns without error.
	N int
	// Task returns the i-th task of the load and its owner ("" = none).
	// Load calls it for i = 0, 1, …, N-1 in order, from one goroutine —
	// for the tasks a stopped load wrote too, so a generator drawing from a
	// seeded source (internal/taskgen) makes the same tasks again. Load
	// keeps the task (the caller must not change it afterwards).
	Task func(i int) (*a2a.Task, string)
	// Batch is the number of tasks per Import, 1..engine.MaxExport.
	// Default 1000.
	Batch int
	// Workers is the number of Creates in flight on a store without an
	// engine.Importer. Default 4.
	Workers int
	// Clock is the store's clock (µs): the loaded tasks' times end before
	// its reading when the load begins. Default engine.WallClock.
	Clock engine.Clock
	// Progress receives the progress lines; nil = none.
	Progress io.Writer
	// ProgressEvery is the least time between two progress lines. Default
	// 1s.
	ProgressEvery time.Duration
	// Now is the wall clock of progress lines and the rate. Default
	// time.Now.
	Now func() time.Time
}

// Result is what a load did.
type Result struct {
	Path    string        // "import" (engine.Importer) or "create"
	Written int           // tasks this call wrote
	Found   int           // tasks of the load the store held already
	Elapsed time.Duration // from the call to its return
}

// Rate is the tasks written per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Written) / r.Elapsed.Seconds()
}

func (c *Config) ensureDefaults() {
	if c.Batch == 0 {
		c.Batch = 1000
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Clock == nil {
		c.Clock = engine.WallClock
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

func (c *Config) validate() error {
	switch {
	case c.N < 0:
		return fmt.Errorf("bulkload: %d tasks: %w", c.N, engine.ErrInvalidArgument)
	case c.Task == nil:
		return fmt.Errorf("bulkload: no task generator: %w", engine.ErrInvalidArgument)
	case c.Batch < 1 || c.Batch > engine.MaxExport:
		return fmt.Errorf("bulkload: batch %d (want 1..%d): %w", c.Batch, engine.MaxExport, engine.ErrInvalidArgument)
	}
	return nil
}

// Load writes cfg.N tasks of cfg.Task into s (see the package
// documentation): through s's engine.Importer when it has one, else
// through Create. It returns what it did; on an error, what it did
// before it.
func Load(ctx context.Context, s engine.Store, cfg Config) (Result, error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	l := &loader{cfg: cfg, s: s, began: cfg.Now()}
	var err error
	if imp, ok := s.(engine.Importer); ok {
		l.res.Path = "import"
		err = l.importAll(ctx, imp)
	} else {
		l.res.Path = "create"
		err = l.createAll(ctx)
	}
	end := cfg.Now()
	l.res.Elapsed = end.Sub(l.began)
	l.progress(end, true)
	return l.res, err
}

// loader is one Load.
type loader struct {
	cfg   Config
	s     engine.Store
	res   Result
	began time.Time
	shown time.Time // the last progress line; zero: none yet
	// shownDone is what the last progress line counted.
	shownDone int
}

// progress prints a line at now when ProgressEvery has passed since the
// last one, or when last (unless it would repeat the last one).
func (l *loader) progress(now time.Time, last bool) {
	if l.cfg.Progress == nil {
		return
	}
	done := l.res.Written + l.res.Found
	if (!last && now.Sub(l.shown) < l.cfg.ProgressEvery) || (last && !l.shown.IsZero() && done == l.shownDone) {
		return
	}
	l.shown, l.shownDone = now, done
	pct := 100.0
	if l.cfg.N > 0 {
		pct = 100 * float64(done) / float64(l.cfg.N)
	}
	rate := float64(l.res.Written) / max(now.Sub(l.began).Seconds(), 1e-3)
	fmt.Fprintf(l.cfg.Progress, "bulk load: %d/%d tasks (%.1f%%), %.0f tasks/s (%s; %d found already)\n",
		done, l.cfg.N, pct, rate, l.res.Path, l.res.Found)
}

// batches generates the load's tasks in batches of cfg.Batch on a
// goroutine of its own (with, when log, each task's Create log entry;
// times are set by the writer), so generation overlaps the writes. The
// returned stop ends the generator and waits for it.
func (l *loader) batches(ctx context.Context, log bool) (<-chan []engine.StoredTask, <-chan error, func()) {
	ctx, cancel := context.WithCancel(ctx)
	out, errc := make(chan []engine.StoredTask, 2), make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(out)
		for start := 0; start < l.cfg.N; start += l.cfg.Batch {
			b := make([]engine.StoredTask, 0, min(l.cfg.Batch, l.cfg.N-start))
			for i := start; i < start+cap(b); i++ {
				task, owner := l.cfg.Task(i)
				if task == nil {
					errc <- fmt.Errorf("bulkload: task %d is nil: %w", i, engine.ErrInvalidArgument)
					return
				}
				st := engine.StoredTask{Record: engine.Record{Task: task, Revision: 1, Cursor: engine.Cursor{ID: task.ID}, Owner: owner}}
				if log {
					e, err := engine.NewLogEntry(task, nil)
					if err != nil {
						errc <- fmt.Errorf("bulkload: task %q: %w", task.ID, err)
						return
					}
					e.Revision = 1
					st.Log = []engine.LogEntry{e}
				}
				b = append(b, st)
			}
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
		}
	})
	return out, errc, func() {
		cancel()
		for range out { // let a blocked send go
		}
		wg.Wait()
	}
}

// keepsLog reports whether s keeps a task log (engine.LogStore with its
// log on): only then are log entries made.
func keepsLog(ctx context.Context, s engine.Store) bool {
	ls, ok := s.(engine.LogStore)
	if !ok {
		return false
	}
	_, err := ls.ReadLog(ctx, "bulkload-log-probe", 0, 1)
	return !errors.Is(err, engine.ErrLogDisabled)
}

// next receives the next batch, or nil at the end; a generator error or
// ctx's end is the error.
func next(ctx context.Context, in <-chan []engine.StoredTask, errc <-chan error) ([]engine.StoredTask, error) {
	select {
	case b, ok := <-in:
		if !ok {
			select {
			case err := <-errc:
				return nil, err
			default:
			}
		}
		return b, ctx.Err()
	case err := <-errc:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
