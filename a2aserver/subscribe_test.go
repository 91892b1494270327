package a2aserver_test

import (
	"context"
	"errors"
	"iter"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine/memstore"
)

// askAgent asks for input on a task's first message; a follow-up works,
// waits on hold, then completes.
type askAgent struct{ hold chan struct{} }

func (a askAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil {
			if yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, nil), nil)
			}
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		select {
		case <-a.hold:
		case <-ctx.Done():
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (askAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// localHandler is a2a-go's local mode over a memstore with its log, with
// or without SubscribeFromLog.
func localHandler(t *testing.T, fromLog bool, agent a2asrv.AgentExecutor) (a2asrv.RequestHandler, *memstore.Store) {
	t.Helper()
	store := memstore.New(memstore.Options{Log: true})
	t.Cleanup(func() { store.Close() })
	ts := a2aserver.TaskStore(store)
	h := a2asrv.NewHandler(agent, a2asrv.WithTaskStore(ts), a2asrv.WithCallInterceptors(a2aserver.TaskGuard(ts)))
	if !fromLog {
		return h, store
	}
	h, err := a2aserver.SubscribeFromLog(h, ts, store, time.Hour) // only wake-ups move it
	if err != nil {
		t.Fatal(err)
	}
	return h, store
}

// subscribe collects a subscription's events on a goroutine.
func subscribe(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) (<-chan a2a.Event, <-chan error) {
	events, done := make(chan a2a.Event, 16), make(chan error, 1)
	go func() {
		defer close(events)
		for ev, err := range h.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
			if err != nil {
				done <- err
				return
			}
			events <- ev
		}
		done <- nil
	}()
	return events, done
}

func nextEvent(t *testing.T, events <-chan a2a.Event) a2a.Event {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the stream ended early")
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no event")
	}
	return nil
}

func eventState(ev a2a.Event) a2a.TaskState {
	switch v := ev.(type) {
	case *a2a.Task:
		return v.Status.State
	case *a2a.TaskStatusUpdateEvent:
		return v.Status.State
	}
	return ""
}

// waitingTask sends a first message and returns the task, waiting for
// input with no execution running.
func waitingTask(t *testing.T, h a2asrv.RequestHandler) a2a.TaskID {
	t.Helper()
	res, err := h.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("first message answered %#v", res)
	}
	return task.ID
}

// TestSubscribeWithoutExecution (W9, A2A §3.1.6): in local mode, a
// subscription to a task waiting for input, with no execution running,
// gets the task first, then the events of the follow-up's execution until
// the terminal one. (a2a-go v2.3.1 alone answers task not found once the
// first execution has ended: localHandler(t, false, …).)
func TestSubscribeWithoutExecution(t *testing.T) {
	agent := askAgent{hold: make(chan struct{})}
	h, _ := localHandler(t, true, agent)
	id := waitingTask(t, h)
	events, done := subscribe(t.Context(), h, id)
	if st := eventState(nextEvent(t, events)); st != a2a.TaskStateInputRequired {
		t.Fatalf("first event in state %s, want the task waiting for input", st)
	}
	follow := make(chan error, 1)
	go func() {
		msg := a2a.NewMessageForTask(a2a.MessageRoleUser, a2a.TaskInfo{TaskID: id}, a2a.NewTextPart("go on"))
		_, err := h.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
		follow <- err
	}()
	if st := eventState(nextEvent(t, events)); st != a2a.TaskStateWorking {
		t.Fatalf("event in state %s, want working", st)
	}
	close(agent.hold)
	if st := eventState(nextEvent(t, events)); st != a2a.TaskStateCompleted {
		t.Fatalf("event in state %s, want completed", st)
	}
	if err := <-done; err != nil {
		t.Fatalf("stream ended with %v", err)
	}
	if err := <-follow; err != nil {
		t.Fatal(err)
	}
}

// TestSubscribeDeletedTask: a task deleted during a subscription ends it
// with task not found.
func TestSubscribeDeletedTask(t *testing.T) {
	h, store := localHandler(t, true, askAgent{hold: make(chan struct{})})
	id := waitingTask(t, h)
	events, done := subscribe(t.Context(), h, id)
	nextEvent(t, events)
	if err := store.Delete(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("stream of a deleted task ended with %v, want task not found", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stream of a deleted task did not end")
	}
}
