package memstore

import (
	"bytes"
	"context"
	"encoding/binary"
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
		{"region in a dropped chunk", func(s *Store, x, _ *entry) { s.setRef(x, func(r *logRef) { r.chunk = 99 }) }, "not in the slab"},
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
// it.
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
	}
}

// decodeLog returns the entries after any revision, at most limit, as a
// filter of the whole log would, whichever end seekLog walks from:
// consecutive revisions and, since its result must not depend on them,
// gaps; a trailer damaged anywhere is an error, not a panic.
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
			if len(l.Body) == 0 {
				l.Body = nil
			}
			all = append(all, l)
			log = appendLogEntry(log, &l)
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
		if len(log) > 0 {
			damaged := bytes.Clone(log)
			binary.LittleEndian.PutUint32(damaged[len(damaged)-4:], uint32(len(damaged)+1))
			for _, after := range []int64{-1, all[0].Revision, rev - 1} {
				if _, err := decodeLog(damaged, after, 20); err == nil {
					t.Fatalf("a damaged trailer read after %d without an error", after)
				}
			}
		}
	}
}
