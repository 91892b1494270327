package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/tasklog"
	"github.com/a2astore/a2astore/taskiter"
)

// The K7 clauses run on Harness.OpenLogged's store: every revision has
// exactly one log entry, written with it; ReadLog returns them in order.

// readLog returns every entry of id, failing the test on error.
func (e *env) readLog(t testing.TB, id a2a.TaskID) []engine.LogEntry {
	t.Helper()
	var all []engine.LogEntry
	after := int64(0)
	for {
		got, err := e.l.ReadLog(e.ctx, id, after, 2)
		if err != nil {
			t.Fatalf("ReadLog(%q, %d): %v", string(id), after, err)
		}
		if len(got) == 0 {
			return all
		}
		all = append(all, got...)
		after = got[len(got)-1].Revision
	}
}

// checkLog checks that id's log holds one entry per revision 1..rec's,
// the last at rec's time and state, and returns it.
func (e *env) checkLog(t testing.TB, id a2a.TaskID, rec engine.Record) []engine.LogEntry {
	t.Helper()
	log := e.readLog(t, id)
	if err := logMatches(log, rec); err != nil {
		t.Fatalf("task %q: %v", string(id), err)
	}
	return log
}

// logMatches is checkLog's verdict.
func logMatches(log []engine.LogEntry, rec engine.Record) error {
	if int64(len(log)) != rec.Revision {
		return fmt.Errorf("log of %d entries, revision %d (K7: one entry per revision)", len(log), rec.Revision)
	}
	for i, l := range log {
		if l.Revision != int64(i+1) {
			return fmt.Errorf("entry %d has revision %d", i, l.Revision)
		}
	}
	last := log[len(log)-1]
	if last.Time != rec.Cursor.UpdatedAt || last.State != rec.Task.Status.State {
		return fmt.Errorf("last entry at time %d, state %s; task at %d, %s", last.Time, last.State, rec.Cursor.UpdatedAt, rec.Task.Status.State)
	}
	return nil
}

// event decodes l, failing the test on error.
func event(t testing.TB, id a2a.TaskID, l engine.LogEntry) a2a.Event {
	t.Helper()
	ev, err := l.Event(id)
	if err != nil {
		t.Fatalf("entry %d: Event: %v", l.Revision, err)
	}
	return ev
}

func testLogEntries(t testing.TB, e *env) {
	tk := task("k7-a", "ctx")
	rec := e.mustCreate(t, tk)
	log := e.checkLog(t, tk.ID, rec)
	if got, ok := event(t, tk.ID, log[0]).(*a2a.Task); log[0].Kind != engine.LogTask || !ok || canon(got) != canon(rec.Task) {
		t.Fatalf("Create's entry: kind %d, event %T; want the task as created (LogTask)", log[0].Kind, got)
	}
	next := spec{id: tk.ID, ctx: "ctx", state: a2a.TaskStateCompleted, ts: statusAt(5), history: 3, tag: "v2"}.build()
	rec, err := e.s.Replace(e.ctx, next, rec.Revision)
	if err != nil {
		t.Fatalf("Replace: %v", err)
	}
	log = e.checkLog(t, tk.ID, rec)
	if got, ok := event(t, tk.ID, log[1]).(*a2a.Task); log[1].Kind != engine.LogTask || !ok || canon(got) != canon(rec.Task) {
		t.Fatalf("Replace's entry (no event): kind %d, event %T; want the task as stored (LogTask)", log[1].Kind, got)
	}
	if !log[1].State.Terminal() {
		t.Fatalf("entry of a completed task in state %s", log[1].State)
	}

	other := e.mustCreate(t, task("k7-b", "ctx-b"))
	if _, err := e.s.AppendHistory(e.ctx, "k7-b", newMessage("m-new")); err != nil {
		t.Fatalf("AppendHistory: %v", err)
	}
	rec, err = e.s.Cancel(e.ctx, "k7-b")
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	log = e.checkLog(t, "k7-b", rec)
	if log[1].Kind != engine.LogMessage || event(t, "k7-b", log[1]) != nil {
		t.Fatalf("AppendHistory's entry: kind %d; want LogMessage, no event", log[1].Kind)
	}
	if log[1].State != other.Task.Status.State {
		t.Fatalf("AppendHistory's entry in state %s, task in %s", log[1].State, other.Task.Status.State)
	}
	st, ok := event(t, "k7-b", log[2]).(*a2a.TaskStatusUpdateEvent)
	if !ok || st.Status.State != a2a.TaskStateCanceled || st.ContextID != "ctx-b" || st.TaskID != "k7-b" ||
		st.Status.Timestamp == nil || !st.Status.Timestamp.Equal(*rec.Task.Status.Timestamp) {
		t.Fatalf("Cancel's entry: %#v; want a status update to canceled at the task's status time", event(t, "k7-b", log[2]))
	}
}

func testLogEvents(t testing.TB, e *env) {
	rec := e.mustCreate(t, task("k7-ev", "ctx"))
	tk := rec.Task
	// A status update that describes the write: logged as the event.
	ts := statusAt(9)
	tk.Status = a2a.TaskStatus{State: a2a.TaskStateInputRequired, Timestamp: ts}
	up := &a2a.TaskStatusUpdateEvent{TaskID: tk.ID, ContextID: tk.ContextID, Status: tk.Status}
	rec, err := e.s.Replace(engine.WithEvent(e.ctx, up), tk, rec.Revision)
	if err != nil {
		t.Fatalf("Replace with a status event: %v", err)
	}
	// A message at the end of the history: a history revision.
	msg := newMessage("follow-up")
	tk.History = append(tk.History, msg)
	if rec, err = e.s.Replace(engine.WithEvent(e.ctx, msg), tk, rec.Revision); err != nil {
		t.Fatalf("Replace with a message: %v", err)
	}
	// An event that does not describe the write (a2a-go stores a failed
	// task for an event it could not apply): the task is logged.
	tk.Status = a2a.TaskStatus{State: a2a.TaskStateFailed}
	if rec, err = e.s.Replace(engine.WithEvent(e.ctx, up), tk, rec.Revision); err != nil {
		t.Fatalf("Replace with a stale event: %v", err)
	}
	log := e.checkLog(t, tk.ID, rec)
	if got, ok := event(t, tk.ID, log[1]).(*a2a.TaskStatusUpdateEvent); log[1].Kind != engine.LogEvent || !ok ||
		got.Status.State != a2a.TaskStateInputRequired || !got.Status.Timestamp.Equal(*ts) {
		t.Fatalf("status event entry: kind %d, %#v", log[1].Kind, event(t, tk.ID, log[1]))
	}
	if log[2].Kind != engine.LogMessage || log[2].State != a2a.TaskStateInputRequired {
		t.Fatalf("message entry: kind %d, state %s; want LogMessage in input-required", log[2].Kind, log[2].State)
	}
	if got, ok := event(t, tk.ID, log[3]).(*a2a.Task); log[3].Kind != engine.LogTask || !ok || got.Status.State != a2a.TaskStateFailed {
		t.Fatalf("entry of an event that does not describe the write: kind %d, %T; want the failed task", log[3].Kind, event(t, tk.ID, log[3]))
	}
	p, err := log[1].Payload(tk.ID)
	if err != nil || len(p) == 0 {
		t.Fatalf("Payload of a status entry: %q, %v", p, err)
	}
}

func testLogRejected(t testing.TB, e *env) {
	rec := e.mustCreate(t, spec{id: "k7-rej", ctx: "c", state: a2a.TaskStateCompleted, history: 1, tag: "r"}.build())
	if _, err := e.s.Replace(e.ctx, task("k7-rej", "c"), rec.Revision+5); !errors.Is(err, engine.ErrRevisionConflict) {
		t.Fatalf("conflicting Replace: %v", err)
	}
	if _, err := e.s.Cancel(e.ctx, "k7-rej"); !errors.Is(err, engine.ErrNotCancelable) {
		t.Fatalf("Cancel of a completed task: %v", err)
	}
	if _, err := e.s.AppendHistory(e.ctx, "k7-rej", rec.Task.History[0]); err != nil {
		t.Fatalf("deduplicated AppendHistory: %v", err)
	}
	bad := task("k7-rej", "c")
	bad.Status.State = "no-such-state"
	if _, err := e.s.Replace(e.ctx, bad, 0); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("invalid Replace: %v", err)
	}
	e.checkLog(t, "k7-rej", e.mustGet(t, "k7-rej"))
}

func testLogDelete(t testing.TB, e *env) {
	rec := e.mustCreate(t, task("k7-del", "c"))
	if _, err := e.s.Replace(e.ctx, rec.Task, rec.Revision); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	if err := e.s.Delete(e.ctx, "k7-del"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if log := e.readLog(t, "k7-del"); len(log) != 0 {
		t.Fatalf("log of a deleted task: %d entries", len(log))
	}
	rec = e.mustCreate(t, task("k7-del", "c2"))
	e.checkLog(t, "k7-del", rec) // a new log at revision 1
}

func testLogRead(t testing.TB, e *env) {
	rec := e.mustCreate(t, task("k7-read", "c"))
	for range 4 {
		var err error
		if rec, err = e.s.Replace(e.ctx, rec.Task, 0); err != nil {
			t.Fatalf("Replace: %v", err)
		}
	}
	got, err := e.l.ReadLog(e.ctx, "k7-read", 2, 2)
	if err != nil || len(got) != 2 || got[0].Revision != 3 || got[1].Revision != 4 {
		t.Fatalf("ReadLog(after 2, limit 2) = %d entries, %v; want revisions 3, 4", len(got), err)
	}
	if got, err := e.l.ReadLog(e.ctx, "k7-read", 5, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReadLog after the last revision = %d entries, %v; want none", len(got), err)
	}
	if got, err := e.l.ReadLog(e.ctx, "k7-missing", 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("ReadLog of a missing task = %d entries, %v; want none, no error", len(got), err)
	}
	for _, c := range []struct {
		id    a2a.TaskID
		after int64
		limit int
	}{{"", 0, 1}, {"k7-read", -1, 1}, {"k7-read", 0, 0}, {"k7-read", 0, engine.MaxLogRead + 1}} {
		if _, err := e.l.ReadLog(e.ctx, c.id, c.after, c.limit); !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("ReadLog(%q, %d, %d): %v; want ErrInvalidArgument", string(c.id), c.after, c.limit, err)
		}
	}
}

func testLogWatch(t testing.TB, e *env) {
	wake, stop := e.l.WatchLog("k7-watch")
	defer stop()
	rec := e.mustCreate(t, task("k7-watch", "c"))
	waitWake(t, wake, "Create")
	if _, err := e.s.Replace(e.ctx, rec.Task, 0); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	waitWake(t, wake, "Replace")
	if err := e.s.Delete(e.ctx, "k7-watch"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	waitWake(t, wake, "Delete") // readers of a deleted task learn it ends
}

// waitWake waits for a wake-up after a write: the store's own commit
// sends it, so it comes at once; the bound only turns a missing one into
// a failure instead of a hang.
func waitWake(t testing.TB, wake <-chan struct{}, after string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatalf("no WatchLog wake-up after %s", after)
	}
}

func testLogTrim(t testing.TB, e *env) {
	old := e.mustCreate(t, task("k7-old", "c"))
	e.tick(1000)
	young := e.mustCreate(t, task("k7-young", "c"))
	cutoff := young.Cursor.UpdatedAt // trims tasks idle since before it
	if old.Cursor.UpdatedAt >= cutoff {
		t.Fatalf("the second task's time %d is not after the first's %d", cutoff, old.Cursor.UpdatedAt)
	}
	n, err := e.l.TrimLog(e.ctx, cutoff, 10)
	if err != nil || n != 1 {
		t.Fatalf("TrimLog(before the young task) = %d, %v; want 1 log trimmed", n, err)
	}
	if log := e.readLog(t, "k7-old"); len(log) != 0 {
		t.Fatalf("trimmed log still has %d entries", len(log))
	}
	e.checkLog(t, "k7-young", young)
	// The idle task written again: its log starts at the new revision.
	e.tick(1)
	rec, err := e.s.Replace(e.ctx, old.Task, old.Revision)
	if err != nil {
		t.Fatalf("Replace after trim: %v", err)
	}
	if log := e.readLog(t, "k7-old"); len(log) != 1 || log[0].Revision != rec.Revision {
		t.Fatalf("log after trim and a write: %d entries; want one at revision %d", len(log), rec.Revision)
	}
	if _, err := e.l.TrimLog(e.ctx, cutoff, 0); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Fatalf("TrimLog limit 0: %v; want ErrInvalidArgument", err)
	}
}

// testLogTrimImportedOlder: K7 with X1's Importer. TrimLog goes on from
// the last task it trimmed towards newer ones; a task imported older than
// that (a copy or a bulk load into a live store) must not be passed over
// for good: the next TrimLog whose cutoff it falls before trims its log.
func testLogTrimImportedOlder(t testing.TB, e *env) {
	imp, ok := e.s.(engine.Importer)
	if !ok {
		t.Skip("the store has no Importer")
	}
	old := e.mustCreate(t, task("k7-trimmed", "c"))
	e.tick(1000)
	young := e.mustCreate(t, task("k7-young", "c"))
	cutoff := young.Cursor.UpdatedAt
	if n, err := e.l.TrimLog(e.ctx, cutoff, 10); err != nil || n != 1 {
		t.Fatalf("TrimLog(before the young task) = %d, %v; want 1 log trimmed", n, err)
	}
	tk := task("k7-imported", "c")
	entry, err := engine.NewLogEntry(tk, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := old.Cursor.UpdatedAt - 10 // older than where TrimLog goes on
	entry.Revision, entry.Time = 1, at
	st := engine.StoredTask{Record: engine.Record{Task: tk, Revision: 1, Cursor: engine.Cursor{UpdatedAt: at, ID: tk.ID}}, Log: []engine.LogEntry{entry}}
	if err := imp.Import(e.ctx, []engine.StoredTask{st}); err != nil {
		t.Fatalf("Import: %v", err)
	}
	if log := e.readLog(t, "k7-imported"); len(log) != 1 {
		t.Fatalf("imported log: %d entries, want 1", len(log))
	}
	if _, err := e.l.TrimLog(e.ctx, cutoff, 10); err != nil {
		t.Fatalf("TrimLog after the import: %v", err)
	}
	if log := e.readLog(t, "k7-imported"); len(log) != 0 {
		t.Fatalf("the log of a task imported older than the last trimmed one was never trimmed: %d entries", len(log))
	}
	e.checkLog(t, "k7-young", young)
}

func testLogRandom(t testing.TB, e *env) {
	testRandom(t, e)
	e.checkAllLogs(t)
}

func testLogConcurrent(t testing.TB, e *env) {
	testConcurrent(t, e)
	e.checkAllLogs(t)
}

// checkAllLogs checks the log of every stored task (K7).
func (e *env) checkAllLogs(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	for tk, err := range taskiter.FromStore(ctx, e.s, engine.ListRequest{PageSize: 100}) {
		if err != nil {
			t.Fatalf("listing every task: %v", err)
		}
		if err := logMatches(e.readLog(t, tk.ID), e.mustGet(t, tk.ID)); err != nil {
			t.Errorf("task %q: %v", string(tk.ID), err)
		}
	}
}

// tailWait bounds how long a tail clause waits for an entry the store
// already holds: a reader that answers at all answers at once; one that
// waits this long would wait for ever.
const tailWait = 10 * time.Second

// tailNext is the next entry of tail, a reader's way (tasklog.Tail, as
// subscribers and cluster mode read): history revisions (LogMessage)
// passed over. It fails t when the tail waits out tailWait.
func (e *env) tailNext(t testing.TB, tail *tasklog.Tail, what string) (engine.LogEntry, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, tailWait)
	defer cancel()
	for {
		l, err := tail.Next(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: the reader still waits after %v (at revision %d)", what, tailWait, tail.After())
		}
		if err != nil || l.Kind != engine.LogMessage {
			return l, err
		}
	}
}

// K7: a reader whose whole remaining log was trimmed (it lagged by the
// log retention behind a task that then sat idle) starts again from the
// task: it gets the task at its revision, and ends there when the task
// is final, instead of waiting for entries that will never come.
func testLogTailTrimmedAll(t testing.TB, e *env) {
	rec := e.mustCreate(t, task("k7-lag", "c"))
	tail := tasklog.NewTail(e.l, "k7-lag", rec.Revision, time.Hour) // a subscriber that read revision 1
	defer tail.Close()
	tk := rec.Task
	tk.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: statusAt(3)}
	rec, err := e.s.Replace(e.ctx, tk, rec.Revision)
	if err != nil {
		t.Fatalf("Replace: %v", err)
	}
	e.tick(1000)
	young := e.mustCreate(t, task("k7-lag-young", "c"))
	if n, err := e.l.TrimLog(e.ctx, young.Cursor.UpdatedAt, 10); err != nil || n != 1 {
		t.Fatalf("TrimLog(before the young task) = %d, %v; want the lagging task's log trimmed", n, err)
	}
	if log := e.readLog(t, "k7-lag"); len(log) != 0 {
		t.Fatalf("trimmed log still has %d entries", len(log))
	}
	l, err := e.tailNext(t, tail, "a reader after its task's whole remaining log was trimmed")
	if err != nil || l.Kind != engine.LogTask || l.Revision != rec.Revision || l.State != a2a.TaskStateCompleted {
		t.Fatalf("reader after the trim: kind %d, revision %d, state %s, %v; want the completed task at revision %d",
			l.Kind, l.Revision, l.State, err, rec.Revision)
	}
	if got, ok := event(t, "k7-lag", l).(*a2a.Task); !ok || canon(got) != canon(rec.Task) {
		t.Fatalf("the snapshot entry: %T; want the task as stored", event(t, "k7-lag", l))
	}
}

// K7: a reader follows one incarnation of its task. The task deleted and
// created again under its ID while the reader stood on revision 2: a new
// task still at revision 1 ends the reader (it would wait for ever for
// revision 3), and one written past revision 2 does too (its entries
// would be delivered as the old task's events).
func testLogTailIncarnation(t testing.TB, e *env) {
	for _, moves := range []int{0, 2} {
		id := a2a.TaskID(fmt.Sprint("k7-inc-", moves))
		rec := e.mustCreate(t, task(id, "c"))
		if _, err := e.s.Replace(e.ctx, rec.Task, rec.Revision); err != nil {
			t.Fatalf("Replace: %v", err)
		}
		tail := tasklog.NewTail(e.l, id, rec.Revision, time.Hour)
		defer tail.Close()
		if l, err := e.tailNext(t, tail, "a reader of the first task"); err != nil || l.Revision != 2 {
			t.Fatalf("reader of the first task: revision %d, %v; want 2", l.Revision, err)
		}
		if err := e.s.Delete(e.ctx, id); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		e.tick(1000)
		rec = e.mustCreate(t, task(id, "other"))
		for range moves {
			e.tick(1)
			var err error
			if rec, err = e.s.Replace(e.ctx, rec.Task, rec.Revision); err != nil {
				t.Fatalf("Replace of the new task: %v", err)
			}
		}
		l, err := e.tailNext(t, tail, fmt.Sprintf("a reader at revision 2 after its task was created again and written %d times", moves))
		if !errors.Is(err, tasklog.ErrGone) {
			t.Fatalf("reader at revision 2 of a task created again (now at revision %d): entry %d, %v; want tasklog.ErrGone",
				1+moves, l.Revision, err)
		}
	}
}

// K7: a Replace whose event is a message at the end of the history and
// which also moves the task to input-required is a history revision
// (LogMessage) that changed the state: a reader delivers the task then,
// and a subscriber's stream ends there, instead of passing over it and
// waiting for ever.
func testLogTailMessageMoves(t testing.TB, e *env) {
	rec := e.mustCreate(t, task("k7-msg", "c"))
	tail := tasklog.NewTail(e.l, "k7-msg", rec.Revision, time.Hour)
	defer tail.Close()
	tk := rec.Task
	msg := newMessage("agent-asks")
	msg.Role = a2a.MessageRoleAgent
	tk.History = append(tk.History, msg)
	tk.Status = a2a.TaskStatus{State: a2a.TaskStateInputRequired, Timestamp: statusAt(4)}
	rec, err := e.s.Replace(engine.WithEvent(e.ctx, msg), tk, rec.Revision)
	if err != nil {
		t.Fatalf("Replace with a message that moves the task: %v", err)
	}
	if log := e.readLog(t, "k7-msg"); log[len(log)-1].Kind != engine.LogMessage {
		t.Fatalf("the write's entry is of kind %d: the clause does not reach a history revision that moves the task", log[len(log)-1].Kind)
	}
	l, err := e.tailNext(t, tail, "a reader after a message that moved the task to input-required")
	if err != nil || l.Revision != rec.Revision || l.State != a2a.TaskStateInputRequired || !engine.Final(l.State) {
		t.Fatalf("reader: kind %d, revision %d, state %s, %v; want the task at revision %d, input-required", l.Kind, l.Revision, l.State, err, rec.Revision)
	}
	if got, ok := event(t, "k7-msg", l).(*a2a.Task); !ok || got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("the delivered event: %T; want the task in input-required", event(t, "k7-msg", l))
	}
}

// K7: a reader that started before its task existed (tasklog.Tail at
// revision 0, Start) tells a task created and deleted before its first
// read from one not created yet: the store remembers the deletion
// (LogStore.Deleted) and the reader ends (ErrGone) instead of waiting for
// ever; so it does when the ID holds another task by its first read. A
// deletion made before the reader started does not end it: it waits for
// the task, and follows it once created. The mark of a deletion differs
// from the ID's earlier one, a task created again does not erase it,
// retention marks its removals too, and TrimLog forgets marks older than
// its cutoff.
func testLogTailDeletedUnseen(t testing.TB, e *env) {
	mark := func(id a2a.TaskID) int64 {
		t.Helper()
		m, err := e.l.Deleted(e.ctx, id)
		if err != nil {
			t.Fatalf("Deleted(%q): %v", string(id), err)
		}
		return m
	}
	started := func(id a2a.TaskID) *tasklog.Tail {
		t.Helper()
		tail := tasklog.NewTail(e.l, id, 0, time.Hour)
		if err := tail.Start(e.ctx); err != nil {
			t.Fatalf("Start: %v", err)
		}
		return tail
	}
	if m := mark("k7-unseen"); m != 0 {
		t.Fatalf("Deleted of a task never stored: %d, want 0", m)
	}

	// Created and deleted between the reader's start and its first read.
	tail := started("k7-unseen")
	defer tail.Close()
	rec := e.mustCreate(t, task("k7-unseen", "c"))
	if err := e.s.Delete(e.ctx, "k7-unseen"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	first := mark("k7-unseen")
	if first <= rec.Cursor.UpdatedAt {
		t.Fatalf("deletion mark %d not after the task's last time %d", first, rec.Cursor.UpdatedAt)
	}
	if l, err := e.tailNext(t, tail, "a reader whose task was created and deleted before its first read"); !errors.Is(err, tasklog.ErrGone) {
		t.Fatalf("reader of a task created and deleted before its first read: entry %d, %v; want tasklog.ErrGone", l.Revision, err)
	}

	// A deletion before the reader started: it waits, then follows the
	// task created next.
	tail2 := started("k7-unseen")
	defer tail2.Close()
	if l, ok, err := tail2.TryNext(e.ctx); ok || err != nil {
		t.Fatalf("reader of a task deleted before it started: entry %d, %v, %v; want nothing yet", l.Revision, ok, err)
	}
	rec = e.mustCreate(t, task("k7-unseen", "again"))
	if m := mark("k7-unseen"); m != first {
		t.Fatalf("a task created again changed the deletion mark: %d, want %d", m, first)
	}
	if l, err := e.tailNext(t, tail2, "a reader of a task created after it started"); err != nil || l.Revision != 1 {
		t.Fatalf("reader of a task created after it started: revision %d, %v; want 1", l.Revision, err)
	}

	// Deleted and created again before the first read: the incarnation
	// the reader waited for is gone.
	tail3 := started("k7-unseen-2")
	defer tail3.Close()
	e.mustCreate(t, task("k7-unseen-2", "c"))
	if err := e.s.Delete(e.ctx, "k7-unseen-2"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	e.mustCreate(t, task("k7-unseen-2", "other"))
	if l, err := e.tailNext(t, tail3, "a reader whose task was created, deleted and created again before its first read"); !errors.Is(err, tasklog.ErrGone) {
		t.Fatalf("reader of a task created, deleted and created again before its first read: entry %d, %v; want tasklog.ErrGone", l.Revision, err)
	}

	// A second deletion of the ID gets a new mark.
	if err := e.s.Delete(e.ctx, "k7-unseen"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	second := mark("k7-unseen")
	if second <= first {
		t.Fatalf("second deletion mark %d not after the first %d", second, first)
	}

	// Retention's removals are deletions too.
	if r, ok := e.s.(engine.Retainer); ok {
		tk := task("k7-unseen-retained", "c")
		tk.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted}
		e.mustCreate(t, tk)
		res, err := r.RemoveExpired(e.ctx, engine.RetainRequest{TerminalBefore: math.MaxInt64, Limit: 100})
		if err != nil || res.Removed == 0 {
			t.Fatalf("RemoveExpired: %+v, %v; want the completed task removed", res, err)
		}
		if mark("k7-unseen-retained") == 0 {
			t.Fatal("a task removed by retention left no deletion mark")
		}
	}

	// TrimLog forgets the marks before its cutoff, counting them.
	if _, err := e.l.TrimLog(e.ctx, second+1, engine.MaxRetainLimit); err != nil {
		t.Fatalf("TrimLog: %v", err)
	}
	if m := mark("k7-unseen"); m != 0 {
		t.Fatalf("deletion mark %d kept past TrimLog's cutoff %d", m, second+1)
	}
}

// H2: each logged write (Create, Replace, AppendHistory, Cancel) made
// under a sampled span keeps a traceparent of that span's trace with its
// entry (LogEntry.Trace: the write's span, or a decorator's child of it);
// under no span, or an unsampled one, the entry keeps none.
func testLogTrace(t testing.TB, e *env) {
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	under := func(sid byte, flags trace.TraceFlags) context.Context {
		return trace.ContextWithSpanContext(e.ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: trace.SpanID{7: sid}, TraceFlags: flags}))
	}
	tk := task("h2-trace", "ctx")
	rec, err := e.s.Create(under(1, trace.FlagsSampled), tk)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err = e.s.Replace(under(2, 0), tk, rec.Revision); err != nil { // unsampled
		t.Fatal(err)
	}
	if rec, err = e.s.Replace(e.ctx, tk, rec.Revision); err != nil { // no span
		t.Fatal(err)
	}
	if _, err = e.s.AppendHistory(under(4, trace.FlagsSampled), tk.ID, newMessage("m-h2")); err != nil {
		t.Fatal(err)
	}
	if rec, err = e.s.Cancel(under(5, trace.FlagsSampled), tk.ID); err != nil {
		t.Fatal(err)
	}
	log := e.checkLog(t, tk.ID, rec)
	for i, traced := range []bool{true, false, false, true, true} {
		l := log[i]
		sc, ok := engine.ParseTraceParent(l.Trace)
		switch {
		case traced && (!ok || sc.TraceID() != tid || !sc.IsSampled()):
			t.Errorf("entry %d: trace %q, want a sampled traceparent of trace %s", l.Revision, l.Trace, tid)
		case !traced && l.Trace != "":
			t.Errorf("entry %d: trace %q, want none (no sampled span)", l.Revision, l.Trace)
		}
	}
}
