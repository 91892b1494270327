package tasklog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// DefaultPoll is the safety-net poll of a Tail: how long it waits without a
// wake-up before it reads the log again (a wake-up from another process
// can be lost).
const DefaultPoll = 10 * time.Second

// readBatch is how many entries a Tail reads at once.
const readBatch = 100

// Tail follows the log of one task from a revision on: Next returns its
// entries in revision order, each once, waiting for the next. Entries
// written after the Tail was made are never missed: it watches the task
// before its first read; nor is a deletion made before it (Next looks
// before it first waits). A Tail is not safe for concurrent use.
//
// A Tail follows one incarnation of its task (K7: a task deleted and
// created again under its ID starts a new log at revision 1). It knows
// the time and state of the entry at the revision it stands on — from
// the entry it returned last, or, at the start, from the log's entry at
// that revision (it reads one entry below its position) — and takes a
// log whose entry there has another time, or a task now at a lower
// revision, or at that revision with another time, for another
// incarnation: the task it followed is gone (ErrGone). One case stays
// out of its sight: the task deleted, created again, written past the
// Tail's revision and its log trimmed at that revision, all while the
// Tail did not read (a subscriber lagging by the log retention); it then
// returns the new task as a snapshot.
//
// A Tail at revision 0 waits for its task to be created. It tells a task
// created and deleted before its first read from one not created yet by
// the store's mark of the task's last deletion (engine.LogStore.Deleted):
// Start reads it, and a new mark later — while the task is missing, or
// when its first entry is read — means the incarnation it waited for came
// and went (ErrGone), even if the ID holds another task by then. That
// sight, too, lasts the log retention (the store forgets older marks).
type Tail struct {
	store engine.LogStore
	id    a2a.TaskID
	after int64
	at    int64         // the time of the entry at after (µs; 0: not known)
	state a2a.TaskState // the task's state at after ("": not known)
	poll  time.Duration
	buf   []engine.LogEntry
	wake  <-chan struct{}
	stop  func()
	seen  bool // the task existed: its disappearance ends the tail
	// base is the mark of the task's last deletion when the tail
	// started (Start; 0: none), known once based.
	base  int64
	based bool
	gone  bool // the task was found deleted or created again: ErrGone from now on
	// live: TryNext's last call found the task stored at the revision
	// the tail stands on (Gone need not ask again).
	live bool
	// onIdle, when set (tests), is called each time the Tail has read
	// everything and is about to wait.
	onIdle func()
}

// NewTail starts following task id after revision after (0: from its
// first entry); poll 0 means DefaultPoll. Close it when done.
func NewTail(store engine.LogStore, id a2a.TaskID, after int64, poll time.Duration) *Tail {
	if poll <= 0 {
		poll = DefaultPoll
	}
	wake, stop := store.WatchLog(id)
	return &Tail{store: store, id: id, after: after, poll: poll, wake: wake, stop: stop, seen: after > 0}
}

// Start reads, for a tail at revision 0, the mark of its task's last
// deletion the store remembers (engine.LogStore.Deleted), so that a task
// created and deleted after Start and before the tail's first read ends
// the tail (ErrGone) instead of leaving it waiting for a creation that
// came and went. Call it before the task may be created (a reader made
// for a message about to create its task); without it the first read
// takes the mark, and sees only the deletions after it. A tail past
// revision 0, or that saw its task, needs none.
func (t *Tail) Start(ctx context.Context) error {
	if t.based || t.seen {
		return nil
	}
	mark, err := t.store.Deleted(ctx, t.id)
	if err != nil {
		return err
	}
	t.base, t.based = mark, true
	return nil
}

// deletedSince reports whether the store marked a deletion of the task
// since Start (a tail that has not seen its task).
func (t *Tail) deletedSince(ctx context.Context) (bool, error) {
	mark, err := t.store.Deleted(ctx, t.id)
	if err != nil {
		return false, err
	}
	return mark != 0 && mark != t.base, nil
}

// first checks, before a tail that has not seen its task accepts its
// first entry, that the incarnation it waited for was not deleted since
// Start (the entry would be another's): ErrGone then.
func (t *Tail) first(ctx context.Context) error {
	if t.seen {
		return nil
	}
	switch gone, err := t.deletedSince(ctx); {
	case err != nil:
		return err
	case gone:
		t.gone = true
		return ErrGone
	}
	return nil
}

// Close ends the watch.
func (t *Tail) Close() { t.stop() }

// After is the revision of the last entry Next returned (or the start).
func (t *Tail) After() int64 { return t.after }

// ErrGone is Next's error when the task it follows was deleted (its log
// goes with it) after the Tail saw it exist, or created again since (the
// log below the Tail belongs to another incarnation of the task).
var ErrGone = fmt.Errorf("tasklog: the task is gone: %w", engine.ErrNotFound)

// Next returns the next entry, waiting for it until ctx ends. When the
// entries after the last one it returned were trimmed (the task sat idle
// for the store's log retention) — some of them, or all — it returns the
// task itself as a LogTask entry at its current revision and goes on from
// there; so it does for a history revision (LogMessage) that also changed
// the task's state (a Replace whose event is a message), which says
// nothing of the new state. Once the task has existed, its deletion, or
// its creation again under its ID, ends the tail with ErrGone.
func (t *Tail) Next(ctx context.Context) (engine.LogEntry, error) {
	for {
		// TryNext looks at the task whenever the log has nothing new,
		// the first time included: a deletion before the watch began
		// sends no wake-up.
		l, ok, err := t.TryNext(ctx)
		if err != nil || ok {
			return l, err
		}
		if err := t.Wait(ctx); err != nil {
			return engine.LogEntry{}, err
		}
	}
}

// TryNext returns the next entry if one is stored, without waiting. When
// the log has nothing after the tail's revision it reads the task: a task
// past that revision lost its entries to a trim (TryNext returns the task
// as a snapshot entry); a task deleted after the tail saw it, or stored
// again as another incarnation, ends the tail (ErrGone).
func (t *Tail) TryNext(ctx context.Context) (engine.LogEntry, bool, error) {
	t.live = false
	if t.gone {
		return engine.LogEntry{}, false, ErrGone
	}
	if err := t.Start(ctx); err != nil {
		return engine.LogEntry{}, false, err
	}
	if len(t.buf) == 0 {
		got, err := t.read(ctx)
		if err != nil {
			return engine.LogEntry{}, false, err
		}
		if len(got) == 0 {
			return t.probe(ctx)
		}
		t.buf = got
	}
	l := t.buf[0]
	if l.Revision != t.after+1 || (l.Kind == engine.LogMessage && t.state != "" && l.State != t.state) {
		// Entries between are gone (the log was trimmed), or a history
		// revision changed the state, which it does not record: start
		// again from the task as it is.
		t.buf = nil
		return t.snapshot(ctx)
	}
	if err := t.first(ctx); err != nil {
		t.buf = nil
		return engine.LogEntry{}, false, err
	}
	t.buf = t.buf[1:]
	t.accept(l)
	return l, true, nil
}

// read reads the entries after the tail's revision, reading the entry at
// it too, to learn its time and state or check them: another time there
// is another incarnation of the task (ErrGone).
func (t *Tail) read(ctx context.Context) ([]engine.LogEntry, error) {
	got, err := t.store.ReadLog(ctx, t.id, max(t.after-1, 0), readBatch)
	if err != nil || t.after == 0 || len(got) == 0 || got[0].Revision != t.after {
		return got, err
	}
	below := got[0]
	if t.at != 0 && below.Time != t.at {
		t.gone = true
		return nil, ErrGone
	}
	t.at, t.state = below.Time, below.State
	return got[1:], nil
}

// accept moves the tail onto l.
func (t *Tail) accept(l engine.LogEntry) {
	t.after, t.at, t.state, t.seen = l.Revision, l.Time, l.State, true
}

// another reports whether rec, the task as stored now, is another
// incarnation than the one the tail followed up to its revision.
func (t *Tail) another(rec engine.Record) bool {
	return rec.Revision < t.after || (rec.Revision == t.after && t.at != 0 && rec.Cursor.UpdatedAt != t.at)
}

// probe reads the task when the log had nothing after the tail's
// revision (see TryNext).
func (t *Tail) probe(ctx context.Context) (engine.LogEntry, bool, error) {
	rec, err := t.store.Get(ctx, t.id)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		if t.seen {
			t.gone = true
			return engine.LogEntry{}, false, ErrGone
		}
		// Not created yet, or created and deleted since Start.
		return engine.LogEntry{}, false, t.first(ctx)
	case err != nil:
		return engine.LogEntry{}, false, err
	case t.seen && t.another(rec):
		t.gone = true
		return engine.LogEntry{}, false, ErrGone
	case rec.Revision <= t.after:
		t.live = true
		return engine.LogEntry{}, false, nil
	}
	// The task is past the tail's revision: its entries were written
	// after the log was read (then they are there now), or trimmed.
	got, err := t.read(ctx)
	if err != nil {
		return engine.LogEntry{}, false, err
	}
	if len(got) > 0 {
		t.buf = got
		return t.TryNext(ctx)
	}
	return t.snapshotOf(ctx, rec)
}

// snapshot returns the task as a LogTask entry at its current revision.
func (t *Tail) snapshot(ctx context.Context) (engine.LogEntry, bool, error) {
	rec, err := t.store.Get(ctx, t.id)
	if errors.Is(err, engine.ErrNotFound) {
		t.gone = true
		return engine.LogEntry{}, false, ErrGone
	}
	if err != nil {
		return engine.LogEntry{}, false, err
	}
	if t.seen && t.another(rec) {
		t.gone = true
		return engine.LogEntry{}, false, ErrGone
	}
	if rec.Revision == t.after {
		return engine.LogEntry{}, false, nil // nothing newer after all
	}
	return t.snapshotOf(ctx, rec)
}

// snapshotOf returns rec as a LogTask entry and moves the tail onto it.
func (t *Tail) snapshotOf(ctx context.Context, rec engine.Record) (engine.LogEntry, bool, error) {
	if err := t.first(ctx); err != nil {
		return engine.LogEntry{}, false, err
	}
	body, err := json.Marshal(a2a.StreamResponse{Event: rec.Task})
	if err != nil {
		return engine.LogEntry{}, false, fmt.Errorf("tasklog: %w: %w", engine.ErrInternal, err)
	}
	l := engine.LogEntry{Revision: rec.Revision, Time: rec.Cursor.UpdatedAt, Kind: engine.LogTask,
		State: rec.Task.Status.State, Body: body}
	t.accept(l)
	return l, true, nil
}

// Woken is the task's watch: it receives after each write the store (or
// a relay of other processes' notifications) signals for the task.
func (t *Tail) Woken() <-chan struct{} { return t.wake }

// Seen reports whether the task existed during the tail: an entry was
// returned, or the tail started after a revision.
func (t *Tail) Seen() bool { return t.seen }

// Gone reports whether the task the tail saw exist is now deleted, or
// stored again as another incarnation. Right after a TryNext that found
// the task at the tail's revision it answers from that read.
func (t *Tail) Gone(ctx context.Context) (bool, error) {
	switch {
	case t.gone:
		return true, nil
	case !t.seen || t.live:
		return false, nil
	}
	rec, err := t.store.Get(ctx, t.id)
	if errors.Is(err, engine.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return t.another(rec), nil
}

// Wait waits for a wake-up of the task's watch, the poll interval, or the
// end of ctx (its error).
func (t *Tail) Wait(ctx context.Context) error {
	if t.onIdle != nil {
		t.onIdle()
	}
	timer := time.NewTimer(t.poll)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.wake:
	case <-timer.C:
	}
	return nil
}
