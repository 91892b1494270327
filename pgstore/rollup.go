package pgstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The roll-up: a background service that folds the count ledgers
// (a2a_task_count_deltas, a2a_task_count_moves) into the base counters,
// so that a total — base plus pending deltas — reads short ledgers. It is owned by the Store:
// New starts it, Close stops it. It folds every interval (for writes by
// other processes and SQL), as soon as this store has made
// rollupWakeWrites counted writes since the last fold, as soon as a total
// of this store scanned more than foldOnReadRows pending deltas, and at
// once again after a FoldCounts that folded a full batch or more (the
// ledger may still be long: FoldCounts stops once it folded what was
// pending when it began). Each fold is one transaction
// (a2a_task_counts_fold: up to foldBatch rows of each ledger deleted and
// added to the base together); a fold that fails or dies halfway rolls back whole, so
// its deltas stay pending and count once. Of several servers on one
// database one folds at a time (the function's advisory lock; the others
// skip that round).

// DefaultCountRollupInterval is the roll-up's cadence when
// Options.CountRollupInterval is 0.
const DefaultCountRollupInterval = time.Second

// rollupWakeWrites is how many counted writes of this store wake the
// roll-up before its interval ends.
const rollupWakeWrites = 1000

// foldOnReadRows bounds the ledger by its readers: a total that scanned
// more pending delta rows than this wakes the roll-up at once, so writes
// the store does not see (other processes, SQL) leave a backlog that
// lasts one fold, not one interval. Measured (BenchmarkCountBacklog):
// a total pays about 0.15-0.2 µs per pending row.
const foldOnReadRows = 256

type rollup struct {
	s        *Store
	interval time.Duration
	writes   atomic.Int64  // counted writes since the last fold
	readWake atomic.Int64  // foldOnReadRows (a benchmark turns it off)
	wake     chan struct{} // capacity 1
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// startRollup starts s's roll-up service.
func startRollup(s *Store, interval time.Duration) *rollup {
	ctx, cancel := context.WithCancel(context.Background())
	r := &rollup{s: s, interval: interval, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	r.readWake.Store(foldOnReadRows)
	go r.run(ctx)
	return r
}

// run folds on every tick and wake-up until ctx ends. A failed fold is
// tried again on the next one (the ledger only grows meanwhile, and
// totals stay exact).
func (r *rollup) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
		}
		r.writes.Store(0)
		if n, _ := r.s.FoldCounts(ctx); n >= foldBatch {
			r.poke() // a long ledger, still growing maybe: fold on at once
		}
	}
}

// wrote records n counted writes, waking the roll-up when enough have
// accumulated. Safe on a nil rollup (the service is off).
func (r *rollup) wrote(n int64) {
	if r != nil && r.writes.Add(n) >= rollupWakeWrites {
		r.poke()
	}
}

// read records that a total scanned pending delta rows, waking the
// roll-up when they were more than foldOnReadRows. Safe on a nil rollup.
func (r *rollup) read(pending int64) {
	if r != nil && pending > r.readWake.Load() {
		r.poke()
	}
}

// poke wakes the roll-up now.
func (r *rollup) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// stop ends the service and waits for it: a fold in flight is cancelled
// and rolls back. Safe on a nil rollup and more than once.
func (r *rollup) stop() {
	if r == nil {
		return
	}
	r.stopOnce.Do(r.cancel)
	<-r.done
}

// FoldCounts folds the count ledgers' pending deltas into the base
// counters now, one transaction per foldBatch (10,000) rows of each
// ledger, and returns how many ledger rows it folded. It folds about as many rows as
// were pending when its first fold took the lock (that fold's batch plus
// the rows it left), then returns: writers that append as fast as it
// folds (four on two cores do) cannot keep it folding forever. A result
// of 10,000 or more means the ledger may still be long: the roll-up then
// folds on at once, and so should a job calling it. It returns at once,
// with what it folded so far, when another fold (this or another
// process's) holds the lock, without reading the ledger. Totals are exact
// before, during and after; the roll-up service calls it, and so may an
// operator's job when no store runs the service
// (Options.CountRollupInterval < 0).
func (s *Store) FoldCounts(ctx context.Context) (int64, error) {
	var total, bound int64
	for {
		n, left, err := s.foldOnce(ctx, bound == 0)
		if err != nil {
			return total, fmt.Errorf("pgstore: fold counts: %w", err)
		}
		if n < 0 {
			return total, nil
		}
		total += n
		if bound == 0 {
			bound = n + left
		}
		if n < foldBatch || total >= bound {
			return total, nil
		}
	}
}

// foldOnce runs one fold transaction and returns the ledger rows it
// folded (-1: another fold holds the lock). When count is set and the
// fold came back full, it also returns how many rows the ledgers still
// hold pending (above the fold's watermark, by their xact index), read
// in the fold's transaction after the lock was taken.
func (s *Store) foldOnce(ctx context.Context, count bool) (n, left int64, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT `+s.qschema+`.a2a_task_counts_fold()`).Scan(&n); err != nil {
			return err
		}
		if count && n >= foldBatch {
			if _, err := tx.Exec(ctx, noSeqScanSQL); err != nil {
				return err
			}
			if err := tx.QueryRow(ctx, s.sql.ledgerRows).Scan(&left); err != nil {
				return err
			}
		}
		if h := s.foldHook.Load(); h != nil {
			return (*h)(ctx, tx)
		}
		return nil
	})
	return n, left, err
}
