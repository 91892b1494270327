package authz_test

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
)

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
