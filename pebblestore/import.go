package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
	"github.com/a2astore/a2astore/pebblestore/internal/desckey"
)

// Bulk export and import (SPEC X1): a copy between backends reads tasks
// with Export and writes them with Import exactly as they were stored.
var (
	_ engine.Exporter = (*Store)(nil)
	_ engine.Importer = (*Store)(nil)
)

// Export implements engine.Exporter: it walks the global ordering index
// from after, reading each task's record, body and (with Options.Log) log
// from one snapshot.
func (s *Store) Export(ctx context.Context, after *engine.Cursor, limit int) (_ []engine.StoredTask, err error) {
	if err := engine.ValidateExport(limit); err != nil {
		return nil, err
	}
	exit, err := s.enter("export")
	if err != nil {
		return nil, err
	}
	defer exit()
	defer s.catch("export", &err)
	snap := s.db.NewSnapshot()
	defer snap.Close()
	internal := func(err error) error { return fmt.Errorf("pebblestore: export: %v: %w", err, engine.ErrInternal) }
	lower := []byte{tagGlobal}
	var skip []byte
	if after != nil {
		lower = globalKey(*after)
		skip = lower
	}
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{tagGlobal + 1}})
	if err != nil {
		return nil, internal(err)
	}
	defer it.Close()
	var out []engine.StoredTask
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		if skip != nil && bytes.Equal(it.Key(), skip) {
			continue
		}
		c, err := decodeIndexCursor(it.Key(), 1)
		if err != nil {
			return nil, err
		}
		st, err := s.exportOne(snap, c)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	if err := it.Error(); err != nil {
		return nil, internal(err)
	}
	return out, ctx.Err()
}

// exportOne reads the task at cursor c from snap: record, body and log.
func (s *Store) exportOne(snap *pebble.Snapshot, c engine.Cursor) (engine.StoredTask, error) {
	get := func(k []byte, what string) ([]byte, error) {
		v, closer, err := snap.Get(k)
		if err != nil {
			return nil, fmt.Errorf("pebblestore: export %q: %s: %v: %w", c.ID, what, err, engine.ErrInternal)
		}
		defer closer.Close()
		return bytes.Clone(v), nil
	}
	v, err := get(recordKey(c.ID), "record")
	if err != nil {
		return engine.StoredTask{}, err
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return engine.StoredTask{}, err
	}
	if rec.updatedAt != c.UpdatedAt {
		return engine.StoredTask{}, fmt.Errorf("pebblestore: export %q: index at %d, record at %d: %w", c.ID, c.UpdatedAt, rec.updatedAt, engine.ErrInternal)
	}
	body, err := get(bodyKey(c), "body")
	if err != nil {
		return engine.StoredTask{}, err
	}
	t, err := decodeBody(body, c.ID, rec.light.contextID)
	if err != nil {
		return engine.StoredTask{}, err
	}
	st := engine.StoredTask{Record: engine.Record{Task: t, Revision: rec.revision, Cursor: c, Owner: rec.light.owner}}
	if !s.log {
		return st, nil
	}
	p := logPrefix(c.ID)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: desckey.PrefixEnd(p)})
	if err != nil {
		return engine.StoredTask{}, fmt.Errorf("pebblestore: export %q: log: %v: %w", c.ID, err, engine.ErrInternal)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		_, l, err := decodeLog(it.Key(), it.Value())
		if err != nil {
			return engine.StoredTask{}, err
		}
		st.Log = append(st.Log, l)
	}
	if err := it.Error(); err != nil {
		return engine.StoredTask{}, fmt.Errorf("pebblestore: export %q: log: %v: %w", c.ID, err, engine.ErrInternal)
	}
	return st, nil
}

// Import implements engine.Importer: one batch holding every task's
// record, index, body and log keys and the counters' deltas, committed
// under the tasks' write locks (so a concurrent Create of the same ID
// either comes first and fails the import, or fails itself).
func (s *Store) Import(ctx context.Context, tasks []engine.StoredTask) (err error) {
	seen := make(map[a2a.TaskID]struct{}, len(tasks))
	for i := range tasks {
		if tasks[i].Task == nil {
			return fmt.Errorf("pebblestore: import: nil task: %w", engine.ErrInvalidArgument)
		}
		if err := engine.ValidateStoredTask(&tasks[i], s.limits); err != nil {
			return err
		}
		id := tasks[i].Task.ID
		if _, dup := seen[id]; dup {
			return fmt.Errorf("pebblestore: import: task %q twice: %w", id, engine.ErrAlreadyExists)
		}
		seen[id] = struct{}{}
	}
	if len(tasks) == 0 {
		return nil
	}
	exit, err := s.enter("import")
	if err != nil {
		return err
	}
	defer exit()
	defer s.catch("import", &err)
	stripes := make([]int, 0, len(tasks))
	for i := range tasks {
		stripes = append(stripes, s.stripeOf([]byte(tasks[i].Task.ID)))
	}
	defer lockStripes(slices.Clone(stripes), func(i int) { s.locks[i].Lock() }, func(i int) { s.locks[i].Unlock() })()
	b := s.db.NewBatch()
	defer b.Close()
	var counters counterDeltas
	for i := range tasks {
		st := &tasks[i]
		if _, err := s.load(st.Task.ID, false); err == nil {
			return fmt.Errorf("pebblestore: import %q: %w", st.Task.ID, engine.ErrAlreadyExists)
		} else if !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		if err := s.stageImport(b, &counters, st); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.commitCounted(b, &counters); err != nil {
		return fmt.Errorf("pebblestore: import: %w", err)
	}
	s.trim.Lock()
	s.trim.cursor = engine.TrimFrom(s.trim.cursor, tasks)
	s.trim.Unlock()
	for i := range tasks {
		s.wake(tasks[i].Task.ID)
	}
	return nil
}

// stageImport adds to b the keys of st as stored (what stage writes for a
// new task, at st's own time and revision) and its log entries.
func (s *Store) stageImport(b *pebble.Batch, counters *counterDeltas, st *engine.StoredTask) error {
	body, err := taskcodec.EncodeTask(st.Task)
	if err != nil {
		return err
	}
	l, err := lightOf(st.Task, st.Owner)
	if err != nil {
		return err
	}
	rec := record{revision: st.Revision, updatedAt: st.Cursor.UpdatedAt, light: l}
	lv := l.append(nil)
	_ = b.Set(recordKey(st.Task.ID), rec.append(nil), nil)
	for _, k := range indexKeys(st.Owner, l.contextID, l.state, st.Cursor) {
		_ = b.Set(k, lv, nil)
	}
	_ = b.Set(bodyKey(st.Cursor), body, nil)
	counters.task(&l, +1)
	if s.log {
		for i := range st.Log {
			_ = b.Set(logKey(st.Task.ID, st.Log[i].Revision), encodeLogValue(&st.Log[i]), nil)
		}
	}
	return nil
}

// Tail implements engine.Importer: it reads the global ordering index
// backward from its end.
func (s *Store) Tail(ctx context.Context, n int) (_ []engine.Cursor, err error) {
	if err := engine.ValidateExport(n); err != nil {
		return nil, err
	}
	exit, err := s.enter("tail")
	if err != nil {
		return nil, err
	}
	defer exit()
	defer s.catch("tail", &err)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagGlobal}, UpperBound: []byte{tagGlobal + 1}})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: tail: %v: %w", err, engine.ErrInternal)
	}
	defer it.Close()
	var out []engine.Cursor
	for ok := it.Last(); ok && len(out) < n; ok = it.Prev() {
		c, err := decodeIndexCursor(it.Key(), 1)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("pebblestore: tail: %v: %w", err, engine.ErrInternal)
	}
	slices.Reverse(out)
	return out, ctx.Err()
}
