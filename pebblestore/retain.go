package pebblestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine"
)

var _ engine.Retainer = (*Store)(nil)

// RemoveExpired removes the expired tasks of one batch (engine.Retainer,
// R1, R2). It reads the global ordering index backward from its last key
// (the oldest task) or from just before req.After's key: one seek, then at
// most Limit+1 steps, deciding on the index values' light fields alone
// (no record or body is read for a task that is not due). The due tasks
// are then removed as Delete removes them, in one batch under their write
// locks: each is re-read there and left alone when it moved meanwhile (a
// mutation gives it a new cursor, which is no longer due or is found by a
// later batch).
func (s *Store) RemoveExpired(ctx context.Context, req engine.RetainRequest) (res engine.RetainResult, err error) {
	if err := req.Validate(); err != nil {
		return engine.RetainResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return engine.RetainResult{}, err
	}
	exit, err := s.enter("remove expired")
	if err != nil {
		return engine.RetainResult{}, err
	}
	defer exit()
	defer s.catch("remove expired", &err)
	scan, due, err := s.scanExpired(&req)
	if err != nil {
		return engine.RetainResult{}, err
	}
	if len(due) > 0 {
		if retainScanned != nil {
			retainScanned()
		}
		n, err := s.removeDue(&req, due)
		if err != nil {
			return engine.RetainResult{}, err
		}
		for range n {
			scan.Removed()
		}
	}
	return scan.Result(), nil
}

// retainScanned, when set (by tests), runs between a batch's scan and its
// removals, holding no lock.
var retainScanned func()

// scanExpired reads the global index oldest first and returns the scan
// and the cursors of the due tasks.
func (s *Store) scanExpired(req *engine.RetainRequest) (*engine.RetainScan, []engine.Cursor, error) {
	prefix := []byte{tagGlobal}
	upper := []byte{tagGlobal + 1}
	if req.After != nil {
		upper = globalKey(*req.After) // SeekLT: strictly newer than After
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
	if err != nil {
		return nil, nil, fmt.Errorf("pebblestore: remove expired: %v: %w", err, engine.ErrInternal)
	}
	defer it.Close()
	scan := engine.NewRetainScan(req)
	var due []engine.Cursor
	for ok := it.Last(); ok; ok = it.Prev() {
		c, err := decodeIndexCursor(it.Key(), 1)
		if err != nil {
			return nil, nil, err
		}
		l, err := decodeLight(it.Value())
		if err != nil {
			return nil, nil, err
		}
		d, more := scan.Visit(c, l.state)
		if d {
			due = append(due, c)
		}
		if !more {
			break
		}
	}
	if err := it.Error(); err != nil {
		return nil, nil, fmt.Errorf("pebblestore: remove expired: %v: %w", err, engine.ErrInternal)
	}
	return scan, due, nil
}

// removeDue removes the tasks at the due cursors that are still there and
// still due, in one batch under their write locks (taken in stripe order,
// so two batches never wait for each other in a cycle), and returns how
// many it removed.
func (s *Store) removeDue(req *engine.RetainRequest, due []engine.Cursor) (int, error) {
	var stripes []int
	for _, c := range due {
		stripes = append(stripes, s.stripeOf([]byte(c.ID)))
	}
	defer lockStripes(stripes, func(i int) { s.locks[i].Lock() }, func(i int) { s.locks[i].Unlock() })()
	b := s.db.NewBatch()
	defer b.Close()
	var gone []*current
	for _, c := range due {
		old, err := s.load(c.ID, false)
		if err != nil {
			if errors.Is(err, engine.ErrNotFound) {
				continue // deleted meanwhile
			}
			return 0, err
		}
		if old.cursor() != c || !req.Due(old.rec.updatedAt, old.rec.light.state) {
			continue // mutated meanwhile
		}
		_ = b.Delete(recordKey(c.ID), nil)
		deleteTaskKeys(b, old)
		s.deleteLog(b, c.ID)
		if err := s.markDeleted(b, c.ID, old.rec.updatedAt); err != nil {
			return 0, err
		}
		gone = append(gone, old)
	}
	if len(gone) == 0 {
		return 0, nil
	}
	lights := make([]*light, len(gone))
	for i, old := range gone {
		lights[i] = &old.rec.light
	}
	if err := s.commitCounted(b, counterChanges(lights, nil)); err != nil {
		return 0, fmt.Errorf("pebblestore: remove expired: %w", err)
	}
	return len(gone), nil
}
