package memstore

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The tasks' bodies (and IDs too long for their entries) live in a slab:
// large byte chunks that the collector allocates, marks and sweeps as one
// object each and never scans, instead of two strings per task (at 1e7
// tasks the collector spent 16.5 % of a read-heavy server's CPU marking
// and sweeping them, #55). An entry names its record by chunk number and
// offset, so entries hold no pointer either.
//
// Chunks are append-only: a record is written once and its bytes do not
// change while its chunk lives. A dropped chunk's buffer is kept for the
// next chunk (up to spareBufs of them: a store that keeps replacing
// tasks then allocates, zeroes and faults in no new memory), so a view of
// a record (a string of its bytes) is valid only while the store's lock
// is held: views never outlive the lock, nor leave the store. What is
// handed out, or kept beyond the entry (map keys, resume points), is
// copied under the lock (copies, detached).
//
// A record that is replaced or deleted leaves its bytes in its chunk as
// dead bytes. A chunk with no live record is dropped; one whose live bytes
// fall under half of what it holds is compacted: its live records are
// written again at the end of the open chunk and it is dropped (the open
// chunk is left alone until it is closed, then checked once). So a
// compaction copies at most the bytes freed since the chunk was last
// full, and the chunks hold at most twice their live records (in a store
// whose writes fall at random, about 1.33 times), plus the open chunk.

const (
	chunkBytes = 256 << 10
	spareBufs  = 8 // dropped chunks' buffers kept for new chunks
	// largeRecord: a record over this many bytes gets a chunk of its
	// own, dropped with it.
	largeRecord = chunkBytes / 8
)

// ref names an entry's record: bytes [off, off+recHeader+slabID+bodyLen)
// of chunk number chunk (from 1; 0 is none). A record is its header (the
// body's head length, little-endian: what a page without history or
// artifacts decodes of it), the ID when the entry does not hold it, then
// the body.
type ref struct {
	chunk, off uint32
	id         uint32 // the ID's length, with idInRecord set when the record holds the ID
	bodyLen    uint32
}

// idInRecord is ref.id's flag: the record holds the ID, not the entry.
const idInRecord = 1 << 31

func (r ref) idLen() uint32 { return r.id &^ idInRecord }

const recHeader = 4

// idInline: an ID of at most this many bytes (a UUID's 36, most IDs) is
// held by its entry, not its record. A page reads its entries anyway;
// an ID in the slab cost it one more cache miss per task to copy (#55:
// at 1e6 tasks the light page went from 1.2–1.5 to 1.7–1.9 times its
// floor when the IDs moved into the slab).
const idInline = 40

// slabID is the bytes of the ID in the record: 0 when the entry holds it.
func (r ref) slabID() uint32 {
	if r.id&idInRecord == 0 {
		return 0
	}
	return r.idLen()
}

// size is the bytes the record takes in its chunk: records start at
// multiples of 8.
func (r ref) size() int { return align8(recHeader + int(r.slabID()) + int(r.bodyLen)) }

func align8(n int) int { return (n + 7) &^ 7 }

type chunk struct {
	buf  []byte // written up to used, each byte once
	used int
	live int // bytes of records some entry names
	// slots: the slot of each record written here, in order (a slot
	// may recur; a record may since be dead): compaction's list.
	slots []uint32
}

type slab struct {
	chunks []*chunk // chunk number n is chunks[n-1]; nil once dropped
	open   uint32   // the chunk records are appended to; 0: none yet
	spare  []uint32 // dropped chunks' numbers, for new chunks
	bufs   [][]byte // dropped chunks' buffers of chunkBytes, for new chunks
	bytes  int      // len(buf) of every chunk: the slab's memory
	// closed are chunks closed under half live, to compact.
	closed []closedChunk
	// idsInRecords: every ID goes in its record (tests: the paths of
	// long IDs with any ID).
	idsInRecords bool
}

// closedChunk is a chunk closed under half live: its number, and the
// chunk, which tells whether the number still names it.
type closedChunk struct {
	num uint32
	c   *chunk
}

func (s *slab) chunk(n uint32) *chunk { return s.chunks[n-1] }

// view returns bytes [off, off+n) of r's chunk as a string, without
// copying: see the top of this file for what may keep it.
func (s *slab) view(r ref, off, n uint32) string {
	if n == 0 || r.chunk == 0 || int(r.chunk) > len(s.chunks) || s.chunks[r.chunk-1] == nil {
		return "" // none, or damage CheckInvariants reports
	}
	buf := s.chunk(r.chunk).buf
	if uint64(r.off)+uint64(off)+uint64(n) > uint64(len(buf)) {
		return "" // damage CheckInvariants reports
	}
	return unsafe.String(&buf[r.off+off], int(n))
}

func (s *slab) body(r ref) string { return s.view(r, recHeader+r.slabID(), r.bodyLen) }

// head returns the length of r's body's head.
func (s *slab) head(r ref) uint32 {
	return binary.LittleEndian.Uint32(s.chunk(r.chunk).buf[r.off:])
}

// write stores a record of id (unless the entry holds it: idInline) and
// body, whose head is head bytes, for slot and returns it.
func (s *slab) write(slot uint32, id a2a.TaskID, body string, head uint32) ref {
	idBits := uint32(len(id))
	if len(id) > idInline || s.idsInRecords {
		idBits |= idInRecord
	} else {
		id = "" // the entry's
	}
	num, off := s.alloc(slot, recHeader+len(id)+len(body))
	buf := s.chunk(num).buf[off:]
	binary.LittleEndian.PutUint32(buf, head)
	copy(buf[recHeader:], id)
	copy(buf[recHeader+len(id):], body)
	return ref{chunk: num, off: uint32(off), id: idBits, bodyLen: uint32(len(body))}
}

// alloc reserves n bytes (align8(n) of a chunk, live) for a record of
// slot: in a chunk of its own when n is over largeRecord, else at the end
// of the open chunk, a new one when it has no room. It returns the
// chunk's number and the record's offset.
func (s *slab) alloc(slot uint32, n int) (num uint32, off int) {
	var c *chunk
	if n > largeRecord {
		c = &chunk{buf: make([]byte, n)}
		num = s.add(c)
	} else {
		if s.open == 0 || len(s.chunk(s.open).buf)-s.chunk(s.open).used < n {
			s.close()
			s.open = s.add(&chunk{buf: s.newBuf()})
		}
		num, c = s.open, s.chunk(s.open)
	}
	off = c.used
	c.used = min(c.used+align8(n), len(c.buf))
	c.live += align8(n)
	c.slots = append(c.slots, slot)
	return num, off
}

// close retires the open chunk: dropped when all dead, kept for
// compaction (compactClosed) when under half live (its dead bytes
// came while it was open, when frees do not compact), else kept.
func (s *slab) close() {
	if s.open == 0 {
		return
	}
	switch c := s.chunk(s.open); {
	case c.live == 0:
		s.drop(s.open)
	case c.live*2 < c.used:
		s.closed = append(s.closed, closedChunk{s.open, c})
	}
	s.open = 0
}

// reusingBuf, when set (by tests), sees each dropped chunk's buffer as
// it is reused.
var reusingBuf func([]byte)

// newBuf returns a buffer for a new chunk: a dropped chunk's, or a new one.
func (s *slab) newBuf() []byte {
	if n := len(s.bufs); n > 0 {
		b := s.bufs[n-1]
		s.bufs[n-1] = nil
		s.bufs = s.bufs[:n-1]
		if reusingBuf != nil {
			reusingBuf(b)
		}
		return b
	}
	return make([]byte, chunkBytes)
}

// add numbers c, a new chunk.
func (s *slab) add(c *chunk) uint32 {
	s.bytes += len(c.buf)
	if n := len(s.spare); n > 0 {
		num := s.spare[n-1]
		s.spare = s.spare[:n-1]
		s.chunks[num-1] = c
		return num
	}
	s.chunks = append(s.chunks, c)
	return uint32(len(s.chunks))
}

// drop forgets chunk num, whose records are all dead or moved, keeping
// its buffer for a new chunk while fewer than spareBufs are kept. Its
// bytes will be written over: no view of them may be held (the caller
// holds the store's write lock, and views do not outlive the lock).
func (s *slab) drop(num uint32) {
	buf := s.chunk(num).buf
	s.bytes -= len(buf)
	if len(buf) == chunkBytes && len(s.bufs) < spareBufs {
		s.bufs = append(s.bufs, buf)
	}
	s.chunks[num-1] = nil
	s.spare = append(s.spare, num)
	if s.open == num {
		s.open = 0
	}
}

// setRecord writes e's record anew, with body and its head length, and
// frees the one it had.
// REQUIRES: the caller holds the store's write lock.
func (t *slots) setRecord(e *entry, id a2a.TaskID, body string, head uint32) {
	old := e.rec
	e.rec = t.data.write(e.slot, id, body, head)
	if e.rec.slabID() == 0 {
		copy(e.sid[:], id) // id may be e's own: copy moves
	}
	if old.chunk != 0 {
		t.data.free(old.chunk, old.size(), t.compact)
	}
	t.data.compactClosed(t.compact)
}

// compactClosed compacts (compact) the chunks closed under half live that
// still are (their compactions may close more).
func (s *slab) compactClosed(compact func(num uint32)) {
	for len(s.closed) > 0 {
		n := len(s.closed) - 1
		cc := s.closed[n]
		s.closed[n] = closedChunk{}
		s.closed = s.closed[:n]
		if int(cc.num) <= len(s.chunks) && s.chunk(cc.num) == cc.c && cc.num != s.open && cc.c.live*2 < cc.c.used {
			compact(cc.num)
		}
	}
}

// free marks size bytes of chunk num dead, dropping the chunk when none
// is live, compacting it (compact) when under half is.
func (s *slab) free(num uint32, size int, compact func(num uint32)) {
	c := s.chunk(num)
	c.live -= size
	switch {
	case c.live == 0 && num != s.open:
		s.drop(num)
	case num != s.open && c.live*2 < c.used:
		compact(num)
	}
}

// compact writes the live records of chunk num again in the open chunk
// and drops num.
func (t *slots) compact(num uint32) {
	c := t.data.chunk(num)
	for _, slot := range c.slots {
		if e := t.at(slot); e.rec.chunk == num {
			r := e.rec
			e.rec = t.data.write(slot, t.id(e), t.data.body(r), t.data.head(r))
		}
	}
	t.data.drop(num)
}

// id returns e's ID, a view into the entry or the slab (see copies).
func (t *slots) id(e *entry) a2a.TaskID {
	r := e.rec
	switch {
	case r.id == 0:
		return ""
	case r.slabID() == 0:
		return a2a.TaskID(unsafe.String(&e.sid[0], int(r.idLen())))
	}
	return a2a.TaskID(t.data.view(r, recHeader, r.slabID()))
}

// body returns e's body, a view into the slab (see copies).
func (t *slots) body(e *entry) string { return t.data.body(e.rec) }

// head returns how many bytes of e's body a page without history or
// artifacts decodes: its metadata and head (taskcodec.AppendTaskHead).
func (t *slots) head(e *entry) uint32 { return t.data.head(e.rec) }

// cursor returns e's cursor, whose ID is a view (see id).
func (t *slots) cursor(e *entry) engine.Cursor {
	return engine.Cursor{UpdatedAt: e.updatedAt, ID: t.id(e)}
}

// copies copies views out of the slab into one allocation: what the store
// hands out, or keeps beyond the entry, never holds a chunk.
type copies struct{ buf []byte }

// newCopies returns copies for n bytes of views.
func newCopies(n int) copies { return copies{make([]byte, 0, n)} }

// add returns a copy of s, which shares the allocation with the others.
// REQUIRES: the bytes added so far and s fit the n of newCopies.
func (c *copies) add(s string) string {
	if s == "" {
		return ""
	}
	i := len(c.buf)
	c.buf = append(c.buf, s...)
	return unsafe.String(&c.buf[i], len(s))
}

// detached returns a copy of id.
func detached(id a2a.TaskID) a2a.TaskID { return a2a.TaskID(strings.Clone(string(id))) }

// holds reports whether e names a record that is there: a chunk not
// dropped, within what it holds.
func (t *slots) holds(e *entry) bool {
	r := e.rec
	if r.chunk == 0 || int(r.chunk) > len(t.data.chunks) || t.data.chunk(r.chunk) == nil {
		return false
	}
	c := t.data.chunk(r.chunk)
	return c.used <= len(c.buf) && int(r.off)+recHeader+int(r.slabID())+int(r.bodyLen) <= c.used && t.data.head(r) <= r.bodyLen
}

// checkSlab verifies the slab against the entries of ids (the ID map's
// slots): every chunk's live bytes are its entries' records, and it lists
// their slots; no chunk but the open one is all dead; the dropped chunks
// are the spare numbers; no chunk but the open one is under half live;
// the slab's bytes are its chunks'.
func (t *slots) checkSlab(ids map[a2a.TaskID]uint32) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	live := make(map[uint32]int)
	for id, slot := range ids {
		if slot >= t.n {
			continue // reported with the ID map
		}
		e := t.at(slot)
		if !t.holds(e) {
			fail("task %q: its record %+v is not in the slab", id, e.rec)
			continue
		}
		live[e.rec.chunk] += e.rec.size()
		if !slices.Contains(t.data.chunk(e.rec.chunk).slots, slot) {
			fail("task %q: chunk %d does not list its slot %d", id, e.rec.chunk, slot)
		}
	}
	return append(errs, t.data.check(live)...)
}

// check verifies the chunks against live, their live bytes by chunk
// number: no chunk but the open one is all dead or under half live; the
// dropped chunks are the spare numbers; the slab's bytes are its chunks'.
func (s *slab) check(live map[uint32]int) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	spare := make(map[uint32]bool, len(s.spare))
	for _, num := range s.spare {
		spare[num] = true
	}
	bytes := 0
	for i, c := range s.chunks {
		num := uint32(i + 1)
		switch {
		case c == nil && !spare[num]:
			fail("chunk %d dropped but not spare", num)
		case c == nil:
		case spare[num]:
			fail("chunk %d spare but not dropped", num)
		case c.live != live[num] || c.used > len(c.buf):
			fail("chunk %d: %d live bytes, its records hold %d; %d of %d used", num, c.live, live[num], c.used, len(c.buf))
		case c.live == 0 && num != s.open:
			fail("chunk %d holds no live record and is kept", num)
		case c.live*2 < c.used && num != s.open:
			fail("chunk %d is under half live (%d of %d) and not compacted", num, c.live, c.used)
		}
		if c != nil {
			bytes += len(c.buf)
		}
	}
	if bytes != s.bytes || len(spare) != len(s.spare) {
		fail("slab: %d bytes counted, %d in its chunks; %d spare numbers, %d distinct", s.bytes, bytes, len(s.spare), len(spare))
	}
	return errs
}
