package pebblestore

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Counter folds keep a total's read bounded by the request, not by the
// writes before it (SPEC C5).
//
// A counter is a merge key (counters.go): its read merges every delta not
// yet compacted — in the memtable, one per write since the last flush, so
// thousands (BenchmarkTotalAfterWrites: 206–214 µs after 10,000 creates
// against 3–6 µs flushed). A read that stepped over more than foldAfter
// points for its counter queues the key; the zero sweeper's goroutine
// folds the queued keys: under the exclusive side of their stripes (no
// merge into them can commit meanwhile) it reads each and sets it to its
// value, in one NoSync batch. Later reads stop at that value and the
// deltas merged after it. A fold changes no value, so a lost or
// repeated one is harmless; a counter at zero is left to the sweeper
// (its key must go, not stay at zero), unless it is a global one.
//
// Writers hold the shared side of the stripes of every counter they
// merge into, the global ones included (commitCounted).

// foldAfter is how many points a counter's read may step over before its
// key is folded.
const foldAfter = 32

// counterFolds is the queue of counter keys to fold.
type counterFolds struct {
	mu      sync.Mutex
	pending map[string]struct{}
}

// queueFold queues k for a fold and wakes the sweeper goroutine.
func (s *Store) queueFold(k []byte) {
	f := &s.folds
	f.mu.Lock()
	if f.pending == nil {
		f.pending = map[string]struct{}{}
	}
	f.pending[string(k)] = struct{}{}
	f.mu.Unlock()
	select {
	case s.zeros.wake <- struct{}{}:
	default: // a wake-up is already pending, or the sweeper is not running
	}
}

// takeFolds removes and returns the queued keys, at most sweepBatch.
func (f *counterFolds) take() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys [][]byte
	for k := range f.pending {
		if len(keys) == sweepBatch {
			break
		}
		keys = append(keys, []byte(k))
		delete(f.pending, k)
	}
	return keys
}

// foldPending folds the queued counter keys, a batch at a time.
func (s *Store) foldPending() error {
	for {
		keys := s.folds.take()
		if len(keys) == 0 {
			return nil
		}
		if err := s.fold(keys); err != nil {
			return err
		}
	}
}

// fold sets each of keys to its value, under the exclusive side of their
// stripes, in one NoSync batch.
func (s *Store) fold(keys [][]byte) (err error) {
	defer s.catch("fold counters", &err)
	var stripes []int
	for _, k := range keys {
		stripes = append(stripes, s.counterStripe(k))
	}
	defer lockStripes(stripes, func(i int) { s.counterLocks[i].Lock() }, func(i int) { s.counterLocks[i].Unlock() })()
	b := s.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		n, found, err := s.counterValue(k)
		if err != nil {
			return err
		}
		if found && (n != 0 || globalCounter(k)) {
			_ = b.Set(k, counterDelta(n), nil)
		}
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("pebblestore: fold counters: commit: %v", err)
	}
	return nil
}

// readCounter reads the counter k with it (positioned anywhere), and
// queues k for a fold when the read stepped over more than foldAfter
// points. found is false when k has no key.
func (s *Store) readCounter(it *pebble.Iterator, k []byte) (n int64, found bool, err error) {
	before := it.Stats().InternalStats.PointCount
	it.SetBounds(k, append(bytes.Clone(k), 0))
	if !it.First() {
		return 0, false, it.Error()
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return 0, false, err
	}
	if it.Stats().InternalStats.PointCount-before > foldAfter {
		s.queueFold(k)
	}
	n, err = decodeCounter(v)
	return n, true, err
}
