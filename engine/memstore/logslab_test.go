package memstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// Random log entries encode to logEntryLen bytes and decode to
// themselves, states the store does not number and traces among them;
// every shorter prefix of an encoding is refused, not misread.
func TestLogEntryEncoding(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for range 500 {
		l := engine.LogEntry{
			Revision: rng.Int64(), Time: rng.Int64() - math.MaxInt64/2,
			Kind:  engine.LogKind(rng.IntN(256)),
			State: states[rng.IntN(numStates)],
		}
		if rng.IntN(4) == 0 {
			l.State = a2a.TaskState(strings.Repeat("S", rng.IntN(300)))
		}
		if n := []int{0, 1, 127, 128, 5000}[rng.IntN(5)]; n > 0 {
			l.Body = make([]byte, n)
			for i := range l.Body {
				l.Body[i] = byte(rng.IntN(256))
			}
		}
		if rng.IntN(2) == 0 {
			l.Trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		}
		b := appendLogEntry(nil, &l)
		if len(b) != logEntryLen(&l) {
			t.Fatalf("%d bytes encoded, logEntryLen %d", len(b), logEntryLen(&l))
		}
		got, trace, rest, ok := nextLogEntry(b)
		got.Trace = string(trace)
		if len(got.Body) == 0 {
			got.Body = nil
		}
		if !ok || len(rest) != 0 || !reflect.DeepEqual(got, l) {
			t.Fatalf("decoded %+v (ok %v, %d bytes left), want %+v", got, ok, len(rest), l)
		}
		for _, cut := range []int{0, 17, 18, len(b) - len(l.Body) - 5, len(b) - 4, len(b) - 1} {
			if cut >= 0 && cut < len(b) {
				if _, _, _, ok := nextLogEntry(b[:cut]); ok {
					t.Fatalf("%d of %d bytes decoded as an entry", cut, len(b))
				}
			}
		}
	}
}

// Random creates, replaces (logs growing past their room, some into
// chunks of their own), history appends, deletes and trims on a logged
// store: each write's entry reads back as the next of its task's log; at
// every check every log reads back whole as its entries were read when
// written, CheckInvariants holds (the logs' slab accounting among it) and
// the logs' closed chunks hold at most twice their live regions, plus two
// chunks. At the end every task is deleted and nothing but the open chunk
// is left.
func TestLogSlabChurn(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	ctx := context.Background()
	s := New(Options{Log: true})
	want := map[a2a.TaskID][]engine.LogEntry{} // the logs read, of the stored tasks with one
	stored := map[a2a.TaskID]bool{}
	task := func(id a2a.TaskID) *a2a.Task {
		n := rng.IntN(2000)
		if rng.IntN(100) == 0 {
			n = largeRecord + rng.IntN(largeRecord)
		}
		return &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"text": strings.Repeat("x", n)}}
	}
	for step := range 6000 {
		id := a2a.TaskID(fmt.Sprintf("task-%d", rng.IntN(300)))
		wrote := true
		var err error
		switch {
		case !stored[id]:
			_, err = s.Create(ctx, task(id))
			stored[id] = true
		case rng.IntN(10) == 0:
			err = s.Delete(ctx, id)
			delete(want, id)
			delete(stored, id)
			wrote = false
		case rng.IntN(200) == 0:
			_, err = s.TrimLog(ctx, math.MaxInt64, 1_000)
			clear(want)
			wrote = false
		case rng.IntN(3) == 0:
			_, err = s.AppendHistory(ctx, id, &a2a.Message{ID: fmt.Sprint(step), Role: a2a.MessageRoleUser,
				Parts: a2a.ContentParts{a2a.NewTextPart(strings.Repeat("m", rng.IntN(500)))}})
		default:
			_, err = s.Replace(ctx, task(id), 0)
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if wrote {
			checkNextLogEntry(t, s, id, want)
		}
		if step%100 == 0 {
			checkLogs(t, s, want)
		}
	}
	checkLogs(t, s, want)
	for id := range stored {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.mu.logs.data.chunks) - len(s.mu.logs.data.spare); n > 1 || len(s.mu.logs.refs) > 0 {
		t.Errorf("an emptied store keeps %d logs' chunks and %d logs, want at most the open chunk", n, len(s.mu.logs.refs))
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// checkNextLogEntry reads id's log past what want holds of it: one entry,
// the task's revision, time and state, which it appends to want[id]. A
// task whose log was trimmed has none in want: its read starts from the
// entry before its revision.
func checkNextLogEntry(t *testing.T, s *Store, id a2a.TaskID, want map[a2a.TaskID][]engine.LogEntry) {
	t.Helper()
	rec, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	after := rec.Revision - 1
	if n := len(want[id]); n > 0 {
		after = want[id][n-1].Revision
	}
	got, err := s.ReadLog(context.Background(), id, after, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Revision != rec.Revision || got[0].Time != rec.Cursor.UpdatedAt || got[0].State != rec.Task.Status.State {
		t.Fatalf("%s at revision %d: log after %d reads %+v", id, rec.Revision, after, got)
	}
	want[id] = append(want[id], got[0])
}

// checkLogs checks that every log of want reads back as it was read, that
// the store's invariants hold, and the logs' slab's size.
func checkLogs(t *testing.T, s *Store, want map[a2a.TaskID][]engine.LogEntry) {
	t.Helper()
	for id, log := range want {
		got, err := s.ReadLog(context.Background(), id, log[0].Revision-1, len(log)+1)
		if err != nil || !reflect.DeepEqual(got, log) {
			t.Fatalf("%s: log reads %d entries (%v), want the %d read before", id, len(got), err, len(log))
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	checkChunksBound(t, &s.mu.logs.data)
}

// What ReadLog and Export hand out is copied out of the slab: the logs
// read are unchanged after their task is deleted and the chunks that held
// them are written over, and changing them changes nothing stored.
func TestLogReadsAreCopies(t *testing.T) {
	ctx := context.Background()
	s := New(Options{Log: true})
	create := func(id a2a.TaskID) {
		t.Helper()
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"text": strings.Repeat(string(id), 1000/len(id))}}); err != nil {
			t.Fatal(err)
		}
	}
	create("kept")
	create("gone")
	read, err := s.ReadLog(ctx, "gone", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	exported, err := s.Export(ctx, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	saved := [][]byte{bytes.Clone(read[0].Body), bytes.Clone(exported[0].Log[0].Body), bytes.Clone(exported[1].Log[0].Body)}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	reused := 0
	reusingBuf = func([]byte) { reused++ }
	defer func() { reusingBuf = nil }()
	for i := 0; reused < 2*spareBufs; i++ { // every dropped chunk's buffer written over
		id := a2a.TaskID(fmt.Sprintf("churn-%d", i))
		create(id)
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for i, got := range [][]byte{read[0].Body, exported[0].Log[0].Body, exported[1].Log[0].Body} {
		if !bytes.Equal(got, saved[i]) {
			t.Fatalf("entry %d read before the churn changed: %.60q, was %.60q", i, got, saved[i])
		}
	}
	kept := exported[0].Log[0]
	if exported[0].Task.ID != "kept" {
		kept = exported[1].Log[0]
	}
	clear(kept.Body)
	again, err := s.ReadLog(ctx, "kept", 0, 1)
	if err != nil || len(again) != 1 || bytes.Equal(again[0].Body, kept.Body) {
		t.Fatalf("ReadLog after the exported body was zeroed: %v, %v", again, err)
	}
}

// CheckInvariants reports each kind of damage to the logs, and does not
// panic on it.
func TestCheckReportsDamagedLogs(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(s *Store, x, y *entry)
		want   string
	}{
		{"region past its room", func(s *Store, x, _ *entry) { s.setRef(x, func(r *logRef) { r.len = r.room + 1 }) }, "not in the slab"},
		{"region past its chunk", func(s *Store, x, _ *entry) { s.setRef(x, func(r *logRef) { r.off = chunkBytes - 8 }) }, "not in the slab"},
		{"region past the chunks", func(s *Store, x, _ *entry) { s.setRef(x, func(r *logRef) { r.chunk = 99 }) }, "not in the slab"},
		{"region in a dropped chunk", func(s *Store, x, _ *entry) {
			s.mu.logs.data.chunks = append(s.mu.logs.data.chunks, nil)
			s.mu.logs.data.spare = append(s.mu.logs.data.spare, uint32(len(s.mu.logs.data.chunks)))
			s.setRef(x, func(r *logRef) { r.chunk = uint32(len(s.mu.logs.data.chunks)) })
		}, "not in the slab"},
		{"region past what its chunk holds", func(s *Store, x, _ *entry) {
			s.setRef(x, func(r *logRef) { r.off = uint32(s.mu.logs.data.chunk(r.chunk).used) })
		}, "not in the slab"},
		{"chunk's live bytes off", func(s *Store, x, _ *entry) { s.mu.logs.data.chunk(s.mu.logs.refs[x.slot].chunk).live += 8 }, "live bytes"},
		{"chunk not listing its log", func(s *Store, x, _ *entry) {
			c := s.mu.logs.data.chunk(s.mu.logs.refs[x.slot].chunk)
			c.slots = slicesDelete(c.slots, x.slot)
		}, "does not list it"},
		{"a log without a task", func(s *Store, x, _ *entry) {
			s.mu.logs.refs[x.slot+100] = s.mu.logs.refs[x.slot]
		}, "holds no task"},
		{"an entry's state damaged", func(s *Store, x, _ *entry) { s.logBytes(x)[17] = numStates }, "cut short or damaged"},
		{"an entry cut short", func(s *Store, x, _ *entry) { s.setRef(x, func(r *logRef) { r.len-- }) }, "cut short or damaged"},
		{"revisions not consecutive", func(s *Store, _, y *entry) {
			b := s.logBytes(y)
			_, _, rest, _ := nextLogEntry(b)
			rest[0]++ // the second entry's revision, little-endian
		}, "log revisions 1 then 3"},
		{"last entry not the task's", func(s *Store, x, _ *entry) { s.logBytes(x)[8]++ }, "last log entry at revision 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := New(Options{Log: true})
			for _, id := range []a2a.TaskID{"x", "y"} {
				if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Replace(ctx, &a2a.Task{ID: "y", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, 0); err != nil {
				t.Fatal(err)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			c.damage(s, s.entryOf("x"), s.entryOf("y"))
			s.mu.Unlock()
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("CheckInvariants panicked: %v", p)
				}
			}()
			if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("CheckInvariants = %v, want %q", err, c.want)
			}
		})
	}
}

// setRef changes e's log's ref.
func (s *Store) setRef(e *entry, change func(*logRef)) {
	r := s.mu.logs.refs[e.slot]
	change(&r)
	s.mu.logs.refs[e.slot] = r
}

// logBytes is e's log, a view of the slab that writes to it.
func (s *Store) logBytes(e *entry) []byte { return s.mu.logs.view(e.slot) }

func slicesDelete(s []uint32, v uint32) []uint32 {
	out := s[:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// A chunk of logs that falls under half live while it is open (frees
// leave the open chunk alone) is compacted as soon as a new log closes
// it, its logs moved to regions without room to spare.
func TestLogChunkClosedUnderHalfIsCompacted(t *testing.T) {
	ctx := context.Background()
	s := New(Options{Log: true})
	create := func(id a2a.TaskID, n int) {
		t.Helper()
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"text": strings.Repeat("x", n)}}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []a2a.TaskID
	for i := 0; len(ids) == 0 || s.mu.logs.data.chunk(s.mu.logs.data.open).used < chunkBytes-4096; i++ {
		ids = append(ids, a2a.TaskID(fmt.Sprint("t", i)))
		create(ids[i], 1000)
	}
	first := s.mu.logs.data.open
	for _, id := range ids[len(ids)/4:] {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	create("big", 8192) // does not fit: the first chunk closes
	if s.mu.logs.data.open == first {
		t.Fatal("the first chunk is still open")
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if c := s.mu.logs.data.chunks[first-1]; c != nil {
		t.Fatalf("the first chunk is kept, %d of %d bytes live", c.live, c.used)
	}
	for _, id := range ids[:len(ids)/4] {
		if log, err := s.ReadLog(ctx, id, 0, 2); err != nil || len(log) != 1 {
			t.Fatalf("%s: %d entries after the compaction, %v", id, len(log), err)
		}
		if r := s.mu.logs.refs[s.entryOf(id).slot]; r.room != r.len {
			t.Fatalf("%s: a compacted log keeps room: %+v", id, r)
		}
	}
}

// seekLog finds the first entry after any revision, and decodeLog returns
// the entries after it, at most limit, as a filter of the whole log
// would, whichever end seekLog walks from, with consecutive revisions and
// with gaps; what decodeLog returns does not change when the log it read
// does; a damaged last trailer (0, short, past the log) is an error, not
// a panic or a walk that does not end.
func TestDecodeLogSeeks(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for range 200 {
		var log []byte
		var all []engine.LogEntry
		rev := rng.Int64N(100)
		for range rng.IntN(12) {
			rev += 1 + int64(rng.IntN(2)*rng.IntN(3)) // sometimes a gap
			l := engine.LogEntry{Revision: rev, Kind: engine.LogTask, State: a2a.TaskStateWorking, Body: []byte(strings.Repeat("b", rng.IntN(300)))}
			if rng.IntN(2) == 0 {
				l.Trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			}
			if len(l.Body) == 0 {
				l.Body = nil
			}
			all = append(all, l)
			log = appendLogEntry(log, &l)
		}
		var offsets []int // of each entry
		for at := 0; at < len(log); {
			offsets = append(offsets, at)
			_, _, rest, _ := nextLogEntry(log[at:])
			at = len(log) - len(rest)
		}
		for after := int64(-1); after <= rev+1; after++ {
			want := len(log)
			for i, l := range all {
				if l.Revision > after {
					want = offsets[i]
					break
				}
			}
			if got, err := seekLog(log, after); err != nil || got != want {
				t.Fatalf("seekLog after %d = %d, %v; want %d", after, got, err, want)
			}
		}
		for after := int64(-1); after <= rev+1; after++ {
			limit := 1 + rng.IntN(4)
			var want []engine.LogEntry
			for _, l := range all {
				if l.Revision > after && len(want) < limit {
					want = append(want, l)
				}
			}
			got, err := decodeLog(log, after, limit)
			if err != nil || len(got) != len(want) || len(want) > 0 && !reflect.DeepEqual(got, want) {
				t.Fatalf("after %d, limit %d: %v (%v), want %v", after, limit, got, err, want)
			}
		}
		if len(log) == 0 {
			continue
		}
		for _, trailer := range []uint32{0, 1, logEntryMin - 1, uint32(len(log) + 1)} {
			damaged := bytes.Clone(log)
			binary.LittleEndian.PutUint32(damaged[len(damaged)-4:], trailer)
			for _, after := range []int64{-1, all[0].Revision, rev - 1} {
				if _, err := decodeLog(damaged, after, 20); err == nil {
					t.Fatalf("a trailer of %d read after %d without an error", trailer, after)
				}
			}
		}
		got, err := decodeLog(log, -1, len(all))
		if err != nil {
			t.Fatal(err)
		}
		for i := range log {
			log[i] = 0xee // what the entries were read from, written over
		}
		for i := range got {
			if !bytes.Equal(got[i].Body, all[i].Body) || got[i].Trace != all[i].Trace {
				t.Fatalf("entry %d changed with the log it was read from: %.40q", i, got[i].Body)
			}
		}
	}
}

// entryOfSize is an entry of exactly 1000 bytes encoded (body 975).
func entryOfSize(rev int64, fill byte) *engine.LogEntry {
	return &engine.LogEntry{Revision: rev, Time: rev, Kind: engine.LogTask, State: a2a.TaskStateWorking, Body: bytes.Repeat([]byte{fill}, 975)}
}

// An append that grows slot S's log into the open chunk A, whose free of
// S's old region compacts chunk B into A until A closes under half live,
// so that A is compacted too, S's new region with it: the entry must be
// in the region before (it was once written past the moved region's
// room, over the next task's log, and the next append panicked).
func TestLogAppendWhoseNewRegionIsCompacted(t *testing.T) {
	l := &taskLogs{refs: map[uint32]logRef{}}
	const S = 0
	if n := logEntryLen(entryOfSize(1, 's')); n != 1000 {
		t.Fatalf("entry %d bytes", n)
	}
	l.append(S, entryOfSize(1, 's'))
	for slot := uint32(1); slot <= 261; slot++ { // fill chunk B (1)
		l.append(slot, entryOfSize(1, byte(slot)))
	}
	B := l.refs[S].chunk
	l.append(262, entryOfSize(1, 'a')) // opens chunk A (2); B closes full
	A := l.data.open
	if A == B {
		t.Fatal("B still open")
	}
	for slot := uint32(1); slot <= 131; slot++ { // B at exactly half live
		l.drop(slot)
	}
	for slot := uint32(263); slot < 462; slot++ { // fill A to 200000
		l.append(slot, entryOfSize(1, 'a'))
	}
	for slot := uint32(263); slot < 453; slot++ { // and kill most of it (A is open: no compaction)
		l.drop(slot)
	}
	t.Logf("before: B live %d used %d; A live %d used %d", l.data.chunk(B).live, l.data.chunk(B).used, l.data.chunk(A).live, l.data.chunk(A).used)
	l.append(S, entryOfSize(2, 'S')) // grows S into A; frees B under half
	if l.data.chunks[B-1] != nil || l.data.chunks[A-1] != nil {
		t.Fatalf("the setup missed: chunk B kept %v, chunk A kept %v (both should be compacted)", l.data.chunks[B-1] != nil, l.data.chunks[A-1] != nil)
	}
	r := l.refs[S]
	t.Logf("S's region %+v", r)
	if r.len > r.room {
		t.Errorf("S's log holds %d bytes in a region of %d", r.len, r.room)
	}
	if got, err := decodeLog(l.view(S), 0, 10); err != nil || len(got) != 2 || got[1].Body[0] != 'S' {
		t.Errorf("S's log reads %d entries, %v", len(got), err)
	}
	if got, _ := decodeLog(l.view(S), 0, 10); len(got) == 2 {
		t.Logf("S's second entry: revision %d, body %q...", got[1].Revision, got[1].Body[:4])
	}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("the next append to S panicked: %v", p)
		}
	}()
	l.append(S, entryOfSize(3, 'T'))
	for slot, r := range l.refs {
		if slot == S || r.chunk != l.refs[S].chunk {
			continue
		}
		if _, err := decodeLog(l.view(slot), 0, 10); err != nil {
			t.Errorf("slot %d's log after S's next append: %v", slot, err)
		}
	}
	if errs := l.check(func(uint32) bool { return true }); len(errs) > 0 {
		t.Errorf("check: %v", errs)
	}
}

// The same through the Store: a Replace of s0000 whose log grows while a
// compaction it sets off closes the open chunk under half live; its log
// reads back whole, the invariants hold and the next Replace works.
func TestReplaceWhoseLogRegionIsCompacted(t *testing.T) {
	ctx := context.Background()
	s := New(Options{Log: true})
	task := func(id string) *a2a.Task {
		return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"text": strings.Repeat("x", 900)}}
	}
	create := func(id string) {
		t.Helper()
		if _, err := s.Create(ctx, task(id)); err != nil {
			t.Fatal(err)
		}
	}
	del := func(id string) {
		t.Helper()
		if err := s.Delete(ctx, a2a.TaskID(id)); err != nil {
			t.Fatal(err)
		}
	}
	d := &s.mu.logs.data
	create("s0000")
	size := s.mu.logs.refs[s.entryOf("s0000").slot].size()
	B := d.open
	var bs []string
	for i := 0; d.open == B; i++ {
		bs = append(bs, fmt.Sprintf("b%04d", i))
		create(bs[i])
	}
	A := d.open
	for _, id := range bs[:len(bs)-1] { // B down to just at half, over it by less than s's log
		if c := d.chunk(B); (c.live-size)*2 < c.used {
			break
		}
		del(id)
	}
	var as []string
	for i := 0; d.chunk(A).used < 200_000; i++ {
		as = append(as, fmt.Sprintf("a%04d", i))
		create(as[i])
	}
	for _, id := range as[:len(as)-10] {
		del(id)
	}
	t.Logf("B live %d of %d, A live %d of %d, s's log %d bytes", d.chunk(B).live, d.chunk(B).used, d.chunk(A).live, d.chunk(A).used, size)
	if _, err := s.Replace(ctx, task("s0000"), 0); err != nil {
		t.Fatal(err)
	}
	if d.chunks[B-1] != nil || d.chunks[A-1] != nil {
		t.Fatalf("the setup missed: chunk B kept %v, chunk A kept %v (both should be compacted)", d.chunks[B-1] != nil, d.chunks[A-1] != nil)
	}
	log, err := s.ReadLog(ctx, "s0000", 0, 10)
	for _, l := range log {
		t.Logf("s0000's log: revision %d, body %.80s", l.Revision, l.Body)
	}
	if err != nil || len(log) != 2 || log[0].Revision != 1 || log[1].Revision != 2 {
		t.Errorf("s0000's log: %d entries, %v", len(log), err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Errorf("CheckInvariants: %v", err)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("the next Replace panicked: %v", p)
		}
	}()
	if _, err := s.Replace(ctx, task("s0000"), 0); err != nil {
		t.Fatal(err)
	}
}

// An Import whose logs close an open chunk fallen under half live
// compacts it (taskLogs.set did not, and CheckInvariants failed after a
// legal Import).
func TestImportCompactsChunkItCloses(t *testing.T) {
	ctx := context.Background()
	s := New(Options{Log: true})
	task := func(id string) *a2a.Task {
		return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"text": strings.Repeat("x", 900)}}
	}
	var ids []string
	for i := 0; len(ids) == 0 || s.mu.logs.data.chunk(s.mu.logs.data.open).used < chunkBytes-8192; i++ {
		ids = append(ids, fmt.Sprintf("t%04d", i))
		if _, err := s.Create(ctx, task(ids[i])); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[len(ids)/4:] {
		if err := s.Delete(ctx, a2a.TaskID(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Import tasks with logs until the open chunk closes.
	first := s.mu.logs.data.open
	for i := 0; s.mu.logs.data.open == first; i++ {
		tk := task(fmt.Sprintf("i%04d", i))
		l, err := engine.NewLogEntry(tk, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.Revision, l.Time = 1, 1000
		st := engine.StoredTask{Record: engine.Record{Task: tk, Revision: 1, Cursor: engine.Cursor{UpdatedAt: 1000, ID: tk.ID}}, Log: []engine.LogEntry{l}}
		if err := s.Import(ctx, []engine.StoredTask{st}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Errorf("after the Import: %v", err)
	}
	if c := s.mu.logs.data.chunks[first-1]; c != nil {
		t.Errorf("the chunk the Import closed is kept, %d of %d bytes live", c.live, c.used)
	}
}

// A write whose entry would take its task's log past maxLogBytes is
// refused with ErrInvalidArgument and changes nothing (no entry is
// dropped to make room: K7); Replace, AppendHistory, Create and Import
// alike. Once the log is trimmed the task takes writes again.
func TestLogSizeBounded(t *testing.T) {
	defer func(n int) { maxLogBytes = n }(maxLogBytes)
	maxLogBytes = 8 << 10
	ctx := context.Background()
	s := New(Options{Log: true})
	task := func(n int) *a2a.Task {
		return &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"text": strings.Repeat("x", n)}}
	}
	if _, err := s.Create(ctx, task(maxLogBytes)); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("Create with an entry over the bound: %v", err)
	}
	if _, err := s.Create(ctx, task(900)); err != nil {
		t.Fatal(err)
	}
	var err error
	for err == nil {
		_, err = s.Replace(ctx, task(900), 0)
	}
	if !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("the Replace past the bound: %v", err)
	}
	before, _ := s.Get(ctx, "t")
	log, _ := s.ReadLog(ctx, "t", 0, 100)
	if _, err := s.AppendHistory(ctx, "t", &a2a.Message{ID: "m", Role: a2a.MessageRoleUser,
		Parts: a2a.ContentParts{a2a.NewTextPart(strings.Repeat("m", 2000))}}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("AppendHistory past the bound: %v", err)
	}
	after, _ := s.Get(ctx, "t")
	again, _ := s.ReadLog(ctx, "t", 0, 100)
	if after.Revision != before.Revision || len(again) != len(log) || log[0].Revision != 1 || log[len(log)-1].Revision != before.Revision {
		t.Fatalf("a refused write changed the task or its log: revision %d then %d, %d entries then %d", before.Revision, after.Revision, len(log), len(again))
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimLog(ctx, math.MaxInt64, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Replace(ctx, task(900), 0); err != nil {
		t.Fatalf("Replace after the trim: %v", err)
	}
	big := task(900)
	big.ID = "imported"
	st := engine.StoredTask{Record: engine.Record{Task: big, Revision: 20, Cursor: engine.Cursor{UpdatedAt: 1000, ID: big.ID}}}
	for rev := int64(1); rev <= 20; rev++ {
		l, err := engine.NewLogEntry(big, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.Revision, l.Time = rev, 1000
		st.Log = append(st.Log, l)
	}
	if err := s.Import(ctx, []engine.StoredTask{st}); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("Import of a log over the bound: %v", err)
	}
	if _, err := s.Get(ctx, "imported"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a refused Import stored its task: %v", err)
	}
}

// A drop (Delete, TrimLog) whose free compacts a chunk into the open one
// until it closes under half live compacts that one too.
func TestLogDropCompactsChunkItCloses(t *testing.T) {
	l := &taskLogs{refs: map[uint32]logRef{}}
	for slot := uint32(0); slot <= 261; slot++ { // fill chunk B
		l.append(slot, entryOfSize(1, byte(slot)))
	}
	B := l.refs[0].chunk
	l.append(262, entryOfSize(1, 'a')) // opens chunk A; B closes full
	A := l.data.open
	for slot := uint32(1); slot <= 131; slot++ { // B at half live
		l.drop(slot)
	}
	for slot := uint32(263); slot < 462; slot++ { // A to 200,000 bytes
		l.append(slot, entryOfSize(1, 'a'))
	}
	for slot := uint32(263); slot < 453; slot++ { // most of it dead (A is open: no compaction)
		l.drop(slot)
	}
	l.drop(132) // B under half: compacted into A, which closes under half
	if l.data.chunks[B-1] != nil || l.data.chunks[A-1] != nil {
		t.Fatalf("chunk B kept %v, chunk A kept %v (both should be compacted)", l.data.chunks[B-1] != nil, l.data.chunks[A-1] != nil)
	}
	if errs := l.check(func(uint32) bool { return true }); len(errs) > 0 {
		t.Fatal(errs)
	}
	for slot := range l.refs {
		if got, err := decodeLog(l.view(slot), 0, 2); err != nil || len(got) != 1 {
			t.Fatalf("slot %d reads %d entries, %v", slot, len(got), err)
		}
	}
}

// A compaction moves a log to a region without room to spare: a log
// grown to room for four entries holding three is compacted to three.
func TestLogCompactionLeavesNoRoom(t *testing.T) {
	l := &taskLogs{refs: map[uint32]logRef{}}
	for rev := int64(1); rev <= 3; rev++ {
		l.append(0, entryOfSize(rev, 'g'))
	}
	if r := l.refs[0]; r.len != 3000 || r.room != 4000 {
		t.Fatalf("the grown log is %+v, want 3000 bytes in 4000", r)
	}
	first := l.refs[0].chunk
	slot := uint32(1)
	for ; l.data.open == first; slot++ {
		l.append(slot, entryOfSize(1, 'f'))
	}
	for s := uint32(1); s < slot && l.data.chunks[first-1] != nil; s++ {
		l.drop(s)
	}
	if l.data.chunks[first-1] != nil {
		t.Fatal("the first chunk was not compacted")
	}
	if r := l.refs[0]; r.len != 3000 || r.room != 3000 {
		t.Fatalf("the compacted log is %+v, want 3000 bytes in 3000", r)
	}
	if got, err := decodeLog(l.view(0), 0, 10); err != nil || len(got) != 3 {
		t.Fatalf("the compacted log reads %d entries, %v", len(got), err)
	}
}
