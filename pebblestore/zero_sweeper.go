package pebblestore

import (
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// The zero sweeper deletes counter keys that writes lowered to zero, off
// the writers' path (counters.go describes the markers and the locks).
//
// A write that lowers counters commits its marker in its own batch and
// then only queues the marker (in memory) and signals the sweeper; the
// signals coalesce (a channel of one). The sweeper takes at most
// sweepBatch markers at a time and, for their counters together, reads
// them, takes the exclusive side of the stripes of those at zero, reads
// those again and deletes the ones still zero together with the markers,
// in one NoSync batch. A marker it has not swept yet is in the database,
// so a crash or a lost NoSync delete leaves it to Open (recoverCounters).
//
// Open starts it once the store is ready; Close stops it, then sweeps
// what is still queued (no call is in flight by then). sweepPending sweeps
// everything queued now and returns when done: CheckInvariants runs it
// first, so a marker the sweeper has not reached yet is not damage, while
// one nobody queued (a write's crash) still is.

// sweepBatch bounds the markers one sweep takes: the stripes it locks
// exclusively, and the size of its batch.
const sweepBatch = 64

// maxPending is how far behind the writers the sweeper may fall before a
// writer sweeps a batch itself.
const maxPending = 64 * sweepBatch

// pendingMarker is a committed marker and the counters it lists.
type pendingMarker struct {
	key      []byte
	counters [][]byte
}

// zeroSweeper is the state of the sweeper of a Store.
type zeroSweeper struct {
	mu      sync.Mutex // guards pending
	pending []pendingMarker

	// sweeping is held over taking a batch and sweeping it, so that
	// sweepPending returns only once the batches taken before are done.
	sweeping sync.Mutex

	wake     chan struct{} // capacity 1: a signal coalesces with one not yet taken
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	// onSwept, if set (tests, before the write that wakes the sweeper),
	// runs in the sweeper goroutine after each of its sweeps.
	onSwept func()
}

// startZeroSweeper starts the sweeper goroutine (Open, once the store is
// ready).
func (s *Store) startZeroSweeper() {
	z := &s.zeros
	z.wake = make(chan struct{}, 1)
	z.stop = make(chan struct{})
	z.done = make(chan struct{})
	go func() {
		defer close(z.done)
		for {
			select {
			case <-z.stop:
				return
			case <-z.wake:
			}
			if err := s.sweepPending(z.stop); err != nil {
				s.logger.Errorf("pebblestore: delete zero counters (Open redoes it): %v", err)
			}
			if err := s.foldPending(z.stop); err != nil {
				s.logger.Errorf("pebblestore: %v", err)
			}
			if z.onSwept != nil {
				z.onSwept()
			}
		}
	}()
}

// stopZeroSweeper stops the sweeper; with wait, it returns once the
// sweeper has exited. It may run more than once.
func (s *Store) stopZeroSweeper(wait bool) {
	z := &s.zeros
	if z.stop == nil {
		return // never started
	}
	z.stopOnce.Do(func() { close(z.stop) })
	if wait {
		<-z.done
	}
}

// queueMarker hands a committed marker to the sweeper. When the sweeper
// lags maxPending markers behind, the writer sweeps a batch itself: the
// queue (memory, and the markers Open would redo) stays bounded.
// REQUIRES: no counter stripe lock held (task locks may be).
func (s *Store) queueMarker(key []byte, counters [][]byte) {
	z := &s.zeros
	z.mu.Lock()
	z.pending = append(z.pending, pendingMarker{key: key, counters: counters})
	lag := len(z.pending)
	z.mu.Unlock()
	select {
	case z.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
	if lag >= maxPending {
		if _, err := s.sweepOnce(); err != nil {
			s.logger.Errorf("pebblestore: delete zero counters (Open redoes it): %v", err)
		}
	}
}

// takeMarkers removes and returns up to sweepBatch queued markers.
func (z *zeroSweeper) takeMarkers() []pendingMarker {
	z.mu.Lock()
	defer z.mu.Unlock()
	n := min(len(z.pending), sweepBatch)
	batch := z.pending[:n:n]
	z.pending = z.pending[n:]
	if len(z.pending) == 0 {
		z.pending = nil // let the backing array go
	}
	return batch
}

// sweepPending sweeps the markers queued when it is called, a batch at a
// time, until they are swept or stop (if not nil) is closed; markers
// queued meanwhile wait for the next call, so writers that keep queuing
// cannot keep it from returning. When it returns nil with stop open,
// every marker queued before the call is swept (the queue is FIFO). A
// failed batch is lost to the queue, not to the database: its markers
// stay for Open.
func (s *Store) sweepPending(stop <-chan struct{}) error {
	z := &s.zeros
	z.mu.Lock()
	left := len(z.pending)
	z.mu.Unlock()
	for left > 0 {
		select {
		case <-stop:
			return nil
		default:
		}
		more, err := s.sweepOnce()
		if err != nil || !more {
			return err
		}
		left -= sweepBatch
	}
	// A batch another sweeper took before the call may still be running:
	// sweeping (held over a batch) orders this return after it.
	z.sweeping.Lock()
	//lint:ignore SA2001 an empty critical section on purpose: it waits for a batch in progress
	z.sweeping.Unlock()
	return nil
}

// sweepOnce sweeps one batch of queued markers; more is false when the
// queue was empty. It holds sweeping over taking and sweeping, so when
// it finds the queue empty every batch taken before is swept.
func (s *Store) sweepOnce() (more bool, err error) {
	z := &s.zeros
	z.sweeping.Lock()
	defer z.sweeping.Unlock()
	defer s.catch("delete zero counters", &err)
	batch := z.takeMarkers()
	if len(batch) == 0 {
		return false, nil
	}
	return true, s.sweepMarkers(batch, pebble.NoSync)
}

// sweepMarkers deletes, in one batch committed with wo, those of the
// markers' counters that are zero, under the exclusive side of their
// stripes, and the markers.
func (s *Store) sweepMarkers(batch []pendingMarker, wo *pebble.WriteOptions) error {
	var keys [][]byte
	seen := map[string]bool{}
	for _, m := range batch {
		for _, k := range m.counters {
			if !seen[string(k)] {
				seen[string(k)] = true
				keys = append(keys, k)
			}
		}
	}
	zero, err := s.zeroCounters(keys)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if len(zero) > 0 {
		var stripes []int
		for _, k := range zero {
			stripes = append(stripes, s.counterStripe(k))
		}
		defer lockStripes(stripes, func(i int) { s.counterLocks[i].Lock() }, func(i int) { s.counterLocks[i].Unlock() })()
		// Again under the locks: a merge may have committed since.
		if zero, err = s.zeroCounters(zero); err != nil {
			return err
		}
	}
	for _, k := range zero {
		_ = b.Delete(k, nil)
	}
	for _, m := range batch {
		_ = b.Delete(m.key, nil)
	}
	if err := b.Commit(wo); err != nil {
		return fmt.Errorf("commit: %v", err)
	}
	return nil
}
