package bulkload

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/a2astore/a2astore/engine"
)

// importAll writes the load through imp, batch by batch, after finding
// the batches a stopped load wrote (SPEC X1: the tasks as Create would
// have left them, at ordered times).
func (l *loader) importAll(ctx context.Context, imp engine.Importer) error {
	in, errc, stop := l.batches(ctx, keepsLog(ctx, l.s))
	defer stop()
	// Task i is stored at origin + i: the last one before the clock.
	origin := max(engine.CreateTime(l.cfg.Clock())-int64(l.cfg.N), 0)
	probing := true // until a batch is wholly missing: fresh ground after it
	for i0 := 0; ; {
		b, err := next(ctx, in, errc)
		if err != nil || b == nil {
			return err
		}
		todo := fullBatch(len(b))
		if probing {
			if todo, err = l.missing(ctx, b, i0, &origin, false); err != nil {
				return err
			}
			probing = len(todo) < len(b)
		}
		err = l.importSome(ctx, imp, b, i0, origin, todo)
		if errors.Is(err, engine.ErrAlreadyExists) && !probing {
			// Tasks of the load deleted since it ran make a batch look
			// missing when it is not: read it whole, go on probing.
			if todo, err = l.missing(ctx, b, i0, &origin, true); err == nil {
				probing = true
				err = l.importSome(ctx, imp, b, i0, origin, todo)
			}
		}
		if err != nil {
			return err
		}
		i0 += len(b)
		l.progress(l.cfg.Now(), false)
	}
}

// fullBatch is the positions 0..n-1.
func fullBatch(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

// importSome imports the tasks of b (task i0 first) at positions todo, at
// their times from origin.
func (l *loader) importSome(ctx context.Context, imp engine.Importer, b []engine.StoredTask, i0 int, origin int64, todo []int) error {
	if len(todo) == 0 {
		return nil
	}
	sub := make([]engine.StoredTask, 0, len(todo))
	for _, p := range todo {
		st := b[p]
		st.Cursor.UpdatedAt = origin + int64(i0+p)
		if len(st.Log) > 0 {
			st.Log = []engine.LogEntry{st.Log[0]}
			st.Log[0].Time = st.Cursor.UpdatedAt
		}
		sub = append(sub, st)
	}
	if err := imp.Import(ctx, sub); err != nil {
		return fmt.Errorf("bulkload: import tasks %d..%d: %w", i0+todo[0], i0+todo[len(todo)-1], err)
	}
	l.res.Written += len(sub)
	return nil
}

// probes is how many tasks of a batch whose first and last tasks are
// held are read back too, spread over it, before the batch counts as
// found: a few tasks may match another data set's by chance (a seed that
// draws the same context: about 1 in 7 with 20 skewed contexts), not all.
const probes = 16

// missing reads back batch b (task i0 first) and returns the positions of
// the tasks the store lacks; the store's tasks count as found, and origin
// moves so that the times continue from the last of them. Unless all, it
// reads the first and the last task and, when both are there, probes
// tasks spread between them; it reads the others when one of those is
// missing but not both ends (a batch written in part).
func (l *loader) missing(ctx context.Context, b []engine.StoredTask, i0 int, origin *int64, all bool) ([]int, error) {
	held := func(p int) (bool, error) {
		rec, ok, err := l.get(ctx, &b[p])
		if ok {
			*origin = rec.Cursor.UpdatedAt - int64(i0+p)
		}
		return ok, err
	}
	if !all {
		first, err := held(0)
		if err != nil {
			return nil, err
		}
		last, err := held(len(b) - 1)
		switch {
		case err != nil:
			return nil, err
		case !first && !last:
			return fullBatch(len(b)), nil
		case first && last:
			whole, err := l.probe(b, held)
			if err != nil || whole {
				return nil, err
			}
		}
	}
	var todo []int
	for p := range b {
		ok, err := held(p)
		if err != nil {
			return nil, err
		}
		if ok {
			l.res.Found++
		} else {
			todo = append(todo, p)
		}
	}
	return todo, nil
}

// probe reads back up to probes tasks spread over batch b (its ends
// held): true, and the batch counted as found, when all are held; an
// error when one is another data set's.
func (l *loader) probe(b []engine.StoredTask, held func(int) (bool, error)) (bool, error) {
	step := max(len(b)/(probes+1), 1)
	for p := step; p < len(b)-1; p += step {
		ok, err := held(p)
		if err != nil || !ok {
			return false, err
		}
	}
	l.res.Found += len(b)
	return true, nil
}

// get reads task st back: held or not, and an error when the store's task
// of that ID is not this load's (another context or owner: another
// generator, seed or shape).
func (l *loader) get(ctx context.Context, st *engine.StoredTask) (engine.Record, bool, error) {
	rec, err := l.s.Get(ctx, st.Task.ID)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return engine.Record{}, false, nil
	case err != nil:
		return engine.Record{}, false, fmt.Errorf("bulkload: read task %q back: %w", st.Task.ID, err)
	case rec.Task.ContextID != st.Task.ContextID || rec.Owner != st.Owner:
		return engine.Record{}, false, fmt.Errorf("bulkload: the store holds task %q in context %q of owner %q, the load makes it in %q of %q (another generator, seed or shape?): %w",
			st.Task.ID, rec.Task.ContextID, rec.Owner, st.Task.ContextID, st.Owner, engine.ErrAlreadyExists)
	}
	return rec, true, nil
}

// createAll writes the load through Create (CreateOwned for owned tasks)
// on a store without an Importer: cfg.Workers at a time, a batch after
// the other, so a stopped load leaves at most its last batch in part. A
// task the store holds already (ErrAlreadyExists) counts as found: a
// load run again completes what it stopped at. The store's clock times
// the tasks.
func (l *loader) createAll(ctx context.Context) error {
	owners, _ := l.s.(engine.OwnerStore)
	in, errc, stop := l.batches(ctx, false)
	defer stop()
	for {
		b, err := next(ctx, in, errc)
		if err != nil || b == nil {
			return err
		}
		var (
			mu     sync.Mutex
			errs   []error
			wg     sync.WaitGroup
			tasks  = make(chan *engine.StoredTask)
			writes = engine.WithoutTask(ctx)
		)
		for range min(l.cfg.Workers, len(b)) {
			wg.Go(func() {
				for st := range tasks {
					var err error
					switch {
					case st.Owner == "":
						_, err = l.s.Create(writes, st.Task)
					case owners == nil:
						err = fmt.Errorf("bulkload: task %q has owner %q but %T records no owners: %w", st.Task.ID, st.Owner, l.s, engine.ErrInvalidArgument)
					default:
						_, err = owners.CreateOwned(writes, st.Task, st.Owner)
					}
					mu.Lock()
					switch {
					case err == nil:
						l.res.Written++
					case errors.Is(err, engine.ErrAlreadyExists):
						l.res.Found++
					default:
						errs = append(errs, fmt.Errorf("bulkload: create %q: %w", st.Task.ID, err))
					}
					mu.Unlock()
				}
			})
		}
		for i := range b {
			tasks <- &b[i]
		}
		close(tasks)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		l.progress(l.cfg.Now(), false)
	}
}
