// Package retaintest holds retention checks that need a backend's test
// hook, beyond what engine/storetest can reach from outside.
package retaintest

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// MutatedAfterScan checks that a task rewritten between a batch's scan
// and its removal (no longer due) is left, with its new content, while
// the batch removes the others (R2: removal acts only on the version it
// examined). open returns an empty store reading clock; setHook installs
// the backend's hook that runs between scan and removal (nil: none).
func MutatedAfterScan(t *testing.T, open func(clock engine.Clock) engine.Retainer, setHook func(func())) {
	t.Helper()
	var clock int64 = 1000
	s := open(func() int64 { return clock })
	ctx := context.Background()
	for _, id := range []a2a.TaskID{"a", "b", "c"} {
		clock++
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "x", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}); err != nil {
			t.Fatal(err)
		}
	}
	cut := clock + 1
	setHook(func() {
		clock += 100
		if _, err := s.Replace(ctx, &a2a.Task{ID: "b", ContextID: "y", Status: a2a.TaskStatus{State: a2a.TaskStateFailed}}, 0); err != nil {
			t.Error(err)
		}
	})
	defer setHook(nil)
	res, err := s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: cut, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 2 {
		t.Errorf("removed %d, want a and c", res.Removed)
	}
	if rec, err := s.Get(ctx, "b"); err != nil || rec.Task.ContextID != "y" {
		t.Errorf("b after the batch: %v %v, want its rewrite", rec.Task, err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("a: %v, want removed", err)
	}
	if c, ok := s.(engine.Checker); ok {
		if err := c.CheckInvariants(); err != nil {
			t.Error(err)
		}
	}
}
