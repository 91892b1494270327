package memstore

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// Bulk export and import (SPEC X1): a copy reads tasks with Export and
// writes them with Import exactly as they were stored; Import is also the
// bulk build of a store (loaders and benchmarks).
var (
	_ engine.Exporter = (*Store)(nil)
	_ engine.Importer = (*Store)(nil)
)

// Export implements engine.Exporter: it walks the global index from after
// under one shared lock, taking each task's record, stored content and
// (with Options.Log) log, and decodes the tasks once the lock is released.
func (s *Store) Export(ctx context.Context, after *engine.Cursor, limit int) ([]engine.StoredTask, error) {
	if err := engine.ValidateExport(limit); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type taken struct {
		rec engine.Record
		c   content
		log []engine.LogEntry
	}
	var err error
	var got []taken
	s.mu.RLock()
	if s.mu.closed {
		s.mu.RUnlock()
		return nil, errClosed
	}
	s.scanRange(keyRange{}, after, limit, func(e *entry) bool {
		rec, c := s.snapshotLocked(e, true)
		var log []engine.LogEntry
		if log, err = decodeLog(s.mu.logs.view(e.slot), 0, math.MaxInt); err != nil {
			err = fmt.Errorf("memstore: export %q: log: %w", s.mu.slots.id(e), err)
			return false
		}
		got = append(got, taken{rec, c, log})
		return len(got) < limit
	})
	s.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	out := make([]engine.StoredTask, len(got))
	for i := range got {
		rec, err := decoded(got[i].rec, got[i].c)
		if err != nil {
			return nil, fmt.Errorf("memstore: export %q: %w", got[i].rec.Cursor.ID, err)
		}
		out[i] = engine.StoredTask{Record: rec, Log: got[i].log}
	}
	return out, nil
}

// imported is a task to import, checked and encoded outside the lock.
type imported struct {
	st  *engine.StoredTask
	enc encoded
	log []byte // its log, encoded (appendLogEntry); nil without the log
}

// Import implements engine.Importer. Every task is checked and encoded
// before the write lock is taken; under it, the batch fails as a whole if
// the store holds any of its IDs, and otherwise each task is stored as
// Create would have stored it, at its own time, revision and owner, in
// every index and counter, with its log (Options.Log). A log the store
// could not have kept — not consecutive revisions ending at the task's,
// its last entry at the task's time and state (K7; a trimmed log may start
// anywhere) — fails the call with ErrInvalidArgument, as CheckInvariants
// would report it.
func (s *Store) Import(ctx context.Context, tasks []engine.StoredTask) error {
	batch := make([]imported, len(tasks))
	seen := make(map[a2a.TaskID]struct{}, len(tasks))
	for i := range tasks {
		st := &tasks[i]
		if st.Task == nil {
			return fmt.Errorf("memstore: import: nil task: %w", engine.ErrInvalidArgument)
		}
		if err := engine.ValidateStoredTask(st, s.limits); err != nil {
			return err
		}
		enc, err := s.encode(st.Task)
		if err != nil {
			return err
		}
		if _, dup := seen[st.Task.ID]; dup {
			return fmt.Errorf("memstore: import: task %q twice: %w", st.Task.ID, engine.ErrAlreadyExists)
		}
		seen[st.Task.ID] = struct{}{}
		batch[i] = imported{st: st, enc: enc}
		if s.log && len(st.Log) > 0 {
			if err := checkImportedLog(st, enc.state); err != nil {
				return err
			}
			for j := range st.Log {
				if err := checkLogSize(st.Task.ID, len(batch[i].log), &st.Log[j]); err != nil {
					return err
				}
				batch[i].log = appendLogEntry(batch[i].log, &st.Log[j])
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	if err := s.lockOpen(); err != nil {
		return err
	}
	for i := range batch {
		if _, ok := s.mu.ids.get(&s.mu.slots, batch[i].st.Task.ID); ok {
			s.mu.Unlock()
			return fmt.Errorf("memstore: import %q: %w", batch[i].st.Task.ID, engine.ErrAlreadyExists)
		}
	}
	for i := range batch {
		s.importLocked(&batch[i])
	}
	s.mu.trimmed = engine.TrimFrom(s.mu.trimmed, tasks)
	s.mu.Unlock()
	for i := range batch {
		batch[i].enc.release()
		s.wake(batch[i].st.Task.ID)
	}
	return nil
}

// importLocked stores im as CreateOwned stores a new task, at im's time,
// revision and owner, with its log.
// REQUIRES: s.mu held for writing; no stored task has im's ID.
func (s *Store) importLocked(im *imported) {
	st := im.st
	e := s.mu.slots.alloc()
	e.updatedAt, e.revision = st.Cursor.UpdatedAt, st.Revision
	if st.Owner != "" {
		e.owner = s.mu.owners.intern(st.Owner)
	}
	s.setLocked(e, st.Task.ID, &im.enc)
	s.mu.ids.add(s.mu.slots.id(e), e.slot)
	s.indexLocked(e)
	if im.log != nil {
		s.mu.logs.set(e.slot, im.log)
	}
}

// checkImportedLog checks that st's log (not empty) is one the store could
// have kept: consecutive revisions (ValidateStoredTask has checked that
// they increase) ending at the task's revision, the last entry at the
// task's time and in its state (number state).
func checkImportedLog(st *engine.StoredTask, state uint8) error {
	log := st.Log
	for i := 1; i < len(log); i++ {
		if log[i].Revision != log[i-1].Revision+1 {
			return fmt.Errorf("memstore: import %q: log revisions %d then %d: %w", st.Task.ID, log[i-1].Revision, log[i].Revision, engine.ErrInvalidArgument)
		}
	}
	last := &log[len(log)-1]
	if last.Revision != st.Revision || last.Time != st.Cursor.UpdatedAt || last.State != states[state] {
		return fmt.Errorf("memstore: import %q: last log entry at revision %d, time %d, state %s; task at %d, %d, %s: %w",
			st.Task.ID, last.Revision, last.Time, last.State, st.Revision, st.Cursor.UpdatedAt, states[state], engine.ErrInvalidArgument)
	}
	return nil
}

// Tail implements engine.Importer: it walks the global index backward
// from its end (the oldest task).
func (s *Store) Tail(ctx context.Context, n int) ([]engine.Cursor, error) {
	if err := engine.ValidateExport(n); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, errClosed
	}
	out := make([]engine.Cursor, 0, min(n, s.mu.order.Len()))
	s.mu.order.Reverse(func(it item) bool {
		c := s.mu.slots.cursor(s.mu.slots.at(it.slot))
		c.ID = detached(c.ID)
		out = append(out, c)
		return len(out) < n
	})
	slices.Reverse(out)
	return out, nil
}
