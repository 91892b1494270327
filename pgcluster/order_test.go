package pgcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// versionReader reads r in the background, each result on the channel.
func versionReader(ctx context.Context, r eventqueue.Reader) <-chan int64 {
	out := make(chan int64)
	go func() {
		defer close(out)
		for {
			msg, err := r.Read(ctx)
			if err != nil {
				return
			}
			select {
			case out <- int64(msg.TaskVersion):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// orderFixture is a reader on instance b of events written on instance a.
type orderFixture struct {
	t     *testing.T
	ctx   context.Context
	w     eventqueue.Writer
	held  chan a2a.TaskID
	reads <-chan int64
	b     *instance
}

func newOrderFixture(t *testing.T, gapTimeout time.Duration) *orderFixture {
	h := newHarness(t)
	h.opts.GapTimeout = gapTimeout
	a, b := h.start(t, "a", newGateAgent(0)), h.start(t, "b", newGateAgent(0))
	ctx := t.Context()
	f := &orderFixture{t: t, ctx: ctx, held: make(chan a2a.TaskID, 10), b: b}
	b.cluster.OnHold(func(id a2a.TaskID) { f.held <- id })
	id := a2a.TaskID("t1")
	r, err := b.cluster.QueueManager().CreateReader(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if f.w, err = a.cluster.QueueManager().CreateWriter(ctx, id); err != nil {
		t.Fatal(err)
	}
	f.reads = versionReader(ctx, r)
	return f
}

func (f *orderFixture) write(v int64) {
	f.t.Helper()
	ev := &a2a.TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if err := f.w.Write(f.ctx, &eventqueue.Message{Event: ev, TaskVersion: taskstore.TaskVersion(v)}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *orderFixture) expect(want int64) {
	f.t.Helper()
	select {
	case got := <-f.reads:
		if got != want {
			f.t.Fatalf("reader delivered version %d, want %d", got, want)
		}
	case <-time.After(waitFor):
		f.t.Fatalf("version %d not delivered", want)
	}
}

// expectHold waits until the reader holds an event for a missing version;
// it fails if the reader delivers one instead.
func (f *orderFixture) expectHold() {
	f.t.Helper()
	select {
	case <-f.held:
	case v := <-f.reads:
		f.t.Fatalf("reader delivered version %d across a gap instead of waiting", v)
	case <-time.After(waitFor):
		f.t.Fatal("reader did not hold the event ahead of the gap")
	}
}

// K2: two writers of one task store revisions 5 and 6 in that order but
// insert their events in the reverse order (the execution's event for 5
// commits after a cancel's event for 6). A reader that delivered 4 holds
// 6 until 5 arrives, then delivers 5 and 6: no silent gap. Without the
// hold it delivers 6 first and drops 5 as not increasing.
func TestEventsInsertedOutOfVersionOrder(t *testing.T) {
	f := newOrderFixture(t, time.Hour) // the gap must close by the missing event, not by the timeout
	f.write(4)
	f.expect(4)
	f.write(6) // committed first: the later revision's event
	f.expectHold()
	f.write(5)
	f.expect(5)
	f.expect(6)
	f.write(7)
	f.expect(7)
	if n := f.b.cluster.Stats().GapsSkipped.Load(); n != 0 {
		t.Errorf("GapsSkipped = %d, want 0", n)
	}
}

// A revision without an event (or whose writer died before inserting it)
// holds the reader for GapTimeout only: then it delivers what it has and
// counts the skipped gap; an event for the missing version arriving later
// is dropped, so versions still increase strictly.
func TestEventGapTimeout(t *testing.T) {
	f := newOrderFixture(t, 50*time.Millisecond)
	f.write(1)
	f.expect(1)
	f.write(3)
	f.expectHold()
	f.expect(3)
	if n := f.b.cluster.Stats().GapsSkipped.Load(); n != 1 {
		t.Errorf("GapsSkipped = %d, want 1", n)
	}
	f.write(2) // too late
	f.write(4)
	f.expect(4)
}
