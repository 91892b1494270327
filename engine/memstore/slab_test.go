package memstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// The entries hold no pointer: the collector never scans the slots'
// chunks (#55). A field that is, or holds, a pointer, a string, a slice
// or a map fails this.
func TestEntryHoldsNoPointer(t *testing.T) {
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		switch ty.Kind() {
		case reflect.Struct:
			for i := range ty.NumField() {
				walk(ty.Field(i).Type, path+"."+ty.Field(i).Name)
			}
		case reflect.Array:
			walk(ty.Elem(), path+"[]")
		case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int,
			reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		default:
			t.Errorf("entry%s is a %s, which the collector scans", path, ty.Kind())
		}
	}
	walk(reflect.TypeFor[entry](), "")
}

// Random creates, replaces with bodies of random sizes (large records
// among them) and deletes: after each step the slab's accounting is
// exact (CheckInvariants: each chunk's live bytes are its entries'
// records), every task reads back as last written, by Get and in pages,
// and the chunks hold at most twice the live records, plus the open chunk
// and the large records' own chunks. The IDs' lengths straddle idInline
// (held by the entry up to it, by the record past it). At the end every
// task is deleted and nothing but the open chunk is left.
func TestSlabChurn(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	ctx := context.Background()
	s := New(Options{})
	want := map[a2a.TaskID]string{}
	task := func(id a2a.TaskID) *a2a.Task {
		n := rng.IntN(4000)
		if rng.IntN(50) == 0 {
			n = largeRecord + rng.IntN(largeRecord) // a chunk of its own
		}
		text := strings.Repeat(string(rune('a'+rng.IntN(26))), n)
		want[id] = text
		return &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"text": text}}
	}
	for step := range 6000 {
		k := rng.IntN(400)
		id := a2a.TaskID(fmt.Sprintf("task-%d-", k))
		id += a2a.TaskID(strings.Repeat("x", max(0, []int{0, idInline, idInline + 1, 3 * idInline}[k%4]-len(id))))
		_, exists := want[id]
		var err error
		switch {
		case !exists:
			_, err = s.Create(ctx, task(id))
		case rng.IntN(8) == 0:
			err = s.Delete(ctx, id)
			delete(want, id)
		default:
			_, err = s.Replace(ctx, task(id), 0)
		}
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if step%50 == 0 || step > 5990 {
			checkSlabBound(t, s, want)
		}
	}
	for id := range want {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		delete(want, id)
	}
	checkSlabBound(t, s, want)
	if n := len(s.mu.slots.data.chunks) - len(s.mu.slots.data.spare); n > 1 {
		t.Errorf("an emptied store keeps %d chunks, want at most the open one", n)
	}
}

// checkSlabBound checks s's invariants, that every task of want reads
// back, and the slab's size against its live records.
func checkSlabBound(t *testing.T, s *Store, want map[a2a.TaskID]string) {
	t.Helper()
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	for id, text := range want {
		rec, err := s.Get(context.Background(), id)
		if err != nil || rec.Task.Metadata["text"] != text {
			t.Fatalf("task %s does not read back as written: %v", id, err)
		}
	}
	listed := map[a2a.TaskID]bool{}
	req := &engine.ListRequest{PageSize: 50}
	for {
		resp, err := s.List(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range resp.Tasks {
			if _, ok := want[task.ID]; !ok || listed[task.ID] {
				t.Fatalf("a page lists task %q, which is not in the store or listed before", task.ID)
			}
			listed[task.ID] = true
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	if len(listed) != len(want) {
		t.Fatalf("pages list %d tasks, the store holds %d", len(listed), len(want))
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	checkChunksBound(t, &s.mu.slots.data)
}

// checkChunksBound checks d's size against its live bytes: its closed
// chunks hold at most twice them, plus two chunks.
// REQUIRES: the store's lock held.
func checkChunksBound(t *testing.T, d *slab) {
	t.Helper()
	small, smallLive, large := 0, 0, 0
	for i, c := range d.chunks {
		switch {
		case c == nil:
		case len(c.buf) != chunkBytes:
			large += len(c.buf)
		case uint32(i+1) != d.open:
			small += len(c.buf)
			smallLive += c.live
		}
	}
	if small > 2*smallLive+2*chunkBytes {
		t.Errorf("closed chunks hold %d bytes for %d live", small, smallLive)
	}
	if large+small+chunkBytes < d.bytes {
		t.Errorf("slab counts %d bytes, its chunks hold %d", d.bytes, large+small)
	}
}

// RemoveExpired keeps the cursors of its scan past the shared lock (it
// takes the write lock to remove): they must be copies, not views of the
// slab. Between the scan and the removals (retainScanned) every task is
// replaced twice, so that the scanned records' chunks are dropped and
// their buffers reused (and poisoned here); the resume cursor must still
// name the last task examined.
func TestRetainCursorOutlivesItsChunk(t *testing.T) {
	ctx := context.Background()
	now := int64(0)
	s := New(Options{Clock: func() int64 { now += 10; return now }})
	ids := make([]a2a.TaskID, 2000)
	body := strings.Repeat("b", 1000)
	for i := range ids {
		ids[i] = a2a.TaskID(fmt.Sprintf("task-%04d", i))
		if _, err := s.Create(ctx, &a2a.Task{ID: ids[i], ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
			Metadata: map[string]any{"b": body}}); err != nil {
			t.Fatal(err)
		}
	}
	reused := 0
	reusingBuf = func(b []byte) {
		reused++
		for i := range b {
			b[i] = 0xee
		}
	}
	retainScanned = func() {
		for range 2 {
			for _, id := range ids {
				if _, err := s.Replace(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
					Metadata: map[string]any{"b": body}}, 0); err != nil {
					t.Error(err)
				}
			}
		}
	}
	defer func() { reusingBuf, retainScanned = nil, nil }()
	res, err := s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: math.MaxInt64, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if reused == 0 {
		t.Fatal("setup: no chunk buffer was reused between the scan and the removals")
	}
	if res.Next == nil || res.Next.ID != ids[9] {
		t.Fatalf("resume cursor %+v, want task %s (the tenth oldest)", res.Next, ids[9])
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Readers copy what they return out of the slab before they let go of
// the lock: a writer replacing tasks meanwhile compacts chunks and
// reuses their buffers. Every task read must carry its own metadata (a
// view read after the lock would show another task's bytes, and the race
// detector the write over them).
func TestReadsUnderChurnCopyUnderTheLock(t *testing.T) {
	ctx := context.Background()
	s := New(Options{})
	task := func(id a2a.TaskID, n int) *a2a.Task {
		return &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"id": string(id), "pad": strings.Repeat("p", n)},
			History:  []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(string(id)))}}
	}
	ids := make([]a2a.TaskID, 300)
	for i := range ids {
		ids[i] = a2a.TaskID(fmt.Sprintf("task-%03d", i))
		if _, err := s.Create(ctx, task(ids[i], 2000)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(tk *a2a.Task) {
		if tk.Metadata["id"] != string(tk.ID) {
			t.Errorf("task %q read with the metadata of %q", tk.ID, tk.Metadata["id"])
		}
	}
	var wg sync.WaitGroup
	for _, proj := range []engine.Projection{engine.ProjectionLight, engine.ProjectionFull} {
		wg.Go(func() {
			for i := range 300 {
				resp, err := s.List(ctx, &engine.ListRequest{PageSize: 50, Projection: proj})
				if err != nil {
					t.Error(err)
					return
				}
				for _, tk := range resp.Tasks {
					check(tk)
				}
				rec, err := s.Get(ctx, ids[i%len(ids)])
				if err != nil {
					t.Error(err)
					return
				}
				check(rec.Task)
			}
		})
	}
	for i := range 6000 {
		if _, err := s.Replace(ctx, task(ids[i%len(ids)], 1000+i%2000), 0); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A chunk that falls under half live while it is open (its tasks are
// replaced as it fills, as a task's turns are) is compacted once it is
// closed, though no record of it is freed after: A2A tasks go quiet once
// they end. CheckInvariants fails on a closed chunk under half live.
func TestSlabCompactsChunkClosedUnderHalf(t *testing.T) {
	ctx := context.Background()
	s := New(Options{})
	task := func(id string) *a2a.Task {
		return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"b": strings.Repeat("b", 1000)}}
	}
	// One task replaced 150 times: its old records die in the open
	// chunk, which a frees there does not compact.
	if _, err := s.Create(ctx, task("busy")); err != nil {
		t.Fatal(err)
	}
	for range 150 {
		if _, err := s.Replace(ctx, task("busy"), 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1000 { // then others, never touched again
		if _, err := s.Create(ctx, task(fmt.Sprintf("quiet-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// CheckInvariants reports a record that is not in the slab (a chunk past
// the end, a dropped chunk, past what its chunk holds) and does not panic
// on it.
func TestCheckReportsRecordOutsideTheSlab(t *testing.T) {
	for _, damage := range []func(*Store, *entry){
		func(_ *Store, e *entry) { e.rec.chunk = 99 },
		func(s *Store, e *entry) {
			s.mu.slots.data.chunks = append(s.mu.slots.data.chunks, nil)
			e.rec.chunk = uint32(len(s.mu.slots.data.chunks))
		},
		func(_ *Store, e *entry) { e.rec.off = chunkBytes - 2 },
	} {
		for _, s := range []*Store{New(Options{Log: true}), NewColliding(Options{Log: true}, 1)} { // y beside the hash map
			for _, id := range []a2a.TaskID{"x", "y"} {
				if _, err := s.Create(context.Background(), &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
					t.Fatal(err)
				}
			}
			damage(s, s.entryOf("x"))
			damage(s, s.entryOf("y"))
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("CheckInvariants panicked: %v", p)
					}
				}()
				if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), "not in the slab") && !strings.Contains(err.Error(), "holds no task") {
					t.Errorf("CheckInvariants = %v", err)
				}
			}()
		}
	}
}
