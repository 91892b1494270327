package pebblestore

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
)

// A task rewritten between a batch's scan and its removal is no longer
// due: the batch leaves it, with its new content, and removes the others
// (R2: removal acts only on the version it examined).
func TestRetainSkipsTaskMutatedAfterScan(t *testing.T) {
	var clock int64 = 1000
	s, err := Open("db", Options{FS: vfs.NewMem(), Logger: pebblelog.Quiet{}, Clock: func() int64 { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, id := range []a2a.TaskID{"a", "b", "c"} {
		clock++
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "x", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}); err != nil {
			t.Fatal(err)
		}
	}
	cut := clock + 1
	retainScanned = func() {
		clock += 100
		if _, err := s.Replace(ctx, &a2a.Task{ID: "b", ContextID: "y", Status: a2a.TaskStatus{State: a2a.TaskStateFailed}}, 0); err != nil {
			t.Error(err)
		}
	}
	defer func() { retainScanned = nil }()
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
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}
