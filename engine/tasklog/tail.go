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
type Tail struct {
	store engine.LogStore
	id    a2a.TaskID
	after int64
	poll  time.Duration
	buf   []engine.LogEntry
	wake  <-chan struct{}
	stop  func()
	seen  bool // the task existed: its disappearance ends the tail
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

// Close ends the watch.
func (t *Tail) Close() { t.stop() }

// After is the revision of the last entry Next returned (or the start).
func (t *Tail) After() int64 { return t.after }

// ErrGone is Next's error when the task it follows was deleted (its log
// goes with it) after the Tail saw it exist.
var ErrGone = fmt.Errorf("tasklog: the task is gone: %w", engine.ErrNotFound)

// Next returns the next entry, waiting for it until ctx ends. When the
// entries after the last one it returned were trimmed (the task sat idle
// for the store's log retention), it returns the task itself as a LogTask
// entry at its current revision and goes on from there. Once the task has
// existed, its deletion ends the tail with ErrGone.
func (t *Tail) Next(ctx context.Context) (engine.LogEntry, error) {
	for {
		l, ok, err := t.TryNext(ctx)
		if err != nil || ok {
			return l, err
		}
		// Asked before every wait, the first included: a deletion before
		// the watch began sends no wake-up.
		if gone, err := t.Gone(ctx); err != nil {
			return engine.LogEntry{}, err
		} else if gone {
			return engine.LogEntry{}, ErrGone
		}
		if err := t.Wait(ctx); err != nil {
			return engine.LogEntry{}, err
		}
	}
}

// TryNext returns the next entry if one is stored, without waiting.
func (t *Tail) TryNext(ctx context.Context) (engine.LogEntry, bool, error) {
	if len(t.buf) == 0 {
		got, err := t.store.ReadLog(ctx, t.id, t.after, readBatch)
		if err != nil {
			return engine.LogEntry{}, false, err
		}
		if len(got) == 0 {
			return engine.LogEntry{}, false, nil
		}
		t.buf = got
	}
	l := t.buf[0]
	if l.Revision != t.after+1 {
		// Entries between are gone: the log was trimmed. Start again
		// from the task as it is.
		t.buf = nil
		return t.snapshot(ctx)
	}
	t.buf = t.buf[1:]
	t.after, t.seen = l.Revision, true
	return l, true, nil
}

// snapshot returns the task as a LogTask entry at its current revision.
func (t *Tail) snapshot(ctx context.Context) (engine.LogEntry, bool, error) {
	rec, err := t.store.Get(ctx, t.id)
	if errors.Is(err, engine.ErrNotFound) {
		return engine.LogEntry{}, false, ErrGone
	}
	if err != nil {
		return engine.LogEntry{}, false, err
	}
	body, err := json.Marshal(a2a.StreamResponse{Event: rec.Task})
	if err != nil {
		return engine.LogEntry{}, false, fmt.Errorf("tasklog: %w: %w", engine.ErrInternal, err)
	}
	t.after, t.seen = rec.Revision, true
	return engine.LogEntry{Revision: rec.Revision, Time: rec.Cursor.UpdatedAt, Kind: engine.LogTask,
		State: rec.Task.Status.State, Body: body}, true, nil
}

// Woken is the task's watch: it receives after each write the store (or
// a relay of other processes' notifications) signals for the task.
func (t *Tail) Woken() <-chan struct{} { return t.wake }

// Seen reports whether the task existed during the tail: an entry was
// returned, or the tail started after a revision.
func (t *Tail) Seen() bool { return t.seen }

// Gone reports whether the task the tail saw exist is now deleted.
func (t *Tail) Gone(ctx context.Context) (bool, error) {
	if !t.seen {
		return false, nil
	}
	_, err := t.store.Get(ctx, t.id)
	if errors.Is(err, engine.ErrNotFound) {
		return true, nil
	}
	return false, err
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
