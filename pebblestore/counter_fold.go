package pebblestore

import (
	"bytes"
	"fmt"
	"slices"
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
// value, in one NoSync batch. It first only tries the locks, stripe by
// stripe: a fold that would wait for a writer in flight (a Sync commit's
// fsync) would hold every later writer of the stripe behind it — all
// writers, for the global counters — so the keys of a held stripe are
// queued again for the next wake-up, and the others folded. A key whose
// stripe was held foldWaitAfter times waits for it the next time: under
// Sync writers back to back some writer nearly always holds a global
// counter's stripe, and a fold that only tried would never happen (the
// writers then wait behind it for one commit). Later reads stop at that value and the
// deltas merged after it. A fold changes no value, so a lost or
// repeated one is harmless; a counter at zero is left to the sweeper
// (its key must go, not stay at zero), unless it is a global one.
//
// Writers hold the shared side of the stripes of every counter they
// merge into, the global ones included (commitCounted); the global
// counters' stripes are their own, so a zero sweep never locks them.

// foldAfter is how many points a counter's read may step over before its
// key is folded.
const foldAfter = 32

// foldWaitAfter is how many folds of a key may find its stripe held before
// the next one waits for it.
const foldWaitAfter = 3

// counterFolds is the queue of counter keys to fold, each with the folds
// that found its stripe held since it was queued.
type counterFolds struct {
	mu      sync.Mutex
	pending map[string]int
}

// foldKey is a queued counter key and the folds that found its stripe
// held.
type foldKey struct {
	k    []byte
	held int
}

// queueFold queues k for a fold and wakes the sweeper goroutine.
func (s *Store) queueFold(k []byte) {
	f := &s.folds
	f.mu.Lock()
	if f.pending == nil {
		f.pending = map[string]int{}
	}
	if _, ok := f.pending[string(k)]; !ok {
		f.pending[string(k)] = 0
	}
	f.mu.Unlock()
	select {
	case s.zeros.wake <- struct{}{}:
	default: // a wake-up is already pending, or the sweeper is not running
	}
}

// take removes and returns queued keys, at most sweepBatch.
func (f *counterFolds) take() []foldKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []foldKey
	for k, held := range f.pending {
		if len(keys) == sweepBatch {
			break
		}
		keys = append(keys, foldKey{[]byte(k), held})
		delete(f.pending, k)
	}
	return keys
}

// again queues keys, whose stripe was held, again, unless a read queued
// them meanwhile.
func (f *counterFolds) again(keys []foldKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		f.pending[string(k.k)] = max(f.pending[string(k.k)], k.held+1)
	}
}

// foldPending folds the counter keys queued when it is called, a batch at
// a time, until they are done or stop (if not nil) is closed: reads that
// keep queuing cannot keep it from returning.
func (s *Store) foldPending(stop <-chan struct{}) error {
	s.folds.mu.Lock()
	left := len(s.folds.pending)
	s.folds.mu.Unlock()
	var held []foldKey // queued again once the pass ends, not taken again in it
	defer func() { s.folds.again(held) }()
	for ; left > 0; left -= sweepBatch {
		select {
		case <-stop:
			return nil
		default:
		}
		keys := s.folds.take()
		if len(keys) == 0 {
			return nil
		}
		again, err := s.fold(keys)
		held = append(held, again...)
		if err != nil {
			return err
		}
	}
	return nil
}

// fold sets each of keys to its value, under the exclusive side of their
// stripes, in one NoSync batch, and returns the keys of the stripes it
// found held (lockFoldStripes), for the caller to queue again.
func (s *Store) fold(keys []foldKey) (held []foldKey, err error) {
	defer s.catch("fold counters", &err)
	unlock, locked, held := s.lockFoldStripes(keys)
	defer unlock()
	b := s.db.NewBatch()
	defer b.Close()
	for _, k := range locked {
		n, found, err := s.counterValue(k)
		if err != nil {
			return held, err
		}
		if found && (n != 0 || globalCounter(k)) {
			_ = b.Set(k, counterDelta(n), nil)
		}
	}
	if b.Empty() {
		return held, nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return held, fmt.Errorf("fold counters: commit: %v", err)
	}
	return held, nil
}

// lockFoldStripes takes the exclusive side of the stripes of keys, in
// ascending order (as every holder of several: no cycle), and returns
// the function that releases them, the keys whose stripe it holds, and
// those whose stripe it could not take (one more time found held). It
// only tries a stripe, unless one of its keys found it held foldWaitAfter
// times already.
func (s *Store) lockFoldStripes(keys []foldKey) (unlock func(), locked [][]byte, again []foldKey) {
	byStripe := map[int][]foldKey{}
	var stripes []int
	for _, k := range keys {
		i := s.counterStripe(k.k)
		if _, ok := byStripe[i]; !ok {
			stripes = append(stripes, i)
		}
		byStripe[i] = append(byStripe[i], k)
	}
	slices.Sort(stripes)
	var held []int
	for _, i := range stripes {
		ks := byStripe[i]
		if !s.counterLocks[i].TryLock() {
			if !slices.ContainsFunc(ks, func(k foldKey) bool { return k.held >= foldWaitAfter }) {
				again = append(again, ks...)
				continue
			}
			s.counterLocks[i].Lock()
		}
		held = append(held, i)
		for _, k := range ks {
			locked = append(locked, k.k)
		}
	}
	return func() {
		for _, i := range held {
			s.counterLocks[i].Unlock()
		}
	}, locked, again
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

// tryLockStripes tries to lock each of the stripes once, in ascending
// order; it returns the function that unlocks them and true, or, when one
// is held, unlocks those it took and returns false.
func tryLockStripes(stripes []int, tryLock func(int) bool, unlock func(int)) (func(), bool) {
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for n, i := range stripes {
		if !tryLock(i) {
			for _, j := range stripes[:n] {
				unlock(j)
			}
			return nil, false
		}
	}
	return func() {
		for _, i := range stripes {
			unlock(i)
		}
	}, true
}
