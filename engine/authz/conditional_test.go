package authz_test

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
	"github.com/a2astore/a2astore/engine/storetest"
)

// The dispatcher's own conditional writes: the caller's revision is
// compared only after the check, so a task the caller cannot access is not
// found whatever the revision asked for (A6) — a conflict would tell it the
// task exists — and an accessible one at another revision is a conflict
// that changes nothing.
func TestConditionalRevisionAfterCheck(t *testing.T) {
	ctx := context.Background()
	s := newMem(t, storetest.NewManualClock(1))
	for _, id := range []a2a.TaskID{"mine", "theirs"} {
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: string(id), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
	d := authz.New(s, funcPolicy{allow: func(_ context.Context, tk *a2a.Task) bool { return tk.ContextID == "mine" }})
	msg := &a2a.Message{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("x")}}
	calls := []struct {
		name string
		do   func(id a2a.TaskID, rev int64) error
	}{
		{"CancelIf", func(id a2a.TaskID, rev int64) error { _, err := d.CancelIf(ctx, id, rev); return err }},
		{"AppendHistoryIf", func(id a2a.TaskID, rev int64) error { _, err := d.AppendHistoryIf(ctx, id, msg, rev); return err }},
		{"DeleteIf", func(id a2a.TaskID, rev int64) error { return d.DeleteIf(ctx, id, rev) }},
	}
	for _, c := range calls {
		for _, rev := range []int64{1, 2} {
			err := c.do("theirs", rev)
			if !errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrRevisionConflict) {
				t.Errorf("%s of an inaccessible task on revision %d: %v, want only not found", c.name, rev, err)
			}
		}
		if err := c.do("mine", 2); !errors.Is(err, engine.ErrRevisionConflict) {
			t.Errorf("%s of an accessible task on another revision: %v, want a conflict", c.name, err)
		}
		if err := c.do("mine", -1); !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("%s on a negative revision: %v, want invalid argument", c.name, err)
		}
	}
	for _, id := range []a2a.TaskID{"mine", "theirs"} {
		if rec, err := s.Get(ctx, id); err != nil || rec.Revision != 1 || len(rec.Task.History) != 0 || rec.Task.Status.State != a2a.TaskStateWorking {
			t.Errorf("%q after refused writes: %v %+v", id, err, rec)
		}
	}
	// On its revision the accessible task is written.
	if _, err := d.AppendHistoryIf(ctx, "mine", msg, 1); err != nil {
		t.Errorf("AppendHistoryIf on the revision: %v", err)
	}
	if _, err := d.CancelIf(ctx, "mine", 2); err != nil {
		t.Errorf("CancelIf on the revision: %v", err)
	}
	if err := d.DeleteIf(ctx, "mine", 3); err != nil {
		t.Errorf("DeleteIf on the revision: %v", err)
	}
}

// plainStore is a store written against engine.Store alone.
type plainStore struct{ engine.Store }

// A decorator over a store without conditional writes answers
// engine.ErrConditionalUnsupported, and the dispatcher over it fails
// closed the same way, changing nothing; AllowAll, which checks nothing,
// still passes the unconditional writes through.
func TestConditionalUnsupportedThroughDecorator(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	before, err := mem.Create(ctx, &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}})
	if err != nil {
		t.Fatal(err)
	}
	m := storemetrics.New(plainStore{mem}, storemetrics.Options{})
	if _, err := m.CancelIf(ctx, "t", 1); !errors.Is(err, engine.ErrConditionalUnsupported) {
		t.Errorf("storemetrics CancelIf over a plain store: %v", err)
	}
	d := authz.New(m, admitAll)
	if _, err := d.Cancel(ctx, "t"); !errors.Is(err, engine.ErrConditionalUnsupported) || !errors.Is(err, engine.ErrInternal) {
		t.Errorf("dispatcher Cancel over metrics over a plain store: %v, want engine.ErrConditionalUnsupported", err)
	}
	if err := d.Delete(ctx, "t"); !errors.Is(err, engine.ErrConditionalUnsupported) {
		t.Errorf("dispatcher Delete over metrics over a plain store: %v", err)
	}
	if rec, err := mem.Get(ctx, "t"); err != nil || rec.Revision != before.Revision {
		t.Errorf("refused writes changed the task: %v %+v", err, rec)
	}
	open := authz.New(m, authz.AllowAll{})
	if _, err := open.Cancel(ctx, "t"); err != nil {
		t.Errorf("AllowAll Cancel over a plain store: %v", err)
	}
}

// unversioned is a faulty store whose Get reports revision 0 for every
// task: a condition on the revision read would then be no condition at
// all (0 is the unconditional write).
type unversioned struct{ *memstore.Store }

func (u unversioned) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	rec, err := u.Store.Get(ctx, id)
	rec.Revision = 0
	return rec, err
}

// A store that reads a task at no revision makes every checked write fail
// closed with ErrInternal, unwritten: the dispatcher cannot make the write
// conditional on the version it checked (A9), and must not write
// unconditionally instead.
func TestWriteOnUnversionedReadFailsClosed(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, storetest.NewManualClock(1))
	before, err := mem.Create(ctx, working("t", "a"))
	if err != nil {
		t.Fatal(err)
	}
	d := authz.New(unversioned{mem}, admitAll)
	msg := &a2a.Message{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("x")}}
	for _, w := range []struct {
		name string
		do   func() error
	}{
		{"Cancel", func() error { _, err := d.Cancel(ctx, "t"); return err }},
		{"AppendHistory", func() error { _, err := d.AppendHistory(ctx, "t", msg); return err }},
		{"Delete", func() error { return d.Delete(ctx, "t") }},
		{"Replace", func() error { _, err := d.Replace(ctx, working("t", "b"), 0); return err }},
	} {
		if err := w.do(); !errors.Is(err, engine.ErrInternal) {
			t.Errorf("%s over a store that read the task at revision 0: %v, want engine.ErrInternal", w.name, err)
		}
	}
	if rec, err := mem.Get(ctx, "t"); err != nil || rec.Revision != before.Revision || rec.Task.ContextID != "a" {
		t.Errorf("refused writes changed the task: %v %+v", err, rec)
	}
}
