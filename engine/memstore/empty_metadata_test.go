package memstore

// An empty, non-nil metadata map reads back as an empty map (the task
// codec's convention for messages, artifacts and parts too), not as none.

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine/taskcodec"
)

func TestEmptyMetadata(t *testing.T) {
	in := &a2a.Task{
		ID: "m", ContextID: "c",
		Status:   a2a.TaskStatus{State: a2a.TaskStateWorking},
		Metadata: map[string]any{},
		History:  []*a2a.Message{{ID: "h", Role: a2a.MessageRoleUser, Metadata: map[string]any{}}},
	}
	b, err := taskcodec.EncodeTask(in)
	if err != nil {
		t.Fatal(err)
	}
	viaCodec, err := taskcodec.DecodeTask(b)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	rec, err := s.Create(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Get(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]*a2a.Task{"Create": rec.Task, "Get": g.Task} {
		if (got.Metadata == nil) != (viaCodec.Metadata == nil) {
			t.Errorf("%s: task Metadata %#v; the codec (pebblestore, memstore before #16) gives %#v", what, got.Metadata, viaCodec.Metadata)
		}
		if got.History[0].Metadata == nil {
			t.Errorf("%s: message Metadata nil", what)
		}
	}
}
