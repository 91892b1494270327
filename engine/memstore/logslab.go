package memstore

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The task logs (K7) live in a slab of their own (slab.go), not in a
// slice of entries per task: at 1e5 realistic tasks the slices and their
// bodies were 2.4 objects a task for the collector to mark and sweep
// (#55, BenchmarkMemHeap's log=on row), the slab's chunks are none. A
// task's log is one region of a chunk: its entries, encoded one after the
// other (appendLogEntry), then room for more. An entry that does not fit
// moves the log to a region with twice the room, so a log of n bytes has
// been copied fewer than 2n bytes in all; a compaction moves it to a
// region with no room to spare. Views of a region are valid only under
// the store's lock, as the records' are (slab.go): what ReadLog and
// Export hand out is copied (decodeLog).

// logRef names a task's log: bytes [off, off+len) of chunk number chunk
// hold its entries, and its region goes on to off+room.
type logRef struct{ chunk, off, len, room uint32 }

// size is the bytes the region takes in its chunk (slab.alloc).
func (r logRef) size() int { return align8(int(r.room)) }

// taskLogs holds the task logs, by task's slot.
type taskLogs struct {
	data slab
	refs map[uint32]logRef // nil without the log
}

// view returns slot's log, a view of the slab (nil for none).
func (l *taskLogs) view(slot uint32) []byte {
	r, ok := l.refs[slot]
	if !ok {
		return nil
	}
	end := r.off + r.len
	return l.data.chunk(r.chunk).buf[r.off:end:end]
}

// maxLogBytes bounds a task's log, so that no region outgrows its uint32
// offsets whatever a client writes to one task: a write whose entry would
// take its task's log past it is refused (checkLogSize), never half made,
// and no entry is dropped for it (K7: every revision has its entry). A
// variable for tests.
var maxLogBytes = 1 << 30

// checkLogSize refuses an entry l that would take the log of task id,
// holding have bytes, past maxLogBytes: bad input, nothing changed. The
// task takes writes again once its log is trimmed (idle for the log
// retention) or it is deleted.
func checkLogSize(id a2a.TaskID, have int, l *engine.LogEntry) error {
	if n := have + logEntryLen(l); n > maxLogBytes {
		return fmt.Errorf("memstore: task %q: its log would hold %d bytes, over %d: %w", id, n, maxLogBytes, engine.ErrInvalidArgument)
	}
	return nil
}

// append appends e, encoded (appendLogEntry), to slot's log, which
// checkLogSize has let it into. A log without room for it moves to a new
// region with twice the room (or the room it needs, within maxLogBytes),
// the entry written there before the old region is freed: the
// compactions the free may set off can move the new region too, entry and
// all.
func (l *taskLogs) append(slot uint32, e *engine.LogEntry) {
	n := logEntryLen(e)
	r, ok := l.refs[slot]
	if ok && int(r.room-r.len) >= n {
		putLogEntry(l.data.chunk(r.chunk).buf[r.off+r.len:], e, n)
		r.len += uint32(n)
		l.refs[slot] = r
		return
	}
	log := l.view(slot)
	room := max(len(log)+n, min(2*int(r.room), maxLogBytes))
	if room > maxLogBytes {
		panic(fmt.Sprintf("memstore: a log of %d bytes, over %d (checkLogSize)", room, maxLogBytes))
	}
	l.write(slot, log, nil, room)
	w := l.refs[slot]
	putLogEntry(l.data.chunk(w.chunk).buf[w.off+w.len:], e, n)
	w.len += uint32(n)
	l.refs[slot] = w
	if ok {
		l.data.free(r.chunk, r.size(), l.compact) // after: the log was copied out of it
	}
	l.data.compactClosed(l.compact)
}

// putLogEntry writes e, n bytes encoded, at the start of dst.
func putLogEntry(dst []byte, e *engine.LogEntry, n int) {
	if b := appendLogEntry(dst[:0:n], e); len(b) != n || &b[0] != &dst[0] {
		panic(fmt.Sprintf("memstore: a log entry of %d bytes, %d expected", len(b), n))
	}
}

// set gives slot, which has no log, the log b: encoded entries, at most
// maxLogBytes (Import checks).
func (l *taskLogs) set(slot uint32, b []byte) {
	l.write(slot, nil, b, len(b))
	l.data.compactClosed(l.compact)
}

// write gives slot's log a new region of room bytes holding old, then b.
func (l *taskLogs) write(slot uint32, old, b []byte, room int) {
	num, off := l.data.alloc(slot, room)
	buf := l.data.chunk(num).buf[off:]
	copy(buf, old)
	copy(buf[len(old):], b)
	l.refs[slot] = logRef{chunk: num, off: uint32(off), len: uint32(len(old) + len(b)), room: uint32(room)}
}

// drop drops slot's log, if it has one.
func (l *taskLogs) drop(slot uint32) {
	r, ok := l.refs[slot]
	if !ok {
		return
	}
	delete(l.refs, slot)
	l.data.free(r.chunk, r.size(), l.compact)
	l.data.compactClosed(l.compact) // free's compaction may have closed the open chunk
}

// compact moves the logs in chunk num to regions without spare room
// elsewhere and drops num.
func (l *taskLogs) compact(num uint32) {
	for _, slot := range l.data.chunk(num).slots {
		if r := l.refs[slot]; r.chunk == num {
			l.write(slot, l.view(slot), nil, int(r.len))
		}
	}
	l.data.drop(num)
}

// check verifies the logs' slab: every log is a region within what its
// chunk holds, of the task in its slot (holds), listed by its chunk, and
// the chunks' live bytes are their logs' regions (slab.check).
func (l *taskLogs) check(holds func(slot uint32) bool) []error {
	var errs []error
	live := make(map[uint32]int)
	for slot, r := range l.refs {
		if !holds(slot) {
			errs = append(errs, fmt.Errorf("a log in slot %d, which holds no task", slot))
		}
		if !l.inSlab(r) {
			errs = append(errs, fmt.Errorf("slot %d: its log %+v is not in the slab", slot, r))
			continue
		}
		c := l.data.chunk(r.chunk)
		if !slices.Contains(c.slots, slot) {
			errs = append(errs, fmt.Errorf("slot %d: chunk %d does not list it", slot, r.chunk))
		}
		live[r.chunk] += r.size()
	}
	return append(errs, l.data.check(live)...)
}

// inSlab reports whether r is a region within what its chunk, one not
// dropped, holds.
func (l *taskLogs) inSlab(r logRef) bool {
	if r.chunk == 0 || int(r.chunk) > len(l.data.chunks) || l.data.chunk(r.chunk) == nil {
		return false
	}
	c := l.data.chunk(r.chunk)
	return r.len <= r.room && r.room > 0 && int(r.off)+int(r.room) <= c.used && c.used <= len(c.buf)
}

// logStateOther is an entry's state byte when the store has no number for
// its state: the state's length and bytes follow.
const logStateOther = 0xff

// logEntryMin is the bytes of the shortest entry (appendLogEntry): its
// header, two zero lengths and its trailer.
const logEntryMin = logHeader + 2 + 4

// logHeader is the bytes of an entry's revision, time, kind and state.
const logHeader = 18

// appendLogEntry appends l, encoded, to b: its revision and time (8 bytes
// each, little-endian), its kind, its state (its number in states, or
// logStateOther then its length, uvarint, and bytes), its trace then its
// body, each its length (uvarint) then its bytes, and last the entry's
// length (4 bytes, little-endian), which a read from the newest entries
// back (seekLog) steps by. The body comes last of the variable fields, so
// a walk over an entry reads only its first bytes and its last.
func appendLogEntry(b []byte, l *engine.LogEntry) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint64(b, uint64(l.Revision))
	b = binary.LittleEndian.AppendUint64(b, uint64(l.Time))
	b = append(b, byte(l.Kind))
	if n, ok := stateNumber(l.State); ok {
		b = append(b, n)
	} else {
		b = append(b, logStateOther)
		b = binary.AppendUvarint(b, uint64(len(l.State)))
		b = append(b, l.State...)
	}
	b = binary.AppendUvarint(b, uint64(len(l.Trace)))
	b = append(b, l.Trace...)
	b = binary.AppendUvarint(b, uint64(len(l.Body)))
	b = append(b, l.Body...)
	return binary.LittleEndian.AppendUint32(b, uint32(len(b)+4-start))
}

// logEntryLen is the length of l encoded (appendLogEntry).
func logEntryLen(l *engine.LogEntry) int {
	n := logHeader + uvarintLen(len(l.Body)) + len(l.Body) + uvarintLen(len(l.Trace)) + len(l.Trace) + 4
	if _, ok := stateNumber(l.State); !ok {
		n += uvarintLen(len(l.State)) + len(l.State)
	}
	return n
}

func uvarintLen(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }

// nextLogEntry decodes the entry at the start of b, whose Body it leaves a
// view of b and whose trace it returns as one (Trace empty), and returns
// the rest of b; ok is false when b does not start with a whole entry.
func nextLogEntry(b []byte) (l engine.LogEntry, trace, rest []byte, ok bool) {
	if len(b) < logEntryMin {
		return l, nil, nil, false
	}
	l.Revision = int64(binary.LittleEndian.Uint64(b))
	l.Time = int64(binary.LittleEndian.Uint64(b[8:]))
	l.Kind = engine.LogKind(b[16])
	all, st, p := b, b[17], b[logHeader:]
	switch {
	case st == logStateOther:
		var s []byte
		if s, p, ok = lengthPrefixed(p); !ok {
			return l, nil, nil, false
		}
		l.State = a2a.TaskState(s)
	case int(st) < numStates:
		l.State = states[st]
	default:
		return l, nil, nil, false
	}
	if trace, p, ok = lengthPrefixed(p); !ok {
		return l, nil, nil, false
	}
	if l.Body, p, ok = lengthPrefixed(p); !ok || len(p) < 4 {
		return l, nil, nil, false
	}
	n := len(all) - len(p) + 4
	if binary.LittleEndian.Uint32(p) != uint32(n) {
		return l, nil, nil, false
	}
	return l, trace, all[n:], true
}

// lengthPrefixed splits b after a uvarint length and that many bytes.
func lengthPrefixed(b []byte) (v, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// seekLog returns the offset in log of its first entry after revision
// after (len(log) for none), from whichever end is nearer by revision (a
// log's revisions are consecutive, K7): a read of the newest entries
// steps back over those it returns, not over the whole log. It needs the
// revisions to increase, not to be consecutive, and errs on a trailer
// that names no entry.
func seekLog(log []byte, after int64) (int, error) {
	if len(log) < logEntryMin || int64(binary.LittleEndian.Uint64(log)) > after {
		return 0, nil
	}
	last, err := entryBefore(log, len(log))
	if err != nil {
		return 0, err
	}
	if after-int64(binary.LittleEndian.Uint64(log)) < int64(binary.LittleEndian.Uint64(log[last:]))-after {
		for at := 0; at < len(log); {
			l, _, rest, ok := nextLogEntry(log[at:])
			if !ok {
				return 0, damagedEntry(at, len(log))
			}
			if l.Revision > after {
				return at, nil
			}
			at = len(log) - len(rest)
		}
		return len(log), nil
	}
	at := len(log)
	for at > 0 {
		start, err := entryBefore(log, at)
		if err != nil {
			return 0, err
		}
		if int64(binary.LittleEndian.Uint64(log[start:])) <= after {
			return at, nil
		}
		at = start
	}
	return 0, nil
}

// entryBefore returns the offset of the entry that ends at end, from its
// trailer.
func entryBefore(log []byte, end int) (int, error) {
	if end < logEntryMin {
		return 0, damagedEntry(end, len(log))
	}
	n := int(binary.LittleEndian.Uint32(log[end-4:]))
	if n < logEntryMin || n > end {
		return 0, damagedEntry(end, len(log))
	}
	return end - n, nil
}

func damagedEntry(at, n int) error {
	return fmt.Errorf("the log entry at byte %d of %d is cut short or damaged", at, n)
}

// decodeLog returns the entries of log, encoded, after revision after, at
// most limit, their bodies and traces copied out of log into one
// allocation: a first pass counts them, a second copies.
func decodeLog(log []byte, after int64, limit int) ([]engine.LogEntry, error) {
	at, err := seekLog(log, after)
	if err != nil {
		return nil, err
	}
	n, size := 0, 0 // the entries, and their bodies' and traces' bytes
	for i := at; i < len(log) && n < limit; {
		l, trace, rest, ok := nextLogEntry(log[i:])
		if !ok {
			return nil, damagedEntry(i, len(log))
		}
		i = len(log) - len(rest)
		if l.Revision > after {
			n++
			size += len(l.Body) + len(trace)
		}
	}
	if n == 0 {
		return nil, nil
	}
	out, c := make([]engine.LogEntry, 0, n), newCopies(size)
	for len(out) < n {
		l, trace, rest, _ := nextLogEntry(log[at:])
		at = len(log) - len(rest)
		if l.Revision <= after {
			continue
		}
		body := l.Body
		l.Body, l.Trace = nil, c.add(unsafe.String(unsafe.SliceData(trace), len(trace)))
		if len(body) > 0 {
			i := len(c.buf)
			c.buf = append(c.buf, body...)
			l.Body = c.buf[i:len(c.buf):len(c.buf)]
		}
		out = append(out, l)
	}
	return out, nil
}
