package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pebblestore/internal/desckey"
)

// The task log (engine.LogStore, K7): with Options.Log, each revision's
// entry is a key
//
//	l ‖ asc(id) ‖ revision (8 bytes, big-endian) → time (8 bytes) ‖ kind ‖ uvarint(len(state)) ‖ state ‖ [trace] ‖ body
//
// where an entry with a trace (engine.LogEntry.Trace, H2) has the high
// bit of its kind byte set (logTraced) and the trace is its traceparent's
// binary form: trace ID (16 bytes) ‖ span ID (8) ‖ flags (1). Entries
// without one are encoded as before the trace existed, so a store
// written by an earlier release reads as it did (its entries have no
// trace); a release before the trace would refuse an entry that has one
// (a kind it does not know). The entry is set in the very batch that writes the revision, so both commit or
// neither; Delete and retention range-delete the task's l keys in their
// batch. asc is prefix-free, so one task's entries are one key range in
// revision order. TrimLog range-deletes the logs of idle tasks, walking
// the global ordering index from its tail.
var _ engine.LogStore = (*Store)(nil)

const tagLog = 'l'

// logPrefix is the key range of id's entries.
func logPrefix(id a2a.TaskID) []byte {
	return desckey.AppendAscending([]byte{tagLog}, []byte(id))
}

func logKey(id a2a.TaskID, rev int64) []byte {
	return binary.BigEndian.AppendUint64(logPrefix(id), uint64(rev))
}

// logTraced marks, in an entry's kind byte, an entry with a trace.
const logTraced = 0x80

// traceLen is the length of a trace's binary form.
const traceLen = 16 + 8 + 1

func encodeLogValue(l *engine.LogEntry) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 10+len(l.State)+traceLen+len(l.Body)), uint64(l.Time))
	sc, traced := engine.ParseTraceParent(l.Trace)
	if traced {
		v = append(v, byte(l.Kind)|logTraced)
	} else {
		v = append(v, byte(l.Kind))
	}
	v = binary.AppendUvarint(v, uint64(len(l.State)))
	v = append(v, l.State...)
	if traced {
		tid, sid := sc.TraceID(), sc.SpanID()
		v = append(append(append(v, tid[:]...), sid[:]...), byte(sc.TraceFlags()))
	}
	return append(v, l.Body...)
}

// decodeTrace is the traceparent of a trace's binary form b, "" when it
// is none ParseTraceParent accepts (never trusted into a span, H2).
func decodeTrace(b []byte) string {
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], b[:16])
	copy(sid[:], b[16:24])
	var flags string
	switch b[24] {
	case 0:
		flags = "00"
	case byte(trace.FlagsSampled):
		flags = "01"
	default:
		return ""
	}
	tp := "00-" + tid.String() + "-" + sid.String() + "-" + flags
	if !engine.ValidTraceParent(tp) {
		return ""
	}
	return tp
}

// decodeLog decodes an entry; key is its full key.
func decodeLog(key, value []byte) (a2a.TaskID, engine.LogEntry, error) {
	id, rest, err := desckey.DecodeAscending(key[1:])
	if err != nil || len(rest) != 8 || len(value) < 10 {
		return "", engine.LogEntry{}, fmt.Errorf("pebblestore: log key %x: malformed: %w", key, engine.ErrInternal)
	}
	kind := value[8]
	l := engine.LogEntry{Revision: int64(binary.BigEndian.Uint64(rest)), Time: int64(binary.BigEndian.Uint64(value)), Kind: engine.LogKind(kind &^ logTraced)}
	n, k := binary.Uvarint(value[9:])
	if k <= 0 || uint64(len(value)-9-k) < n {
		return "", engine.LogEntry{}, fmt.Errorf("pebblestore: log entry %x: malformed: %w", key, engine.ErrInternal)
	}
	l.State = a2a.TaskState(value[9+k : 9+k+int(n)])
	body := value[9+k+int(n):]
	if kind&logTraced != 0 {
		if len(body) < traceLen {
			return "", engine.LogEntry{}, fmt.Errorf("pebblestore: log entry %x: malformed trace: %w", key, engine.ErrInternal)
		}
		l.Trace, body = decodeTrace(body[:traceLen]), body[traceLen:]
	}
	l.Body = bytes.Clone(body)
	return a2a.TaskID(id), l, nil
}

// stageLog adds l, the entry of the revision rec, to b.
func (s *Store) stageLog(b *pebble.Batch, id a2a.TaskID, rec engine.Record, l *engine.LogEntry) {
	if !s.log || l == nil {
		return
	}
	l.Revision, l.Time = rec.Revision, rec.Cursor.UpdatedAt
	_ = b.Set(logKey(id, rec.Revision), encodeLogValue(l), nil)
}

// deleteLog deletes id's log in b.
func (s *Store) deleteLog(b *pebble.Batch, id a2a.TaskID) {
	if s.log {
		p := logPrefix(id)
		_ = b.DeleteRange(p, desckey.PrefixEnd(p), nil)
	}
}

// dropLog deletes every log entry and remembered deletion, for a store
// opened without the log (Options.Log): its writes add no entry and its
// deletes leave a task's entries, so a log it kept would have gaps once
// the log is on again (K7) and would give a task created under a deleted
// task's ID the deleted task's entries. One seek per key range when there
// is nothing to drop.
func (s *Store) dropLog() error {
	b := s.db.NewBatch()
	defer b.Close()
	for _, tag := range []byte{tagLog, tagDeleted, tagDeletedAt} {
		lo, hi := []byte{tag}, []byte{tag + 1}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return err
		}
		found := it.First()
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return err
		}
		if found {
			_ = b.DeleteRange(lo, hi, nil)
		}
	}
	if b.Empty() {
		return nil
	}
	return b.Commit(pebble.Sync)
}

// newLogEntry is the entry of a write storing task because of ev under
// ctx, whose traceparent it keeps (nil without the log).
func (s *Store) newLogEntry(ctx context.Context, task *a2a.Task, ev a2a.Event) (*engine.LogEntry, error) {
	if !s.log {
		return nil, nil
	}
	l, err := engine.NewLogEntry(task, ev)
	l.Trace = engine.TraceParent(ctx) // H2
	return &l, err
}

// ReadLog implements engine.LogStore.
func (s *Store) ReadLog(ctx context.Context, id a2a.TaskID, after int64, limit int) (_ []engine.LogEntry, err error) {
	if err := engine.ValidateLogRead(id, after, limit); err != nil {
		return nil, err
	}
	if !s.log {
		return nil, engine.ErrLogDisabled
	}
	exit, err := s.enter("read log")
	if err != nil {
		return nil, err
	}
	defer exit()
	defer s.catch("read log", &err)
	p := logPrefix(id)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(id, after+1), UpperBound: desckey.PrefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: read log: %v: %w", err, engine.ErrInternal)
	}
	defer it.Close()
	var out []engine.LogEntry
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		_, l, err := decodeLog(it.Key(), it.Value())
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("pebblestore: read log: %v: %w", err, engine.ErrInternal)
	}
	return out, nil
}

// WatchLog implements engine.LogStore.
func (s *Store) WatchLog(id a2a.TaskID) (<-chan struct{}, func()) { return s.hub.Watch(id) }

// wake wakes the log readers of id after a write.
func (s *Store) wake(id a2a.TaskID) {
	if s.log {
		s.hub.Wake(id)
	}
}

// TrimLog implements engine.LogStore: it reads the global index backward
// from its tail (or from just before where the last call stopped) and
// range-deletes, in one batch, the logs of the tasks idle since before;
// then it forgets the deletions marked before before (forgetDeletions).
func (s *Store) TrimLog(ctx context.Context, before int64, limit int) (_ int, err error) {
	if limit < 1 || limit > engine.MaxRetainLimit || before < 0 {
		return 0, fmt.Errorf("pebblestore: trim log: limit %d, before %d: %w", limit, before, engine.ErrInvalidArgument)
	}
	if !s.log {
		return 0, engine.ErrLogDisabled
	}
	exit, err := s.enter("trim log")
	if err != nil {
		return 0, err
	}
	defer exit()
	defer s.catch("trim log", &err)
	s.trim.Lock()
	defer s.trim.Unlock()
	if before > s.trimHigh.Load() {
		s.trimHigh.Store(before) // before the scan: see untrim
	}
	upper := []byte{tagGlobal + 1}
	if s.trim.cursor != nil {
		upper = globalKey(*s.trim.cursor)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagGlobal}, UpperBound: upper})
	if err != nil {
		return 0, fmt.Errorf("pebblestore: trim log: %v: %w", err, engine.ErrInternal)
	}
	defer it.Close()
	var idle []engine.Cursor
	for ok := it.Last(); ok && len(idle) < limit; ok = it.Prev() {
		c, err := decodeIndexCursor(it.Key(), 1)
		if err != nil {
			return 0, err
		}
		if c.UpdatedAt >= before {
			break
		}
		idle = append(idle, c)
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("pebblestore: trim log: %v: %w", err, engine.ErrInternal)
	}
	if len(idle) > 0 {
		if err := s.trimIdle(idle); err != nil {
			return 0, err
		}
		last := idle[len(idle)-1]
		s.trim.cursor = &last
	}
	if len(idle) == limit {
		return limit, nil
	}
	n, err := s.forgetDeletions(before, limit-len(idle))
	return len(idle) + n, err
}

// trimIdle deletes, in one batch under the tasks' write locks, the logs
// of the tasks at the idle cursors that are still there: a task written
// since the scan moved to a new cursor and keeps its log (its new entry
// must not go with the old ones).
func (s *Store) trimIdle(idle []engine.Cursor) error {
	var stripes []int
	for _, c := range idle {
		stripes = append(stripes, s.stripeOf([]byte(c.ID)))
	}
	defer lockStripes(stripes, func(i int) { s.locks[i].Lock() }, func(i int) { s.locks[i].Unlock() })()
	b := s.db.NewBatch()
	defer b.Close()
	for _, c := range idle {
		cur, err := s.load(c.ID, false)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
		if err == nil && cur.cursor() == c {
			s.deleteLog(b, c.ID)
		}
	}
	if err := s.db.Apply(b, s.wo); err != nil {
		return fmt.Errorf("pebblestore: trim log: %v: %w", err, engine.ErrInternal)
	}
	return nil
}

// The deletions the log remembers (engine.LogStore.Deleted, K7): with
// Options.Log, Delete and retention set, in their batch,
//
//	d ‖ asc(id) → mark (8 bytes, big-endian)
//	e ‖ mark (8 bytes, big-endian) ‖ asc(id) → nothing
//
// the second ordering the marks by time, so that TrimLog forgets the
// deletions due from the front of 'e', reading only those.
const (
	tagDeleted   = 'd'
	tagDeletedAt = 'e'
)

func deletedKey(id a2a.TaskID) []byte {
	return desckey.AppendAscending([]byte{tagDeleted}, []byte(id))
}

func deletedAtKey(mark int64, id a2a.TaskID) []byte {
	k := binary.BigEndian.AppendUint64([]byte{tagDeletedAt}, uint64(mark))
	return desckey.AppendAscending(k, []byte(id))
}

// decodeDeletedAt decodes an 'e' key.
func decodeDeletedAt(key []byte) (int64, a2a.TaskID, error) {
	if len(key) < 9 {
		return 0, "", fmt.Errorf("pebblestore: deletion key %x: malformed: %w", key, engine.ErrInternal)
	}
	id, rest, err := desckey.DecodeAscending(key[9:])
	if err != nil || len(rest) != 0 {
		return 0, "", fmt.Errorf("pebblestore: deletion key %x: malformed: %w", key, engine.ErrInternal)
	}
	return int64(binary.BigEndian.Uint64(key[1:9])), a2a.TaskID(id), nil
}

// deletedMark reads the mark of id's remembered deletion (0: none).
func (s *Store) deletedMark(id a2a.TaskID) (int64, error) {
	v, closer, err := s.db.Get(deletedKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pebblestore: read deletion: %v: %w", err, engine.ErrInternal)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("pebblestore: deletion of %q: malformed: %w", id, engine.ErrInternal)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// markDeleted remembers, in b, the deletion of id, whose last time was
// updatedAt.
// REQUIRES: id's write lock held.
func (s *Store) markDeleted(b *pebble.Batch, id a2a.TaskID, updatedAt int64) error {
	if !s.log {
		return nil
	}
	prev, err := s.deletedMark(id)
	if err != nil {
		return err
	}
	if prev != 0 {
		_ = b.Delete(deletedAtKey(prev, id), nil)
	}
	mark := engine.DeletionMark(s.clock(), updatedAt, prev)
	_ = b.Set(deletedKey(id), binary.BigEndian.AppendUint64(nil, uint64(mark)), nil)
	_ = b.Set(deletedAtKey(mark, id), nil, nil)
	return nil
}

// Deleted implements engine.LogStore.
func (s *Store) Deleted(ctx context.Context, id a2a.TaskID) (_ int64, err error) {
	if err := engine.ValidateID(id); err != nil {
		return 0, err
	}
	if !s.log {
		return 0, engine.ErrLogDisabled
	}
	exit, err := s.enter("deleted")
	if err != nil {
		return 0, err
	}
	defer exit()
	defer s.catch("deleted", &err)
	return s.deletedMark(id)
}

// forgetDeletions forgets the deletions marked before before, oldest
// first, examining at most limit; it returns how many it forgot.
func (s *Store) forgetDeletions(before int64, limit int) (int, error) {
	upper := binary.BigEndian.AppendUint64([]byte{tagDeletedAt}, uint64(before))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagDeletedAt}, UpperBound: upper})
	if err != nil {
		return 0, fmt.Errorf("pebblestore: trim log: %v: %w", err, engine.ErrInternal)
	}
	type due struct {
		mark int64
		id   a2a.TaskID
	}
	var old []due
	for ok := it.First(); ok && len(old) < limit; ok = it.Next() {
		mark, id, err := decodeDeletedAt(it.Key())
		if err != nil {
			_ = it.Close()
			return 0, err
		}
		old = append(old, due{mark, id})
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, fmt.Errorf("pebblestore: trim log: %v: %w", err, engine.ErrInternal)
	}
	if len(old) == 0 {
		return 0, nil
	}
	var stripes []int
	for _, d := range old {
		stripes = append(stripes, s.stripeOf([]byte(d.id)))
	}
	defer lockStripes(stripes, func(i int) { s.locks[i].Lock() }, func(i int) { s.locks[i].Unlock() })()
	b := s.db.NewBatch()
	defer b.Close()
	for _, d := range old {
		mark, err := s.deletedMark(d.id)
		if err != nil {
			return 0, err
		}
		_ = b.Delete(deletedAtKey(d.mark, d.id), nil)
		if mark == d.mark { // not deleted again since the scan
			_ = b.Delete(deletedKey(d.id), nil)
		}
	}
	if err := s.db.Apply(b, s.wo); err != nil {
		return 0, fmt.Errorf("pebblestore: trim log: %v: %w", err, engine.ErrInternal)
	}
	return len(old), nil
}

// untrim moves where TrimLog goes on back to c, a task's cursor just
// committed, when c lies at or behind it: a task created or written while
// the clock is behind that point (S4 lets it step back) would otherwise
// lie where no later TrimLog looks, its log never trimmed (K7; imports are
// engine.TrimFrom's case). It costs a write nothing unless its time is
// under the highest cutoff a TrimLog began with (trimHigh, stored before
// that TrimLog's scan): a write committed after the scan's view then
// waits here for the TrimLog to set its cursor, and one committed before
// it is in the view. An empty ID sorts after every task of c's time, so
// the walk examines them all, c's task included.
func (s *Store) untrim(c engine.Cursor) {
	if !s.log || c.UpdatedAt >= s.trimHigh.Load() {
		return
	}
	s.trim.Lock()
	defer s.trim.Unlock()
	if t := s.trim.cursor; t != nil && c.Compare(*t) >= 0 {
		s.trim.cursor = &engine.Cursor{UpdatedAt: c.UpdatedAt}
	}
}
