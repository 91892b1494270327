package memstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
)

// A task's content is stored in its entry once: the ID, context, state
// and status time as entry fields (the light fields: filters and light
// pages read nothing else), and the rest in one string, the body: the
// metadata (taskcodec.EncodeMetadata's form, metaLen bytes), then the
// task without its light fields and metadata (taskcodec.EncodeTask's
// form), or nothing when the task has nothing else (no status message,
// history or artifacts): a light task's body is empty, or its metadata.
// A body is never modified once stored, and decoded tasks share its bytes
// (taskcodec.Decoder): strings are immutable.

// stamp is a status timestamp in 16 bytes without a pointer: time's
// binary form (taskcodec.AppendTimestamp: 15 or 16 bytes, whose first
// byte is 1 or 2), or all zero for none. It decodes to the instant and
// zone offset it was given, as the full stored form does.
type stamp [16]byte

func stampOf(t *time.Time) stamp {
	var s stamp
	if t != nil {
		copy(s[:], taskcodec.AppendTimestamp(s[:0], *t))
	}
	return s
}

// time returns the timestamp; ok is false for none (or a stamp that does
// not decode, which CheckInvariants reports).
func (s *stamp) time() (t time.Time, ok bool) {
	n := 15
	switch s[0] {
	case 0:
		return time.Time{}, false
	case 1:
		if s[13] == 0xff && s[14] == 0xff { // zone offset -1: UTC
			return s.utc(), true // what UnmarshalBinary returns, without its checks
		}
	case 2:
		n = 16
	}
	err := t.UnmarshalBinary(s[:n])
	return t, err == nil
}

// instant returns the timestamp's instant (in UTC, not its zone: no zone
// is looked up or allocated), for comparisons; ok is false for none.
func (s *stamp) instant() (t time.Time, ok bool) {
	if s[0] == 0 {
		return time.Time{}, false
	}
	return s.utc(), true
}

// utc returns the instant of a stamp that is not none, in UTC. The form:
// a version byte, seconds since year 1 (int64), nanoseconds (int32), both
// big-endian, then the zone offset (time.MarshalBinary).
func (s *stamp) utc() time.Time {
	sec := int64(binary.BigEndian.Uint64(s[1:9]))
	nsec := int64(int32(binary.BigEndian.Uint32(s[9:13])))
	return time.Unix(sec-secondsToUnix, nsec).UTC()
}

// secondsToUnix is the seconds from year 1 to 1970 (time's internal
// epoch to Unix's).
const secondsToUnix = (1969*365 + 1969/4 - 1969/100 + 1969/400) * 86400

// emptyRest is the stored form of a task with nothing but light fields and
// metadata: a body ends there instead.
var emptyRest, _ = taskcodec.EncodeTask(&a2a.Task{})

// encoded is a task's stored form, prepared outside the lock: its body
// is in buf, one of encodeBuffers, until release.
type encoded struct {
	contextID string
	state     uint8
	status    stamp
	metaLen   uint32
	head      uint32 // bytes of the body through the rest's head
	buf       *[]byte
}

// body returns the body, a view of buf: the slab copies it.
func (enc *encoded) body() string { return unsafe.String(unsafe.SliceData(*enc.buf), len(*enc.buf)) }

// release gives the buffer back once the body is written (or not
// wanted): enc is done.
func (enc *encoded) release() {
	if enc.buf != nil {
		putEncodeBuffer(enc.buf)
		enc.buf = nil
	}
}

func (s *Store) encode(t *a2a.Task) (encoded, error) {
	if err := s.limits.ValidateTask(t); err != nil {
		return encoded{}, err
	}
	st, ok := stateNumber(t.Status.State)
	if !ok {
		return encoded{}, fmt.Errorf("memstore: task state %q: %w", t.Status.State, engine.ErrInvalidArgument)
	}
	buf := encodeBuffers.Get().(*[]byte)
	data, metaLen, head, err := appendStored((*buf)[:0], t)
	*buf = data
	if err != nil {
		putEncodeBuffer(buf)
		return encoded{}, err
	}
	return encoded{contextID: t.ContextID, state: st, status: stampOf(t.Status.Timestamp),
		metaLen: uint32(metaLen), head: uint32(head), buf: buf}, nil
}

// appendStored appends t's body to data: its metadata (metaLen bytes),
// then the rest of it without what the entry holds, whose head ends at
// head.
func appendStored(data []byte, t *a2a.Task) (_ []byte, metaLen, head int, err error) {
	if data, err = taskcodec.AppendMetadata(data, t.Metadata); err != nil {
		return data, 0, 0, err
	}
	metaLen = len(data)
	rest := *t
	rest.ID, rest.ContextID, rest.Status.State, rest.Status.Timestamp, rest.Metadata = "", "", "", nil, nil
	if data, head, err = taskcodec.AppendTaskHead(data, &rest); err != nil {
		return data, 0, 0, err
	}
	head += metaLen
	if bytes.Equal(data[metaLen:], emptyRest) {
		data, head = data[:metaLen], metaLen
	}
	if uint64(len(data))+engine.MaxIDBytes+recHeader > math.MaxUint32 { // a record's length is a uint32
		return data, 0, 0, fmt.Errorf("memstore: task over 4 GiB: %w", engine.ErrLimitExceeded)
	}
	return data, metaLen, head, nil
}

// encodeBuffers hold encode's buffers between calls: the stored form is
// built in one, then copied once into the slab.
var encodeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// putEncodeBuffer keeps buf for the next encode unless it grew past
// 64 KiB (a rare large task need not pin its buffer).
func putEncodeBuffer(buf *[]byte) {
	if cap(*buf) <= 64<<10 {
		encodeBuffers.Put(buf)
	}
}

// content is a task's content as read under the lock: what builds the task
// once the lock is released. id and body are views of the entry or the
// slab until detach, which the lock's holder calls.
type content struct {
	id      string
	ctx     string
	state   uint8
	status  stamp
	metaLen uint32
	body    string
}

// contentLocked reads e's content.
// REQUIRES: s.mu held.
func (s *Store) contentLocked(e *entry) content {
	return content{id: string(s.mu.slots.id(e)), ctx: s.mu.contexts.names[e.ctx], state: e.state, status: e.status,
		metaLen: e.metaLen, body: s.mu.slots.body(e)}
}

// detach copies c's ID and body out of the slab, in one allocation.
func (c *content) detach() {
	cp := newCopies(len(c.id) + len(c.body))
	c.id, c.body = cp.add(c.id), cp.add(c.body)
}

// build fills t with the whole task, decoding with *d (allocated on first
// use). *ts receives the status timestamp, which t.Status.Timestamp then
// points to.
func (c *content) build(t *a2a.Task, ts *time.Time, d **taskcodec.Decoder) error {
	fillLight(t, ts, a2a.TaskID(c.id), c.ctx, c.state, &c.status)
	return decodeBody(t, c.body, c.metaLen, depthWhole, d)
}

// fillLight sets the light fields of t, a zero task: field by field, not
// the whole struct again (a page's tasks are fresh, zeroed memory: a light
// page of 50 spent about a quarter of its store time writing each task
// twice). *ts receives the status timestamp, which t.Status.Timestamp
// then points to.
// REQUIRES: *t is the zero Task.
func fillLight(t *a2a.Task, ts *time.Time, id a2a.TaskID, ctx string, state uint8, status *stamp) {
	t.ID, t.ContextID, t.Status.State = id, ctx, states[state]
	if at, ok := status.time(); ok {
		*ts = at
		t.Status.Timestamp = ts
	}
}

// depth is how much of a body a read decodes.
type depth uint8

const (
	depthWhole depth = iota // the whole task
	// depthHead: the metadata and the status message, for a whole page
	// that returns no history and no artifacts (L4). The rest of the body
	// is not read (taskcodec.Decoder.Head): this process wrote it.
	depthHead
	depthLight // the metadata only (engine.ProjectionLight)
)

// depthOf is the depth a page of q decodes.
func depthOf(q *engine.Query) depth {
	switch {
	case q.Projection == engine.ProjectionLight:
		return depthLight
	case q.HistoryLength == 0 && !q.IncludeArtifacts:
		return depthHead
	}
	return depthWhole
}

// needsDecoding reports whether decodeBody has anything to decode.
func needsDecoding(body string, metaLen uint32, dp depth) bool {
	return metaLen > 0 || dp != depthLight && len(body) > int(metaLen)
}

// decodeBody decodes a body (metaLen bytes of metadata, then the rest of
// the task) into t, whose light fields fillLight has set: the metadata,
// and as deep as dp says the rest. It decodes with *d, allocated on first
// use.
func decodeBody(t *a2a.Task, body string, metaLen uint32, dp depth, d **taskcodec.Decoder) error {
	if !needsDecoding(body, metaLen, dp) {
		return nil
	}
	if *d == nil {
		*d = new(taskcodec.Decoder)
	}
	if rest := body[metaLen:]; rest != "" && dp != depthLight {
		head := *t
		var err error
		if dp == depthHead {
			err = (*d).Head(rest, t)
		} else {
			err = (*d).Task(rest, t)
		}
		if err != nil {
			return err
		}
		t.ID, t.ContextID, t.Status.State, t.Status.Timestamp = head.ID, head.ContextID, head.Status.State, head.Status.Timestamp
	}
	md, err := (*d).Metadata(body[:metaLen])
	t.Metadata = md
	return err
}

// decoded returns rec with the whole task of c.
func decoded(rec engine.Record, c content) (engine.Record, error) {
	// The task and its status timestamp in one allocation.
	v := new(struct {
		task a2a.Task
		ts   time.Time
	})
	var d *taskcodec.Decoder
	if err := c.build(&v.task, &v.ts, &d); err != nil {
		return engine.Record{}, err
	}
	rec.Task = &v.task
	return rec, nil
}

// returned is the record a Create or Replace of task id made with ctx
// returns: with a decoded copy of the task, or without one under
// engine.WithoutTask (its ID then the caller's id, the same bytes).
func returned(ctx context.Context, id a2a.TaskID, rec engine.Record, c content) (engine.Record, error) {
	if !engine.TaskWanted(ctx) {
		rec.Cursor.ID = id
		return rec, nil
	}
	return decoded(rec, c)
}
