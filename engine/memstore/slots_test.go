package memstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// A task deleted and created again under its ID between a modify's read
// and its write takes the freed slot back at revision 1: the modify must
// start over on the new task, not write the old one's edit over it.
func TestModifyStartsOverWhenSlotReused(t *testing.T) {
	s := New(Options{})
	ctx := context.Background()
	working := &a2a.Task{ID: "x", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if _, err := s.Create(ctx, working); err != nil {
		t.Fatal(err)
	}
	slot := s.entryOf("x").slot
	modifyEdited = func() {
		modifyEdited = nil
		if err := s.Delete(ctx, "x"); err != nil {
			t.Error(err)
		}
		done := &a2a.Task{ID: "x", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
		if _, err := s.Create(ctx, done); err != nil {
			t.Error(err)
		}
	}
	defer func() { modifyEdited = nil }()
	_, err := s.Cancel(ctx, "x")
	if got := s.entryOf("x").slot; got != slot {
		t.Fatalf("setup: the new task is in slot %d, not the freed %d", got, slot)
	}
	if !errors.Is(err, engine.ErrNotCancelable) {
		t.Errorf("Cancel of a task completed meanwhile: %v, want ErrNotCancelable", err)
	}
	if rec, err := s.Get(ctx, "x"); err != nil || rec.Task.Status.State != a2a.TaskStateCompleted || rec.Revision != 1 {
		t.Errorf("x after the cancel: %+v %v, want completed at revision 1", rec, err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

// A due task deleted between a retention batch's scan and its removals,
// its slot taken by a new task at the same time: the batch must not
// remove the new task, which it never examined.
func TestRetainSkipsTaskInReusedSlot(t *testing.T) {
	s := New(Options{Clock: func() int64 { return 1000 }})
	ctx := context.Background()
	done := func(id a2a.TaskID) *a2a.Task {
		return &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	}
	if _, err := s.Create(ctx, done("old")); err != nil {
		t.Fatal(err)
	}
	slot := s.entryOf("old").slot
	retainScanned = func() {
		if err := s.Delete(ctx, "old"); err != nil {
			t.Error(err)
		}
		if _, err := s.Create(ctx, done("new")); err != nil {
			t.Error(err)
		}
	}
	defer func() { retainScanned = nil }()
	res, err := s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: 2000, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s.mu.ids.get(&s.mu.slots, "new"); !ok || got != slot {
		t.Fatalf("new is in slot %d (%v), not the freed %d", got, ok, slot)
	}
	if res.Removed != 0 {
		t.Errorf("removed %d; want 0 (old was deleted meanwhile, new never examined)", res.Removed)
	}
	if _, err := s.Get(ctx, "new"); err != nil {
		t.Errorf("new: %v", err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

// More readers than probes page at once (each seek holds a probe), beside
// a writer: every page comes back, and each traversal sees every task
// the writer leaves alone exactly once.
func TestSeeksBeyondProbes(t *testing.T) {
	s := New(Options{})
	ctx := context.Background()
	const n = 300
	for i := range n {
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%03d", i)), ContextID: fmt.Sprintf("c%d", i%2), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		if _, err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() { // rewrites t000..t009 until the readers are done
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%03d", i%10)), ContextID: "c0", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
			if _, err := s.Replace(ctx, task, 0); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var readers sync.WaitGroup
	for r := range 3 * numProbes {
		readers.Go(func() {
			req := &engine.ListRequest{PageSize: 7}
			if r%2 == 1 {
				req.ContextID = "c1" // the context index: its own seeks
			}
			seen := map[a2a.TaskID]int{}
			for {
				resp, err := s.List(ctx, req)
				if err != nil {
					t.Error(err)
					return
				}
				for _, task := range resp.Tasks {
					seen[task.ID]++
				}
				if resp.NextPageToken == "" {
					break
				}
				req.PageToken = resp.NextPageToken
			}
			for i := 10; i < n; i++ {
				if r%2 == 1 && i%2 == 0 {
					continue // in c0
				}
				if id := a2a.TaskID(fmt.Sprintf("t%03d", i)); seen[id] != 1 {
					t.Errorf("reader %d saw %s %d times, want once", r, id, seen[id])
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	writer.Wait()
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

// inSlab reports whether s's bytes lie in a chunk of t's slab: a string
// that does keeps the whole chunk alive.
func inSlab(s string, t *slots) bool {
	if s == "" {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	bufs := slices.Clone(t.data.bufs) // and the dropped chunks' kept for reuse
	for _, c := range t.data.chunks {
		if c != nil {
			bufs = append(bufs, c.buf)
		}
	}
	for _, b := range bufs {
		if lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))); p >= lo && p < lo+uintptr(len(b)) {
			return true
		}
	}
	return false
}

// inEntries reports whether s's bytes lie in a chunk of t's entries: a
// view of an ID its entry holds, cleared when the task goes and written
// over when its slot is reused.
func inEntries(s string, t *slots) bool {
	if s == "" {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	for _, c := range t.chunks {
		if lo := uintptr(unsafe.Pointer(c)); p >= lo && p < lo+unsafe.Sizeof(*c) {
			return true
		}
	}
	return false
}

// No ID or cursor the store gives out or keeps beside its entries is a
// view of the store's memory: of the slab, it would keep a whole chunk of
// other tasks' data alive after the task is replaced or gone (a caller
// keeping the IDs of a page would keep a chunk for each); of an entry, it
// would change when the slot is reused. Checked on every path that gives
// out an ID, with IDs the entry holds (1 and idInline bytes) and one the
// record holds (idInline+1).
func TestIDsGivenOutOwnTheirBytes(t *testing.T) {
	for _, n := range []int{1, idInline, idInline + 1} {
		t.Run(fmt.Sprintf("id=%dB", n), func(t *testing.T) { testIDsGivenOut(t, n) })
	}
}

func testIDsGivenOut(t *testing.T, n int) {
	ctx := context.Background()
	s := NewColliding(Options{Log: true}, 1) // every ID but the first kept beside the hash map
	id := func(c string) a2a.TaskID { return a2a.TaskID(strings.Repeat(c, n)) }
	task := func(id a2a.TaskID, st a2a.TaskState) *a2a.Task {
		return &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: st}, Metadata: map[string]any{"k": "a value"},
			History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("body"))}}
	}
	// A decoded body's strings are not slices of the slab either.
	checkBody := func(what string, tk *a2a.Task) {
		t.Helper()
		if v, _ := tk.Metadata["k"].(string); v != "a value" || inSlab(v, &s.mu.slots) {
			t.Errorf("%s: metadata value %q is a slice of the slab, or not the value stored", what, v)
		}
	}
	check := func(what string, id a2a.TaskID) {
		t.Helper()
		if inSlab(string(id), &s.mu.slots) || inEntries(string(id), &s.mu.slots) {
			t.Errorf("%s: %q is a view of the store's memory", what, id)
		}
	}
	for _, c := range []string{"a", "b"} {
		rec, err := s.Create(ctx, task(id(c), a2a.TaskStateCompleted))
		if err != nil {
			t.Fatal(err)
		}
		check("Create's task", rec.Task.ID)
		check("Create's cursor", rec.Cursor.ID)
	}
	if len(s.mu.ids.more) != 1 {
		t.Fatalf("setup: %d IDs beside the hash map, want b", len(s.mu.ids.more))
	}
	for id := range s.mu.ids.more {
		check("the ID map's side key", id)
	}
	rec, err := s.Replace(ctx, task(id("b"), a2a.TaskStateCompleted), 0)
	if err != nil {
		t.Fatal(err)
	}
	check("Replace's task", rec.Task.ID)
	check("Replace's cursor", rec.Cursor.ID)
	if rec, err = s.Get(ctx, id("a")); err != nil {
		t.Fatal(err)
	}
	check("Get's task", rec.Task.ID)
	checkBody("Get's task", rec.Task)
	check("Get's cursor", rec.Cursor.ID)
	exported, err := s.Export(ctx, nil, 10)
	if err != nil || len(exported) != 2 {
		t.Fatalf("Export: %d tasks, %v", len(exported), err)
	}
	for _, st := range exported {
		check("Export's task", st.Task.ID)
		check("Export's cursor", st.Cursor.ID)
	}
	tail, err := s.Tail(ctx, 10)
	if err != nil || len(tail) == 0 {
		t.Fatalf("Tail: %d cursors, %v", len(tail), err)
	}
	for _, c := range tail {
		check("Tail's cursor", c.ID)
	}
	for _, proj := range []engine.Projection{engine.ProjectionLight, engine.ProjectionFull} {
		resp, err := s.List(ctx, &engine.ListRequest{PageSize: 1, Projection: proj})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range resp.Tasks {
			check("a page's task", tk.ID)
			checkBody("a page's task", tk)
		}
		for _, c := range resp.TaskCursors {
			check("a page's cursor", c.ID)
		}
	}
	if n, err := s.TrimLog(ctx, math.MaxInt64, 1); err != nil || n != 1 {
		t.Fatalf("TrimLog: %d, %v", n, err)
	}
	check("TrimLog's resume point", s.mu.trimmed.ID)
	res, err := s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: 1, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Next == nil && res.OldestTerminal == nil {
		t.Fatalf("RemoveExpired gave no cursor: %+v", res)
	}
	for _, c := range []*engine.Cursor{res.Next, res.OldestTerminal} {
		if c != nil {
			check("RemoveExpired's cursor", c.ID)
		}
	}
	if err := s.Delete(ctx, id("b")); err != nil {
		t.Fatal(err)
	}
	if len(s.mu.deleted) == 0 {
		t.Fatal("no deletion mark after a Delete with the log on")
	}
	for id := range s.mu.deleted {
		check("a deletion mark's key", id)
	}
}

// A seek that panics (here on a damaged index: an item whose slot is past
// the chunks) still gives its probe back; lost probes would in the end
// leave every seek waiting.
func TestProbeGivenBackOnPanic(t *testing.T) {
	s := New(Options{})
	ctx := context.Background()
	if _, err := s.Create(ctx, &a2a.Task{ID: "x", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}); err != nil {
		t.Fatal(err)
	}
	s.mu.order.Set(itemAt(12345, 5*slotChunk))
	func() {
		defer func() {
			if recover() == nil {
				t.Error("RemoveExpired over a damaged index did not panic")
			}
		}()
		_, _ = s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: 1 << 62, Limit: 10, After: &engine.Cursor{UpdatedAt: 12345, ID: "zz"}})
	}()
	if n := len(s.probes.free); n != numProbes {
		t.Errorf("after a panic in RemoveExpired's seek %d probes are free, want %d", n, numProbes)
	}
	if !s.mu.TryLock() {
		t.Fatal("after a panic in RemoveExpired's seek the store's lock is still held")
	}
	s.mu.Unlock()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("List over a damaged index did not panic")
			}
		}()
		_, _ = s.List(ctx, &engine.ListRequest{PageSize: 5, PageToken: engine.EncodeToken(engine.Cursor{UpdatedAt: 12345, ID: "zz"})})
	}()
	if !s.mu.TryLock() {
		t.Fatal("after a panic in List's seek the store's lock is still held")
	}
	s.mu.Unlock()
}

// CheckInvariants reports damage rather than panicking on it: a stored
// task with a log whose ID map entry names a slot past the chunks; a
// freed slot that is not cleared.
func TestCheckReportsDamagedSlots(t *testing.T) {
	ctx := context.Background()
	s := New(Options{Log: true})
	for _, id := range []a2a.TaskID{"x", "y"} {
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
	freed := s.entryOf("y")
	if err := s.Delete(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("intact store: %v", err)
	}
	freed.rec = ref{chunk: 1, id: 1}
	if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), "not cleared") {
		t.Errorf("a freed slot with a body: CheckInvariants = %v", err)
	}
	freed.rec = ref{}
	s.mu.ids.byHash[s.mu.ids.hash("x")] = 5 * slotChunk
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("CheckInvariants panicked: %v", p)
			}
		}()
		if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), "never handed out") {
			t.Errorf("a slot past the chunks: CheckInvariants = %v", err)
		}
	}()
}

// The stored ID is the store's own copy: a caller's ID that is a slice of
// a larger buffer (a request's bytes) does not keep that buffer alive.
func TestStoredIDIsACopy(t *testing.T) {
	s := New(Options{})
	buf := strings.Repeat("x", 1<<16) + "task-1"
	id := a2a.TaskID(buf[len(buf)-6:])
	if _, err := s.Create(context.Background(), &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(string(s.mu.slots.id(s.entryOf("task-1")))) == unsafe.StringData(string(id)) {
		t.Error("the stored ID is the caller's string, a slice of its 64 KiB buffer")
	}
	ctxID, owner := buf[len(buf)-8:len(buf)-6], buf[len(buf)-10:len(buf)-8]
	if _, err := s.CreateOwned(context.Background(), &a2a.Task{ID: "task-2", ContextID: ctxID, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, owner); err != nil {
		t.Fatal(err)
	}
	e := s.entryOf("task-2")
	if unsafe.StringData(s.mu.contexts.names[e.ctx]) == unsafe.StringData(ctxID) {
		t.Error("the interned context ID is the caller's string")
	}
	if unsafe.StringData(s.mu.owners.names[e.owner]) == unsafe.StringData(owner) {
		t.Error("the interned owner is the caller's string")
	}
}
