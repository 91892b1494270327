package memstore

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The task log (engine.LogStore, K7): with Options.Log, each task's
// entries are a region of the logs' slab (logslab.go), appended under the
// write lock that makes the revision and removed with the task. TrimLog drops the
// logs of tasks idle long enough, oldest first.
var _ engine.LogStore = (*Store)(nil)

// newLogEntry is the entry of a write storing task because of ev, made
// outside the lock under ctx, whose traceparent it keeps (H2); nothing
// without the log.
func (s *Store) newLogEntry(ctx context.Context, task *a2a.Task, ev a2a.Event) (engine.LogEntry, error) {
	if !s.log {
		return engine.LogEntry{}, nil
	}
	l, err := engine.NewLogEntry(task, ev)
	l.Trace = engine.TraceParent(ctx)
	return l, err
}

// logFitsLocked refuses l when it would take e's log past maxLogBytes
// (checkLogSize); nil without the log.
// REQUIRES: s.mu held.
func (s *Store) logFitsLocked(e *entry, l *engine.LogEntry) error {
	if !s.log {
		return nil
	}
	return checkLogSize(s.mu.slots.id(e), int(s.mu.logs.refs[e.slot].len), l)
}

// logLocked appends l, completed with e's new revision and time, to e's
// log, which logFitsLocked has let it into.
// REQUIRES: s.mu held for writing, e just written.
func (s *Store) logLocked(e *entry, l engine.LogEntry) {
	if !s.log {
		return
	}
	l.Revision, l.Time = e.revision, e.updatedAt
	s.mu.logs.append(e.slot, &l)
}

// wake wakes the log readers of id.
func (s *Store) wake(id a2a.TaskID) {
	if s.log {
		s.hub.Wake(id)
	}
}

// ReadLog implements engine.LogStore.
func (s *Store) ReadLog(ctx context.Context, id a2a.TaskID, after int64, limit int) ([]engine.LogEntry, error) {
	if err := engine.ValidateLogRead(id, after, limit); err != nil {
		return nil, err
	}
	if !s.log {
		return nil, engine.ErrLogDisabled
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, errClosed
	}
	var log []byte
	if slot, ok := s.mu.ids.get(&s.mu.slots, id); ok {
		log = s.mu.logs.view(slot)
	}
	entries, err := decodeLog(log, after, limit)
	if err != nil {
		return nil, fmt.Errorf("memstore: read log %q: %w", id, err)
	}
	return entries, nil
}

// deletion is a deletion's mark, kept in the order deletions were made.
type deletion struct {
	id   a2a.TaskID
	mark int64
}

// markDeletedLocked remembers the deletion of id, whose last time was
// updatedAt (K7, engine.LogStore.Deleted).
// REQUIRES: s.mu held for writing.
func (s *Store) markDeletedLocked(id a2a.TaskID, updatedAt int64) {
	if !s.log {
		return
	}
	id = detached(id) // kept: no view
	mark := engine.DeletionMark(s.clock(), updatedAt, s.mu.deleted[id])
	s.mu.deleted[id] = mark
	s.mu.deletions = append(s.mu.deletions, deletion{id: id, mark: mark})
}

// Deleted implements engine.LogStore.
func (s *Store) Deleted(ctx context.Context, id a2a.TaskID) (int64, error) {
	if err := engine.ValidateID(id); err != nil {
		return 0, err
	}
	if !s.log {
		return 0, engine.ErrLogDisabled
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return 0, errClosed
	}
	return s.mu.deleted[id], nil
}

// forgetDeletionsLocked forgets, from the oldest deletion made, those
// whose mark is before before, examining at most limit; it returns how
// many it examined. A mark out of order (the clock stepped back) waits
// for the ones before it.
// REQUIRES: s.mu held for writing.
func (s *Store) forgetDeletionsLocked(before int64, limit int) int {
	n := 0
	for n < limit && len(s.mu.deletions) > 0 && s.mu.deletions[0].mark < before {
		d := s.mu.deletions[0]
		if s.mu.deleted[d.id] == d.mark {
			delete(s.mu.deleted, d.id)
		}
		s.mu.deletions[0] = deletion{}
		s.mu.deletions = s.mu.deletions[1:]
		n++
	}
	if len(s.mu.deletions) == 0 {
		s.mu.deletions = nil // let the backing array go
	}
	return n
}

// WatchLog implements engine.LogStore.
func (s *Store) WatchLog(id a2a.TaskID) (<-chan struct{}, func()) { return s.hub.Watch(id) }

// TrimLog implements engine.LogStore: it walks the tasks oldest first from
// where the last call stopped and drops the whole log of each whose time
// is before before, at most limit tasks, then forgets the deletions
// marked before before, oldest first, within what is left of limit.
func (s *Store) TrimLog(ctx context.Context, before int64, limit int) (int, error) {
	if limit < 1 || before < 0 {
		return 0, fmt.Errorf("memstore: trim log: limit %d, before %d: %w", limit, before, engine.ErrInvalidArgument)
	}
	if !s.log {
		return 0, engine.ErrLogDisabled
	}
	if err := s.lockOpen(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	n := 0
	var last engine.Cursor
	visit := func(it item) bool {
		if it.when() >= before || n == limit {
			return false
		}
		c := s.mu.slots.cursor(s.mu.slots.at(it.slot))
		if s.mu.trimmed != nil && c == *s.mu.trimmed {
			return true
		}
		s.mu.logs.drop(it.slot)
		last = c
		n++
		return true
	}
	if t := s.mu.trimmed; t != nil {
		s.descendFrom(t, visit)
	} else {
		s.mu.order.Reverse(visit)
	}
	if n > 0 {
		last.ID = detached(last.ID) // kept: no view
		s.mu.trimmed = &last
	}
	return n + s.forgetDeletionsLocked(before, limit-n), nil
}

// checkLogLocked verifies K7 for e: its log holds whole entries of
// consecutive revisions ending at e's revision (a trimmed log may start
// anywhere, or be empty), the last entry at e's time and state.
// REQUIRES: s.mu held.
func (s *Store) checkLogLocked(e *entry) error {
	log := s.mu.logs.view(e.slot)
	if len(log) == 0 {
		return nil
	}
	var last engine.LogEntry
	for n := 0; len(log) > 0; n++ {
		l, _, rest, ok := nextLogEntry(log)
		switch {
		case !ok:
			return fmt.Errorf("log entry %d cut short or damaged", n)
		case n > 0 && l.Revision != last.Revision+1:
			return fmt.Errorf("log revisions %d then %d", last.Revision, l.Revision)
		}
		last, log = l, rest
	}
	if last.Revision != e.revision || last.Time != e.updatedAt || last.State != states[e.state] {
		return fmt.Errorf("last log entry at revision %d, time %d, state %s; task at %d, %d, %s",
			last.Revision, last.Time, last.State, e.revision, e.updatedAt, states[e.state])
	}
	return nil
}

// checkLogsLocked verifies every log (checkLogLocked), that no log
// outlives its task, and the logs' slab (taskLogs.check).
// REQUIRES: s.mu held.
func (s *Store) checkLogsLocked(ids map[a2a.TaskID]uint32) []error {
	t := &s.mu.slots
	holds := func(slot uint32) bool {
		if slot >= t.n || !t.holds(t.at(slot)) {
			return false
		}
		got, ok := ids[t.id(t.at(slot))]
		return ok && got == slot
	}
	errs := s.mu.logs.check(holds)
	for slot, r := range s.mu.logs.refs {
		if !holds(slot) || !s.mu.logs.inSlab(r) {
			continue // reported by check
		}
		if err := s.checkLogLocked(t.at(slot)); err != nil {
			errs = append(errs, fmt.Errorf("task %q: %w", t.id(t.at(slot)), err))
		}
	}
	return errs
}
