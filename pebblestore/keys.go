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

// Keyspace (format 3). Every key starts with one tag byte:
//
//	m ‖ "format"                                     → format version (uvarint): 3
//	m ‖ "zerofree"                                   → (empty) no zero-valued counter key but the global ones (counters.go)
//	z ‖ seq (8 bytes)                                → a write's pending zero-counter deletes (counters.go)
//	r ‖ id                                           → record: revision, UpdatedAt, light fields
//	g ‖ cursor                                       → global ordering index: light fields
//	c ‖ asc(contextID) ‖ cursor                      → per-context ordering index: light fields
//	o ‖ asc(owner) ‖ cursor                          → per-owner ordering index: light fields
//	p ‖ asc(owner) ‖ asc(contextID) ‖ cursor         → per-(owner, context) ordering index: light fields
//	s ‖ state ‖ cursor                               → per-state ordering index: light fields (C7)
//	u ‖ asc(owner) ‖ state ‖ cursor                  → per-(owner, state) ordering index: light fields (C7)
//	b ‖ cursor                                       → task body (taskcodec binary form), in list order
//	n ‖ t                                            → counter: all tasks
//	n ‖ s ‖ state                                    → counter: tasks in a state
//	n ‖ c ‖ asc(contextID)                           → counter: tasks in a context
//	n ‖ x ‖ asc(contextID) ‖ state                   → counter: tasks in a context and state
//	n ‖ o ‖ asc(owner)                               → counter: tasks of an owner
//	n ‖ u ‖ asc(owner) ‖ state                       → counter: tasks of an owner in a state
//	n ‖ p ‖ asc(owner) ‖ asc(contextID)              → counter: tasks of an owner in a context
//	n ‖ q ‖ asc(owner) ‖ asc(contextID) ‖ state      → counter: tasks of an owner in a context and state
//
// cursor is desckey.AppendCursor(UpdatedAt, ID), whose byte order is list
// order (S6), so a page is one seek and PageSize+1 steps. asc is
// desckey.AppendAscending, prefix-free: no owner's or context's keys are a
// prefix range of another's. Bodies are keyed by cursor too: the bodies of
// a page sit in the same order as its index entries, so a full page reads
// them with a second iterator that only moves forward instead of one point
// lookup per task. Tasks without an owner have no o or p key and no owner
// counters. A counter no task counts in has no key (but the global n ‖ t
// and n ‖ s ‖ state, which stay): counters.go deletes them at zero. state
// is the state's one-byte code (stateCodes).
//
// Format 2 had no s or u keys; upgrade.go adds them. Format 1 (before owners) had no m key and no o, p or owner counter keys,
// and its light values (in records and index values) had no owner and no
// leading version byte; upgrade.go reads it.
const (
	tagMeta    = 'm'
	tagRecord  = 'r'
	tagGlobal  = 'g'
	tagContext = 'c'
	tagOwner   = 'o'
	tagOwnerCx = 'p'
	tagState   = 's'
	tagOwnerSt = 'u'
	tagBody    = 'b'
	tagCounter = 'n'

	counterTotal             = 't'
	counterState             = 's'
	counterContext           = 'c'
	counterContextState      = 'x'
	counterOwner             = 'o'
	counterOwnerState        = 'u'
	counterOwnerContext      = 'p'
	counterOwnerContextState = 'q'
)

// formatKey holds the database's format version.
var formatKey = []byte{tagMeta, 'f', 'o', 'r', 'm', 'a', 't'}

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

func ownerPrefix(owner string) []byte {
	return desckey.AppendAscending([]byte{tagOwner}, []byte(owner))
}

func ownerKey(owner string, c engine.Cursor) []byte {
	return desckey.AppendCursor(ownerPrefix(owner), c.UpdatedAt, []byte(c.ID))
}

func ownerContextPrefix(owner, contextID string) []byte {
	return desckey.AppendAscending(desckey.AppendAscending([]byte{tagOwnerCx}, []byte(owner)), []byte(contextID))
}

func ownerContextKey(owner, contextID string, c engine.Cursor) []byte {
	return desckey.AppendCursor(ownerContextPrefix(owner, contextID), c.UpdatedAt, []byte(c.ID))
}

func statePrefix(state a2a.TaskState) []byte {
	return []byte{tagState, stateCode(state)}
}

func stateKey(state a2a.TaskState, c engine.Cursor) []byte {
	return desckey.AppendCursor(statePrefix(state), c.UpdatedAt, []byte(c.ID))
}

func ownerStatePrefix(owner string, state a2a.TaskState) []byte {
	return append(desckey.AppendAscending([]byte{tagOwnerSt}, []byte(owner)), stateCode(state))
}

func ownerStateKey(owner string, state a2a.TaskState, c engine.Cursor) []byte {
	return desckey.AppendCursor(ownerStatePrefix(owner, state), c.UpdatedAt, []byte(c.ID))
}

// indexKeys returns the ordering index keys of a task, in the order of
// indexKinds: global, context, state, and with an owner, owner, (owner,
// context) and (owner, state).
func indexKeys(owner, contextID string, state a2a.TaskState, c engine.Cursor) [][]byte {
	keys := [][]byte{globalKey(c), contextKey(contextID, c), stateKey(state, c)}
	if owner != "" {
		keys = append(keys, ownerKey(owner, c), ownerContextKey(owner, contextID, c), ownerStateKey(owner, state, c))
	}
	return keys
}

// indexKinds names the keys indexKeys returns, by position.
var indexKinds = [...]string{"global", "context", "state", "owner", "owner-context", "owner-state"}

// counterKeys returns the counters a task with this owner, context and
// state counts in: first those of its existence alone (all tasks, its
// owner's), which a change of context or state leaves alone, then the
// others. A task without an owner counts in no owner counter. (The empty
// context is a context like any other here; as a filter it means none.)
func counterKeys(owner, contextID string, state a2a.TaskState) (existence, shape [][]byte) {
	code := []byte{stateCode(state)}
	ctx := desckey.AppendAscending(nil, []byte(contextID))
	existence = [][]byte{counterKeyOf(counterTotal)}
	shape = [][]byte{
		counterKeyOf(counterState, code),
		counterKeyOf(counterContext, ctx),
		counterKeyOf(counterContextState, ctx, code),
	}
	if owner != "" {
		oe, os := ownerCounterKeys(owner, contextID, state)
		existence, shape = append(existence, oe), append(shape, os...)
	}
	return existence, shape
}

// ownerCounterKeys returns the owner counters of a task of owner (not ""):
// the owner's count, and those a change of context or state moves.
func ownerCounterKeys(owner, contextID string, state a2a.TaskState) (existence []byte, shape [][]byte) {
	code := []byte{stateCode(state)}
	ctx := desckey.AppendAscending(nil, []byte(contextID))
	o := desckey.AppendAscending(nil, []byte(owner))
	return counterKeyOf(counterOwner, o), [][]byte{
		counterKeyOf(counterOwnerState, o, code),
		counterKeyOf(counterOwnerContext, o, ctx),
		counterKeyOf(counterOwnerContextState, o, ctx, code),
	}
}

// counterKeyOf is the counter key of kind with these encoded parts.
func counterKeyOf(kind byte, parts ...[]byte) []byte {
	k := []byte{tagCounter, kind}
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

// counterKey is the counter that holds the exact total of q's owner,
// context and state filters (not StatusAfter, which no counter holds).
func counterKey(q *engine.Query) []byte {
	var parts [][]byte
	if q.Owner != "" {
		parts = append(parts, desckey.AppendAscending(nil, []byte(q.Owner)))
	}
	if q.ContextID != "" {
		parts = append(parts, desckey.AppendAscending(nil, []byte(q.ContextID)))
	}
	if q.Status != a2a.TaskStateUnspecified {
		parts = append(parts, []byte{stateCode(q.Status)})
	}
	kind := counterKinds[[3]bool{q.Owner != "", q.ContextID != "", q.Status != a2a.TaskStateUnspecified}]
	return counterKeyOf(kind, parts...)
}

// counterKinds are the counter tags by the filters they count: owner,
// context, state.
var counterKinds = map[[3]bool]byte{
	{false, false, false}: counterTotal,
	{false, false, true}:  counterState,
	{false, true, false}:  counterContext,
	{false, true, true}:   counterContextState,
	{true, false, false}:  counterOwner,
	{true, false, true}:   counterOwnerState,
	{true, true, false}:   counterOwnerContext,
	{true, true, true}:    counterOwnerContextState,
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

// light is what a light page needs (ProjectionLight) and the task's
// owner, stored in index values and records (format 2):
//
//	lightV2 (1 byte) ‖ state code (1 byte, stateCodes) ‖ uvarint len ‖
//	contextID ‖ uvarint len ‖ owner (empty: none) ‖ uvarint len ‖ status
//	timestamp (taskcodec.AppendTimestamp, empty when nil) ‖ metadata
//	(taskcodec.EncodeMetadata; rest, empty when none)
//
// The leading byte is no state code, so the format-1 decoder (an older
// release, or a half-done upgrade) rejects a format-2 value instead of
// misreading it, and the upgrade can tell the two apart value by value.
//
// decodeLight aliases the value: ctx, ownerRaw, statusTS and metadata point
// into it, so an index entry a page skips costs no allocation.
type light struct {
	contextID string // set by lightOf and decodeRecord; decodeLight leaves it empty
	ctx       []byte // the context ID as stored (decodeLight)
	owner     string // set by the writer and decodeRecord; decodeLight leaves it empty
	ownerRaw  []byte // the owner as stored (decodeLight)
	state     a2a.TaskState
	statusTS  []byte // taskcodec.AppendTimestamp of Status.Timestamp; nil when unset
	metadata  []byte // taskcodec.EncodeMetadata output
}

// lightV2 starts every format-2 light value: a byte no state code is.
const lightV2 = 0xF2

// lightOf returns the light fields of t for owner.
func lightOf(t *a2a.Task, owner string) (light, error) {
	l := light{contextID: t.ContextID, owner: owner, state: t.Status.State}
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
	dst = append(dst, lightV2, stateCode(l.state))
	dst = binary.AppendUvarint(dst, uint64(len(l.contextID)))
	dst = append(dst, l.contextID...)
	dst = binary.AppendUvarint(dst, uint64(len(l.owner)))
	dst = append(dst, l.owner...)
	dst = binary.AppendUvarint(dst, uint64(len(l.statusTS)))
	dst = append(dst, l.statusTS...)
	return append(dst, l.metadata...)
}

var errCorruptValue = fmt.Errorf("pebblestore: corrupt value: %w", engine.ErrInternal)

// errFormat1Value is the error of a format-1 value where format 2 is read:
// a task written into this database by an a2astore release before format
// 2, past the rollback guard (guard.go).
var errFormat1Value = fmt.Errorf("pebblestore: a format-1 value (a task written by an a2astore release before format 2) "+
	"in a format-2 database: open the database with Options.RepairFormat1 to upgrade such tasks: %w", engine.ErrInternal)

// decodeLight decodes a format-2 light value. The slices alias b.
func decodeLight(b []byte) (light, error) {
	if len(b) < 1 || b[0] != lightV2 {
		if _, err := decodeLightV1(b); err == nil {
			return light{}, errFormat1Value
		}
		return light{}, errCorruptValue
	}
	return decodeLightFields(b[1:], true)
}

// decodeLightFields decodes the fields of a light value after its version
// byte (format 2) or from its start (format 1, withOwner false: no owner
// field). The slices alias b.
func decodeLightFields(b []byte, withOwner bool) (light, error) {
	var l light
	if len(b) < 1 {
		return l, errCorruptValue
	}
	st, ok := stateFromCode(b[0])
	if !ok {
		return l, errCorruptValue
	}
	l.state = st
	if l.ctx, b, ok = cutLen(b[1:]); !ok {
		return l, errCorruptValue
	}
	if withOwner {
		if l.ownerRaw, b, ok = cutLen(b); !ok {
			return l, errCorruptValue
		}
	}
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
	return decodeRecordWith(b, decodeLight)
}

// decodeRecordWith decodes a record whose light fields decode is the
// decoder of (a format's).
func decodeRecordWith(b []byte, decode func([]byte) (light, error)) (record, error) {
	rev, k := binary.Uvarint(b)
	if k <= 0 || len(b) < k+8 {
		return record{}, errCorruptValue
	}
	r := record{revision: int64(rev), updatedAt: int64(binary.BigEndian.Uint64(b[k:]))}
	if r.revision < 1 || r.updatedAt < 0 {
		return record{}, errCorruptValue
	}
	l, err := decode(b[k+8:])
	if err != nil {
		return record{}, err
	}
	l.contextID, l.owner = string(l.ctx), string(l.ownerRaw)
	r.light = l
	return r, nil
}
