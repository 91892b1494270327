package authztest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
)

// Contexts of the attack: the policy lets the caller access tasks in
// Allowed and no other.
const (
	Allowed = "allowed"
	Denied  = "denied"
)

// hookPolicy admits tasks in context Allowed. While it decides on the
// target task, it runs hook first, as another writer changing the task
// between the dispatcher's read and its write would: the decision is on
// the version the dispatcher read, the store then holds another.
type hookPolicy struct {
	target a2a.TaskID
	hook   func(ctx context.Context) // nil: none
}

func (p *hookPolicy) ScopeTaskList(_ context.Context, req engine.ListRequest) (engine.ListRequest, error) {
	return req, nil
}

func (p *hookPolicy) CanAccessTask(ctx context.Context, t *a2a.Task) (bool, error) {
	if t.ID == p.target && p.hook != nil {
		p.hook(ctx)
	}
	return t.ContextID == Allowed, nil
}

func (p *hookPolicy) Projection() engine.Projection { return engine.ProjectionFull }

// A write is one of the dispatcher's checked writes, named.
type write struct {
	name string
	do   func(ctx context.Context, d *authz.Dispatcher, id a2a.TaskID) error
}

var writes = []write{
	{"Cancel", func(ctx context.Context, d *authz.Dispatcher, id a2a.TaskID) error {
		_, err := d.Cancel(ctx, id)
		return err
	}},
	{"AppendHistory", func(ctx context.Context, d *authz.Dispatcher, id a2a.TaskID) error {
		_, err := d.AppendHistory(ctx, id, &a2a.Message{ID: "attacker-msg", Role: a2a.MessageRoleUser,
			Parts: a2a.ContentParts{a2a.NewTextPart("written by a caller without access")}})
		return err
	}},
	{"Delete", func(ctx context.Context, d *authz.Dispatcher, id a2a.TaskID) error {
		return d.Delete(ctx, id)
	}},
	{"CancelIf", func(ctx context.Context, d *authz.Dispatcher, id a2a.TaskID) error {
		_, err := d.CancelIf(ctx, id, 1)
		return err
	}},
	{"AppendHistoryIf", func(ctx context.Context, d *authz.Dispatcher, id a2a.TaskID) error {
		_, err := d.AppendHistoryIf(ctx, id, &a2a.Message{ID: "attacker-msg", Role: a2a.MessageRoleUser,
			Parts: a2a.ContentParts{a2a.NewTextPart("written by a caller without access")}}, 1)
		return err
	}},
	{"DeleteIf", func(ctx context.Context, d *authz.Dispatcher, id a2a.TaskID) error {
		return d.DeleteIf(ctx, id, 1)
	}},
	// A message already in the history (m0, in every version of the
	// target): the store changes nothing and returns the current record
	// (S3), which must be the checked version, never one the caller may
	// not see (the revision is compared before the deduplication).
	{"AppendHistoryDuplicate", func(ctx context.Context, d *authz.Dispatcher, id a2a.TaskID) error {
		return duplicate(d.AppendHistory(ctx, id, firstMessage()))
	}},
	{"AppendHistoryIfDuplicate", func(ctx context.Context, d *authz.Dispatcher, id a2a.TaskID) error {
		return duplicate(d.AppendHistoryIf(ctx, id, firstMessage(), 1))
	}},
}

// firstMessage is the message every version of the target starts with.
func firstMessage() *a2a.Message {
	return &a2a.Message{ID: "m0", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hello")}}
}

// duplicate is the error of a deduplicated AppendHistory through the
// dispatcher: a record beside an error, or a success returning a task the
// caller cannot access, is an error too.
func duplicate(rec engine.Record, err error) error {
	switch {
	case err != nil && rec.Task != nil:
		return fmt.Errorf("record of %q beside the error %w", rec.Task.ID, err)
	case err == nil && (rec.Task == nil || rec.Task.ContextID != Allowed):
		return fmt.Errorf("deduplicated append returned %+v, not the checked version", rec.Task)
	}
	return err
}

// newTask is the target task at revision 1: working, in context ctxID.
func newTask(id a2a.TaskID, ctxID string) *a2a.Task {
	return &a2a.Task{ID: id, ContextID: ctxID, Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []*a2a.Message{firstMessage()}}
}

// moved is the target's content after the other writer's Replace.
func moved(id a2a.TaskID, ctxID string, n int) *a2a.Task {
	t := newTask(id, ctxID)
	t.Metadata = map[string]any{"moved": float64(n)}
	return t
}

// canon is a comparable form of a record: revision, cursor and content.
func canon(rec engine.Record) string {
	return fmt.Sprintf("rev %d at %d state %s ctx %q history %d meta %v",
		rec.Revision, rec.Cursor.UpdatedAt, rec.Task.Status.State, rec.Task.ContextID, len(rec.Task.History), rec.Task.Metadata)
}

// RunWriteWindow attacks the dispatcher's check-then-write window (A9, A6)
// over stores from open (a fresh, empty store per subtest; the store
// itself, not a dispatcher):
//
//   - moved-out: while the policy checks the target (in context Allowed),
//     another writer replaces it into context Denied. Cancel,
//     AppendHistory and Delete (and their conditional forms on the checked
//     revision) must fail with engine.ErrNotFound, as for a missing task,
//     and leave the task exactly as the other writer left it; so must an
//     AppendHistory of a message already in the history, whose
//     deduplicated answer would otherwise be the moved task's record.
//   - still-allowed: the other writer changes the task but keeps it in
//     Allowed: the write is checked again and then acts on the new version.
//   - contention: the other writer changes the task during every check:
//     after authz.MaxWriteAttempts attempts the write fails with
//     authz.ErrWriteContention (an engine.ErrRevisionConflict), unwritten.
//   - canceled: the context ends during the check while the task changes:
//     the write stops with the context's error, unwritten.
//   - no-conditional-writes: over a store without engine.ConditionalStore
//     the writes fail closed with engine.ErrConditionalUnsupported and
//     change nothing.
func RunWriteWindow(t *testing.T, open func(t testing.TB) engine.Store) {
	t.Run("moved-out", func(t *testing.T) { testMovedOut(t, open(t)) })
	t.Run("still-allowed", func(t *testing.T) { testStillAllowed(t, open(t)) })
	t.Run("contention", func(t *testing.T) { testContention(t, open(t)) })
	t.Run("canceled", func(t *testing.T) { testCanceled(t, open(t)) })
	t.Run("no-conditional-writes", func(t *testing.T) { testUnsupported(t, open(t)) })
}

func mustCreate(t *testing.T, s engine.Store, task *a2a.Task) engine.Record {
	t.Helper()
	rec, err := s.Create(context.Background(), task)
	if err != nil {
		t.Fatalf("Create(%q): %v", task.ID, err)
	}
	return rec
}

func mustGet(t *testing.T, s engine.Store, id a2a.TaskID) engine.Record {
	t.Helper()
	rec, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return rec
}

// replaceOnce returns a hook that, the first time it runs, replaces the
// target with content in ctxID, failing the test if it cannot.
func replaceOnce(t *testing.T, s engine.Store, id a2a.TaskID, ctxID string) (func(context.Context), func() engine.Record) {
	var fired atomic.Bool
	var after engine.Record
	hook := func(ctx context.Context) {
		if !fired.CompareAndSwap(false, true) {
			return
		}
		rec, err := s.Replace(ctx, moved(id, ctxID, 1), 0)
		if err != nil {
			t.Errorf("the other writer's Replace: %v", err)
		}
		after = rec
	}
	return hook, func() engine.Record {
		if !fired.Load() {
			t.Fatalf("the policy was never asked about %q: the attack did not run", id)
		}
		return after
	}
}

func testMovedOut(t *testing.T, s engine.Store) {
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			id := a2a.TaskID("target-" + w.name)
			mustCreate(t, s, newTask(id, Allowed))
			hook, movedRec := replaceOnce(t, s, id, Denied)
			d := authz.New(s, &hookPolicy{target: id, hook: hook})
			err := w.do(context.Background(), d, id)
			want := movedRec()
			if !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("%s of a task moved out of the caller's reach during the check: error %v, want engine.ErrNotFound (A6, A9)", w.name, err)
			}
			got, gerr := s.Get(context.Background(), id)
			if gerr != nil {
				t.Fatalf("%s: the task is gone: %v (want it as the other writer left it: %s)", w.name, gerr, canon(want))
			}
			if canon(got) != canon(want) {
				t.Errorf("%s changed a task the caller could not access:\n got %s\nwant %s", w.name, canon(got), canon(want))
			}
		})
	}
}

func testStillAllowed(t *testing.T, s engine.Store) {
	for _, w := range writes[:3] { // the unconditional forms re-check and write the new version
		t.Run(w.name, func(t *testing.T) {
			id := a2a.TaskID("allowed-" + w.name)
			mustCreate(t, s, newTask(id, Allowed))
			hook, movedRec := replaceOnce(t, s, id, Allowed)
			d := authz.New(s, &hookPolicy{target: id, hook: hook})
			if err := w.do(context.Background(), d, id); err != nil {
				t.Fatalf("%s of a task changed but still accessible: %v", w.name, err)
			}
			prev := movedRec()
			got, err := s.Get(context.Background(), id)
			switch w.name {
			case "Delete":
				if !errors.Is(err, engine.ErrNotFound) {
					t.Errorf("Delete succeeded but the task is still there: %v", err)
				}
				return
			case "Cancel":
				if err != nil || got.Task.Status.State != a2a.TaskStateCanceled {
					t.Errorf("Cancel succeeded but the task reads %v %+v", err, got.Task)
				}
			case "AppendHistory":
				if err != nil || len(got.Task.History) != 2 {
					t.Errorf("AppendHistory succeeded but the task reads %v %+v", err, got.Task)
				}
			}
			if got.Revision != prev.Revision+1 || got.Task.Metadata["moved"] != float64(1) {
				t.Errorf("%s did not act on the other writer's version (rev %d, %s): now %s", w.name, prev.Revision, canon(prev), canon(got))
			}
		})
	}
}

func testContention(t *testing.T, s engine.Store) {
	for _, w := range writes[:3] {
		t.Run(w.name, func(t *testing.T) {
			id := a2a.TaskID("busy-" + w.name)
			mustCreate(t, s, newTask(id, Allowed))
			var n atomic.Int64
			hook := func(ctx context.Context) {
				if _, err := s.Replace(ctx, moved(id, Allowed, int(n.Add(1))), 0); err != nil {
					t.Errorf("the other writer's Replace: %v", err)
				}
			}
			d := authz.New(s, &hookPolicy{target: id, hook: hook})
			err := w.do(context.Background(), d, id)
			if !errors.Is(err, authz.ErrWriteContention) || !errors.Is(err, engine.ErrRevisionConflict) {
				t.Errorf("%s while the task changes during every check: error %v, want authz.ErrWriteContention", w.name, err)
			}
			if got := n.Load(); got != authz.MaxWriteAttempts {
				t.Errorf("%s checked %d times, want authz.MaxWriteAttempts = %d", w.name, got, authz.MaxWriteAttempts)
			}
			got := mustGet(t, s, id)
			if got.Revision != 1+n.Load() || got.Task.Status.State != a2a.TaskStateWorking || len(got.Task.History) != 1 {
				t.Errorf("%s under contention wrote: %s, want only the other writer's %d replaces", w.name, canon(got), n.Load())
			}
		})
	}
}

func testCanceled(t *testing.T, s engine.Store) {
	for _, w := range writes[:3] {
		t.Run(w.name, func(t *testing.T) {
			id := a2a.TaskID("canceled-" + w.name)
			mustCreate(t, s, newTask(id, Allowed))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var n atomic.Int64
			hook := func(context.Context) {
				// The store is written with a live context; the
				// caller's ends during its first check.
				if _, err := s.Replace(context.Background(), moved(id, Allowed, int(n.Add(1))), 0); err != nil {
					t.Errorf("the other writer's Replace: %v", err)
				}
				cancel()
			}
			d := authz.New(s, &hookPolicy{target: id, hook: hook})
			err := w.do(ctx, d, id)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s whose context ended during a check that lost the race: error %v, want context.Canceled", w.name, err)
			}
			if got := n.Load(); got != 1 {
				t.Errorf("%s checked %d times after its context ended, want 1", w.name, got)
			}
			got := mustGet(t, s, id)
			if got.Revision != 2 || got.Task.Status.State != a2a.TaskStateWorking || len(got.Task.History) != 1 {
				t.Errorf("%s with an ended context wrote: %s", w.name, canon(got))
			}
		})
	}
}

// plainStore hides every method but engine.Store's: a store written
// against the contract without conditional writes.
type plainStore struct{ engine.Store }

func testUnsupported(t *testing.T, s engine.Store) {
	id := a2a.TaskID("plain")
	before := mustCreate(t, s, newTask(id, Allowed))
	d := authz.New(plainStore{s}, &hookPolicy{target: id})
	for _, w := range writes {
		err := w.do(context.Background(), d, id)
		if !errors.Is(err, engine.ErrConditionalUnsupported) || !errors.Is(err, engine.ErrInternal) {
			t.Errorf("%s over a store without conditional writes: error %v, want engine.ErrConditionalUnsupported", w.name, err)
		}
	}
	if got := mustGet(t, s, id); canon(got) != canon(before) {
		t.Errorf("refused writes changed the task: %s, was %s", canon(got), canon(before))
	}
}
