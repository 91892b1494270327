package a2aserver

import (
	"context"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine/memstore"
)

// TestExecutionsWaitAndAbort: Wait follows executions that outlive their
// request (returnImmediately); Abort stops the ones still running and a2a-go
// stores their tasks as failed with the reason as status message.
func TestExecutionsWaitAndAbort(t *testing.T) {
	agent := newHeldAgent()
	execs := NewExecutions()
	mem := memstore.New(memstore.Options{})
	sig := newUpdateSignal(TaskStore(mem))
	h := a2asrv.NewHandler(execs.Wrap(agent), a2asrv.WithTaskStore(sig))

	var ids []a2a.TaskID
	for range 3 {
		res, err := h.SendMessage(t.Context(), &a2a.SendMessageRequest{
			Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work")),
			Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.(*a2a.Task).ID)
		sig.await(a2a.TaskStateWorking)
	}
	if n := execs.Running(); n != 3 {
		t.Fatalf("Running() = %d after the requests returned, want 3", n)
	}
	expired, cancel := context.WithCancel(t.Context())
	cancel()
	if err := execs.Wait(expired); err == nil {
		t.Fatal("Wait returned nil with executions running")
	}

	const reason = "server shut down before the agent finished"
	execs.Abort(reason)
	if err := execs.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Wait returns when the agents have returned; a2a-go stores their last
	// event right after. Each task ends failed with the reason.
	for range ids {
		sig.await(a2a.TaskStateFailed)
	}
	for _, id := range ids {
		rec, err := mem.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		st := rec.Task.Status
		if st.State != a2a.TaskStateFailed || st.Message == nil || len(st.Message.Parts) != 1 || st.Message.Parts[0].Text() != reason {
			t.Errorf("task %s ended %s with %+v, want failed with the reason", id, st.State, st.Message)
		}
	}

	// After Abort, a new execution is stopped at once: its task fails too.
	res, err := h.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("late"))})
	if err != nil {
		t.Fatal(err)
	}
	if task := res.(*a2a.Task); task.Status.State != a2a.TaskStateFailed {
		t.Errorf("execution started after Abort ended %s, want failed", task.Status.State)
	}
}
