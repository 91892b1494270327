package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"

	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine"
)

// Counters stay bounded by the live tasks.
//
// Counters are merge keys: a write merges deltas without reading, so
// concurrent writers share fsyncs and hold only the shared side of
// stripe locks (below, and counter_fold.go). Pebble's merger cannot
// drop a key whose sum reaches zero (v2.1.7 panics on a
// DeletableValueMerger that asks to), so without more every context, every
// (context, state), every owner and (owner, context) a task ever had would
// leave a zero-valued key behind for good: about eight per task in A2A,
// where most tasks have their own context.
//
// So a write that lowers a counter other than the global ones (all tasks,
// tasks per state: nine keys at most, left alone) deletes it once it is
// zero. The write merges its deltas and, in the same batch, records a
// marker z ‖ seq listing the counters it lowered; it commits holding the
// shared side of the stripe locks (counterLocks) of every counter it
// merges into (the global ones have stripes of their own, which only a
// fold locks exclusively). Once
// committed it hands the marker to the zero sweeper (zero_sweeper.go) and
// returns: the sweeper reads the counters back, and for those at zero
// takes their stripes' exclusive locks, reads them again and deletes those
// still zero, together with the markers, in one batch. The exclusive lock
// is what makes the delete safe: no merge into the counter can commit
// between the read and the delete. Writers of other stripes never wait
// for it, and those of the same stripe only for that short delete (a
// NoSync commit). A crash before the sweeper's delete leaves the marker: Open
// runs it again (recoverCounters) before serving. A lost NoSync delete
// loses its marker's delete too (one batch), so Open redoes it.
//
// Databases written before this (zero-valued keys left behind) are swept
// once at Open, which then records m ‖ "zerofree"; CheckInvariants flags a
// zero-valued counter key other than the global ones, and any marker.

const (
	tagMarker = 'z'
	// counterStripes is the number of counter stripe locks of the
	// counters that are deleted at zero; globalStripes, of the global
	// ones, which only folds lock exclusively (counter_fold.go).
	counterStripes = 1024
	globalStripes  = 16
)

// zeroFreeKey records that the database holds no zero-valued counter key
// (but the global ones) outside pending markers.
var zeroFreeKey = []byte{tagMeta, 'z', 'e', 'r', 'o', 'f', 'r', 'e', 'e'}

// globalCounter reports whether k is one of the counters that are never
// deleted: all tasks, and tasks per state.
func globalCounter(k []byte) bool {
	if len(k) < 2 || k[0] != tagCounter {
		return false
	}
	switch k[1] {
	case counterTotal:
		return len(k) == 2
	case counterState:
		_, ok := stateFromCode(k[len(k)-1])
		return len(k) == 3 && ok
	}
	return false
}

// counterDeltas accumulates the counter changes of one batch, by key, in
// the order first seen.
type counterDeltas struct {
	keys [][]byte
	d    map[string]int64
}

func (c *counterDeltas) add(k []byte, d int64) {
	if c.d == nil {
		c.d = map[string]int64{}
	}
	if _, ok := c.d[string(k)]; !ok {
		c.keys = append(c.keys, k)
	}
	c.d[string(k)] += d
}

// task adds d to every counter of a task with the light fields l (its
// owner, context and state): the task comes or goes.
func (c *counterDeltas) task(l *light, d int64) {
	exist, shape := counterKeys(l.owner, l.contextID, l.state)
	for _, k := range append(shape, exist...) {
		c.add(k, d)
	}
}

// move moves a task of one owner from the counters of its light fields
// from to those of to (another context or state): a counter both count in
// (the same state, or the same context) is left alone.
func (c *counterDeltas) move(from, to *light) {
	_, was := counterKeys(from.owner, from.contextID, from.state)
	_, is := counterKeys(to.owner, to.contextID, to.state)
	for i := range was {
		if !bytes.Equal(was[i], is[i]) {
			c.add(was[i], -1)
			c.add(is[i], +1)
		}
	}
}

// counterChanges returns the deltas of the tasks gone (each -1) and come
// (each +1).
func counterChanges(gone, came []*light) *counterDeltas {
	c := &counterDeltas{}
	for _, l := range gone {
		c.task(l, -1)
	}
	for _, l := range came {
		c.task(l, +1)
	}
	return c
}

func (s *Store) counterStripe(k []byte) int {
	if globalCounter(k) {
		return counterStripes + int(maphash.Bytes(s.seed, k)%globalStripes)
	}
	return int(maphash.Bytes(s.seed, k) % counterStripes)
}

// commitCounted merges c's deltas into b and commits it (Options.NoSync
// decides the sync) holding the shared side of the stripes of every
// counter it changes (a fold, or the delete of a zero counter, holds the
// exclusive side); then it queues its marker for
// the sweeper, which deletes the counters it lowered that are now zero
// (see above).
// REQUIRES: the write locks of the tasks b changes held.
func (s *Store) commitCounted(b *pebble.Batch, c *counterDeltas) error {
	var stripes []int
	var lowered [][]byte
	for _, k := range c.keys {
		d := c.d[string(k)]
		if d == 0 {
			continue
		}
		_ = b.Merge(k, counterDelta(d), nil)
		stripes = append(stripes, s.counterStripe(k)) // the global ones too: folds (counter_fold.go)
		if globalCounter(k) {
			continue
		}
		if d < 0 {
			lowered = append(lowered, k)
		}
	}
	var marker []byte
	if len(lowered) > 0 {
		marker = binary.BigEndian.AppendUint64([]byte{tagMarker}, s.markerSeq.Add(1))
		_ = b.Set(marker, encodeMarker(lowered), nil)
	}
	if err := s.commitShared(b, stripes); err != nil {
		return fmt.Errorf("commit: %v: %w", err, engine.ErrInternal)
	}
	if marker != nil {
		s.queueMarker(marker, lowered)
	}
	return nil
}

// commitShared commits b holding the shared side of the stripes. The
// unlock is deferred: Pebble's fatal error is a panic (the write's frame
// turns it into a failed store), and a stripe it left held would keep the
// sweeper, and every later write of the stripe, waiting forever.
func (s *Store) commitShared(b *pebble.Batch, stripes []int) error {
	defer lockStripes(stripes, func(i int) { s.counterLocks[i].RLock() }, func(i int) { s.counterLocks[i].RUnlock() })()
	return b.Commit(s.wo)
}

// lockStripes locks each of the stripes once, in ascending order (so two
// holders of several never wait for each other in a cycle), and returns
// the function that unlocks them.
func lockStripes(stripes []int, lock, unlock func(int)) func() {
	release, _ := tryLockStripes(stripes, func(i int) bool { lock(i); return true }, unlock)
	return release
}

// zeroCounters returns those of keys that have a key whose value is zero,
// read with one iterator (cheaper than a Get each: merge keys are read
// through every level).
func (s *Store) zeroCounters(keys [][]byte) ([][]byte, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagCounter}, UpperBound: []byte{tagCounter + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var zero [][]byte
	for _, k := range keys {
		if !it.SeekGE(k) || !bytes.Equal(it.Key(), k) {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		if n, err := decodeCounter(v); err != nil {
			return nil, err
		} else if n == 0 {
			zero = append(zero, k)
		}
	}
	return zero, it.Error()
}

// counterValue reads a counter; found is false when it has no key.
func (s *Store) counterValue(k []byte) (n int64, found bool, err error) {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	n, err = decodeCounter(v)
	return n, true, err
}

// encodeMarker lists counter keys: uvarint length ‖ key, each.
func encodeMarker(keys [][]byte) []byte {
	var v []byte
	for _, k := range keys {
		v = binary.AppendUvarint(v, uint64(len(k)))
		v = append(v, k...)
	}
	return v
}

func decodeMarker(v []byte) ([][]byte, error) {
	var keys [][]byte
	for len(v) > 0 {
		k, rest, ok := cutLen(v)
		if !ok || len(k) < 2 || k[0] != tagCounter {
			return nil, errCorruptValue
		}
		keys, v = append(keys, bytes.Clone(k)), rest
	}
	return keys, nil
}

// recoverCounters runs at Open, before the store serves: it redoes the
// zero deletes of the markers a crash left, and sweeps a database that was
// never swept (written before counters were deleted at zero) once.
func (s *Store) recoverCounters(dir string) (err error) {
	defer s.catch("open", &err)
	internal := func(err error) error {
		return fmt.Errorf("pebblestore: open %s: delete zero counters: %v: %w", dir, err, engine.ErrInternal)
	}
	markers, err := s.collect([]byte{tagMarker}, func(k, v []byte) ([]byte, error) { return k, nil })
	if err != nil {
		return internal(err)
	}
	var batch []pendingMarker
	for i, m := range markers {
		v, closer, err := s.db.Get(m)
		if err != nil {
			return internal(err)
		}
		keys, err := decodeMarker(v)
		closer.Close()
		if err != nil {
			return internal(fmt.Errorf("marker %x: %v", m, err))
		}
		batch = append(batch, pendingMarker{key: m, counters: keys})
		if len(batch) == sweepBatch || i == len(markers)-1 {
			if err := s.sweepMarkers(batch, pebble.Sync); err != nil {
				return internal(err)
			}
			batch = nil
		}
	}
	if _, closer, err := s.db.Get(zeroFreeKey); err == nil {
		closer.Close()
		return nil
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return internal(err)
	}
	// Once: every zero-valued counter key but the global ones, in
	// batches while reading (nothing else writes during Open).
	n, err := s.sweepZeroCounters()
	if err != nil {
		return internal(err)
	}
	if n > 0 {
		s.logger.Infof("pebblestore: %s: %d zero-valued counter keys left by an earlier release deleted", dir, n)
	}
	if err := s.db.Set(zeroFreeKey, nil, pebble.Sync); err != nil {
		return internal(err)
	}
	return nil
}

// sweepZeroCounters deletes every zero-valued counter key but the global
// ones and returns how many. REQUIRES: no concurrent writer (Open).
func (s *Store) sweepZeroCounters() (int, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagCounter}, UpperBound: []byte{tagCounter + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	b := s.db.NewBatch()
	defer func() { b.Close() }()
	deleted := 0
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return deleted, err
		}
		if n, err := decodeCounter(v); err != nil {
			return deleted, err
		} else if n != 0 || globalCounter(it.Key()) {
			continue
		}
		_ = b.Delete(it.Key(), nil)
		if deleted++; b.Count() >= uint32(upgradeChunk) {
			if err := b.Commit(pebble.Sync); err != nil {
				return deleted, err
			}
			b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := it.Error(); err != nil {
		return deleted, err
	}
	return deleted, b.Commit(pebble.Sync)
}

// collect returns f of every key under prefix (its copy), leaving out nil
// results.
func (s *Store) collect(prefix []byte, f func(k, v []byte) ([]byte, error)) ([][]byte, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: []byte{prefix[0] + 1}})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, err
		}
		k, err := f(it.Key(), v)
		if err != nil {
			return nil, err
		}
		if k != nil {
			out = append(out, bytes.Clone(k))
		}
	}
	return out, it.Error()
}
