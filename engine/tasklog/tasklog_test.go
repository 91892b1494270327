package tasklog

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
)

// manualClock is a store clock the test moves (µs).
type manualClock struct{ now atomic.Int64 }

func (c *manualClock) Now() int64      { return c.now.Load() }
func (c *manualClock) Advance(d int64) { c.now.Add(d) }

func newStore(t *testing.T) (*memstore.Store, *manualClock) {
	clock := &manualClock{}
	clock.now.Store(1_700_000_000_000_000)
	s := memstore.New(memstore.Options{Clock: clock.Now, Log: true})
	t.Cleanup(func() { s.Close() })
	return s, clock
}

func working(id a2a.TaskID) *a2a.Task {
	return &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
}

// TestTailWaits: a tail on a task not yet created gets its entries in
// order as they are written, waking on the store's commits.
func TestTailWaits(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	tail := NewTail(s, "t1", 0, time.Hour) // the poll never fires: only wake-ups move it
	defer tail.Close()
	idle := make(chan struct{})
	tail.onIdle = func() { idle <- struct{}{} }
	got := make(chan engine.LogEntry)
	errc := make(chan error, 1)
	go func() {
		for range 3 {
			l, err := tail.Next(ctx)
			if err != nil {
				errc <- err
				return
			}
			got <- l
		}
	}()
	<-idle // nothing stored: it waits
	if _, err := s.Create(ctx, working("t1")); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l.Revision != 1 || l.Kind != engine.LogTask {
		t.Fatalf("first entry: revision %d kind %d", l.Revision, l.Kind)
	}
	<-idle
	if _, err := s.AppendHistory(ctx, "t1", &a2a.Message{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	for want := int64(2); want <= 3; want++ {
		select {
		case l := <-got:
			if l.Revision != want {
				t.Fatalf("entry %d, want %d", l.Revision, want)
			}
		case err := <-errc:
			t.Fatal(err)
		}
	}
}

// TestTailGone: once the task existed, its deletion ends the tail.
func TestTailGone(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, working("t2")); err != nil {
		t.Fatal(err)
	}
	tail := NewTail(s, "t2", 1, time.Hour)
	defer tail.Close()
	idle := make(chan struct{}, 1)
	tail.onIdle = func() { idle <- struct{}{} }
	errc := make(chan error, 1)
	go func() { _, err := tail.Next(ctx); errc <- err }()
	<-idle
	if err := s.Delete(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrGone) {
		t.Fatalf("Next after Delete: %v, want ErrGone", err)
	}
}

// TestTailGoneBeforeWatch: a task deleted after its revision was read but
// before the Tail began to watch it (a subscriber between its first read
// and its tail) ends the tail without a wait: no wake-up will come.
func TestTailGoneBeforeWatch(t *testing.T) {
	s, _ := newStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := s.Create(ctx, working("t3")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t3"); err != nil {
		t.Fatal(err)
	}
	tail := NewTail(s, "t3", 1, time.Hour)
	defer tail.Close()
	waited := false
	tail.onIdle = func() { waited = true; cancel() }
	if _, err := tail.Next(ctx); waited || !errors.Is(err, ErrGone) {
		t.Fatalf("Next on a task deleted before the watch: %v (waited: %v), want ErrGone at once", err, waited)
	}
}

// TestTailTrimmed: entries trimmed away below the task's revision make
// the tail return the task itself at its revision, then go on.
func TestTailTrimmed(t *testing.T) {
	s, clock := newStore(t)
	ctx := context.Background()
	rec, err := s.Create(ctx, working("t3"))
	if err != nil {
		t.Fatal(err)
	}
	tail := NewTail(s, "t3", 0, time.Hour)
	defer tail.Close()
	if l, err := tail.Next(ctx); err != nil || l.Revision != 1 {
		t.Fatalf("first entry %d, %v", l.Revision, err)
	}
	if _, err := s.Replace(ctx, rec.Task, 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(int64(2 * time.Hour / time.Microsecond))
	tr := NewTrimmer(s, time.Hour, func() time.Time { return time.UnixMicro(clock.Now()) }, nil)
	if err := tr.Trim(ctx); err != nil || tr.Trimmed() != 1 {
		t.Fatalf("Trim: %v, trimmed %d; want 1", err, tr.Trimmed())
	}
	rec, err = s.Replace(ctx, rec.Task, 0) // revision 3; 2 is gone
	if err != nil {
		t.Fatal(err)
	}
	l, err := tail.Next(ctx)
	if err != nil || l.Kind != engine.LogTask || l.Revision != rec.Revision {
		t.Fatalf("after a trim: kind %d revision %d, %v; want the task at %d", l.Kind, l.Revision, err, rec.Revision)
	}
	ev, err := l.Event("t3")
	if task, ok := ev.(*a2a.Task); err != nil || !ok || task.ID != "t3" {
		t.Fatalf("the snapshot entry's event: %T, %v", ev, err)
	}
}
