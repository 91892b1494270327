package pebblestore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
	"github.com/a2astore/a2astore/pebblestore/internal/desckey"
)

// Keyspace. Every key starts with one tag byte:
//
//	r ‖ id                          → record: revision, UpdatedAt, light fields
//	g ‖ cursor                      → global ordering index: light fields
//	c ‖ asc(contextID) ‖ cursor     → per-context ordering index: light fields
//	b ‖ cursor                      → task body (taskcodec binary form), in list order
//	n ‖ t                           → counter: all tasks
//	n ‖ s ‖ state                   → counter: tasks in a state
//	n ‖ c ‖ asc(contextID)          → counter: tasks in a context
//	n ‖ x ‖ asc(contextID) ‖ state  → counter: tasks in a context and state
//
// cursor is desckey.AppendCursor(UpdatedAt, ID), whose byte order is list
// order (S6), so a page is one seek and PageSize+1 steps. Bodies are keyed by
// cursor too: the bodies of a page sit in the same order as its index
// entries, so a full page reads them with a second iterator that only moves
// forward instead of one point lookup per task.
const (
	tagRecord  = 'r'
	tagGlobal  = 'g'
	tagContext = 'c'
	tagBody    = 'b'
	tagCounter = 'n'

	counterTotal        = 't'
	counterState        = 's'
	counterContext      = 'c'
	counterContextState = 'x'
)

func recordKey(id a2a.TaskID) []byte {
	return append([]byte{tagRecord}, id...)
}

func globalKey(c engine.Cursor) []byte {
	return desckey.AppendCursor([]byte{tagGlobal}, c.UpdatedAt, []byte(c.ID))
}

func bodyKey(c engine.Cursor) []byte {
	return desckey.AppendCursor([]byte{tagBody}, c.UpdatedAt, []byte(c.ID))
}

func contextPrefix(contextID string) []byte {
	return desckey.AppendAscending([]byte{tagContext}, []byte(contextID))
}

func contextKey(contextID string, c engine.Cursor) []byte {
	return desckey.AppendCursor(contextPrefix(contextID), c.UpdatedAt, []byte(c.ID))
}

// counterKeys returns the four counters a task with this context and state
// counts in.
func counterKeys(contextID string, state a2a.TaskState) [4][]byte {
	code := stateCode(state)
	ctx := desckey.AppendAscending(nil, []byte(contextID))
	return [4][]byte{
		{tagCounter, counterTotal},
		{tagCounter, counterState, code},
		append([]byte{tagCounter, counterContext}, ctx...),
		append(append([]byte{tagCounter, counterContextState}, ctx...), code),
	}
}

// counterKey is the counter that holds the exact total of q's filters, which
// must not include StatusAfter.
func counterKey(q *engine.Query) []byte {
	switch {
	case q.ContextID == "" && q.Status == a2a.TaskStateUnspecified:
		return []byte{tagCounter, counterTotal}
	case q.ContextID == "":
		return []byte{tagCounter, counterState, stateCode(q.Status)}
	case q.Status == a2a.TaskStateUnspecified:
		return desckey.AppendAscending([]byte{tagCounter, counterContext}, []byte(q.ContextID))
	}
	k := desckey.AppendAscending([]byte{tagCounter, counterContextState}, []byte(q.ContextID))
	return append(k, stateCode(q.Status))
}

// decodeIndexCursor decodes the cursor that ends an index or body key after
// skip bytes of prefix.
func decodeIndexCursor(key []byte, skip int) (engine.Cursor, error) {
	return decodeIndexCursorBuf(nil, key, skip)
}

// decodeIndexCursorBuf is decodeIndexCursor decoding the ID through *buf,
// a scratch buffer reused across calls (nil: allocate).
func decodeIndexCursorBuf(buf *[]byte, key []byte, skip int) (engine.Cursor, error) {
	if len(key) < skip {
		return engine.Cursor{}, desckey.ErrCorrupt
	}
	var dst []byte
	if buf != nil {
		dst = (*buf)[:0]
	}
	t, id, rest, err := desckey.AppendDecodedCursor(dst, key[skip:])
	if buf != nil && err == nil {
		*buf = id
	}
	if err != nil || len(rest) != 0 || len(id) == 0 {
		return engine.Cursor{}, fmt.Errorf("pebblestore: bad index key %x: %w", key, engine.ErrInternal)
	}
	return engine.Cursor{UpdatedAt: t, ID: a2a.TaskID(id)}, nil
}

// stateCodes are the one-byte stored forms of the task states (in index
// values, records and counter keys). They are on disk: a code never
// changes and is never reused; a new state gets the next one. A test
// checks every engine.KnownStates has one.
var stateCodes = map[a2a.TaskState]byte{
	a2a.TaskStateSubmitted:     1,
	a2a.TaskStateWorking:       2,
	a2a.TaskStateInputRequired: 3,
	a2a.TaskStateAuthRequired:  4,
	a2a.TaskStateCompleted:     5,
	a2a.TaskStateCanceled:      6,
	a2a.TaskStateFailed:        7,
	a2a.TaskStateRejected:      8,
}

// codeStates inverts stateCodes ("" for no state).
var codeStates = func() (m [256]a2a.TaskState) {
	for s, c := range stateCodes {
		m[c] = s
	}
	return m
}()

// stateCode is the stored form of a known state.
func stateCode(s a2a.TaskState) byte {
	c, ok := stateCodes[s]
	if !ok {
		panic("pebblestore: unknown state " + string(s)) // states are validated first
	}
	return c
}

func stateFromCode(c byte) (a2a.TaskState, bool) {
	s := codeStates[c]
	return s, s != ""
}

// light is what a light page needs (ProjectionLight), stored in index
// values:
//
//	state code (1 byte, stateCodes) ‖ uvarint len ‖ contextID ‖ uvarint len ‖
//	status timestamp (taskcodec.AppendTimestamp, empty when nil) ‖ metadata
//	(taskcodec.EncodeMetadata; rest, empty when none)
//
// decodeLight aliases the value: ctx, statusTS and metadata point into it,
// so an index entry a page skips costs no allocation.
type light struct {
	contextID string // set by lightOf and decodeRecord; decodeLight leaves it empty
	ctx       []byte // the context ID as stored (decodeLight)
	state     a2a.TaskState
	statusTS  []byte // taskcodec.AppendTimestamp of Status.Timestamp; nil when unset
	metadata  []byte // taskcodec.EncodeMetadata output
}

func lightOf(t *a2a.Task) (light, error) {
	l := light{contextID: t.ContextID, state: t.Status.State}
	if t.Status.Timestamp != nil {
		l.statusTS = taskcodec.AppendTimestamp(nil, *t.Status.Timestamp)
	}
	m, err := taskcodec.EncodeMetadata(t.Metadata)
	if err != nil {
		return light{}, err
	}
	l.metadata = m
	return l, nil
}

func (l *light) append(dst []byte) []byte {
	dst = append(dst, stateCode(l.state))
	dst = binary.AppendUvarint(dst, uint64(len(l.contextID)))
	dst = append(dst, l.contextID...)
	dst = binary.AppendUvarint(dst, uint64(len(l.statusTS)))
	dst = append(dst, l.statusTS...)
	return append(dst, l.metadata...)
}

var errCorruptValue = fmt.Errorf("pebblestore: corrupt value: %w", engine.ErrInternal)

// decodeLight decodes a light value. The slices alias b.
func decodeLight(b []byte) (light, error) {
	var l light
	if len(b) < 1 {
		return l, errCorruptValue
	}
	st, ok := stateFromCode(b[0])
	if !ok {
		return l, errCorruptValue
	}
	l.state = st
	b = b[1:]
	ctx, b, ok := cutLen(b)
	if !ok {
		return l, errCorruptValue
	}
	l.ctx = ctx
	ts, b, ok := cutLen(b)
	if !ok {
		return l, errCorruptValue
	}
	if len(ts) > 0 {
		l.statusTS = ts
	}
	if len(b) > 0 {
		l.metadata = b
	}
	return l, nil
}

func cutLen(b []byte) (field, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

// statusTime decodes the status timestamp; ok is false when there is none.
func (l *light) statusTime() (t time.Time, ok bool, err error) {
	if l.statusTS == nil {
		return t, false, nil
	}
	t, err = taskcodec.DecodeTimestamp(l.statusTS)
	if err != nil {
		return t, false, errCorruptValue
	}
	return t, true, nil
}

// record is the value under r‖id: revision (uvarint) ‖ UpdatedAt (8 bytes,
// big-endian) ‖ light.
type record struct {
	revision  int64
	updatedAt int64
	light     light
}

func (r *record) append(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.revision))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.updatedAt))
	return r.light.append(dst)
}

func decodeRecord(b []byte) (record, error) {
	rev, k := binary.Uvarint(b)
	if k <= 0 || len(b) < k+8 {
		return record{}, errCorruptValue
	}
	r := record{revision: int64(rev), updatedAt: int64(binary.BigEndian.Uint64(b[k:]))}
	if r.revision < 1 || r.updatedAt < 0 {
		return record{}, errCorruptValue
	}
	l, err := decodeLight(b[k+8:])
	if err != nil {
		return record{}, err
	}
	l.contextID = string(l.ctx)
	r.light = l
	return r, nil
}
