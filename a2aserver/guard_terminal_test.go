package a2aserver

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// statesStore answers each Get with the next state of states (the task
// changes between reads); nil state: not found.
type statesStore struct {
	taskstore.Store // not called
	states          []a2a.TaskState
}

func (s *statesStore) Get(_ context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	st := s.states[0]
	s.states = s.states[1:]
	if st == "" {
		return nil, a2a.ErrTaskNotFound
	}
	return &taskstore.StoredTask{Task: &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: st}}}, nil
}

// TestTaskGuardTerminalSubscribe (W6): SubscribeToTask of a task in a
// terminal state is UnsupportedOperation, decided from the guard's read;
// when a2a-go answers not found for a task the guard read as running, the
// guard reads again: finished → UnsupportedOperation, gone or not running
// → its fixed not-found answer. Other methods and other errors are left
// alone.
func TestTaskGuardTerminalSubscribe(t *testing.T) {
	sub := &a2asrv.Request{Payload: &a2a.SubscribeToTaskRequest{ID: "t"}}
	for _, c := range []struct {
		name   string
		states []a2a.TaskState // guard's read, then After's
		before error           // Before's answer
		after  error           // After's answer to a2a-go's not found
	}{
		{"terminal", []a2a.TaskState{a2a.TaskStateCompleted}, a2a.ErrUnsupportedOperation, nil},
		{"canceled", []a2a.TaskState{a2a.TaskStateCanceled}, a2a.ErrUnsupportedOperation, nil},
		{"finished meanwhile", []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateFailed}, nil, a2a.ErrUnsupportedOperation},
		{"deleted meanwhile", []a2a.TaskState{a2a.TaskStateWorking, ""}, nil, a2a.ErrTaskNotFound},
		{"not running", []a2a.TaskState{a2a.TaskStateInputRequired, a2a.TaskStateInputRequired}, nil, a2a.ErrTaskNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := taskGuard{store: &statesStore{states: c.states}}
			ctx, _, err := g.Before(t.Context(), &a2asrv.CallContext{}, sub)
			if !errors.Is(err, c.before) || (c.before == nil) != (err == nil) {
				t.Fatalf("Before: %v, want %v", err, c.before)
			}
			if err != nil {
				return
			}
			resp := &a2asrv.Response{Err: a2a.NewError(a2a.ErrTaskNotFound, "no active execution")}
			if err := g.After(ctx, &a2asrv.CallContext{}, resp); err != nil {
				t.Fatal(err)
			}
			if !errors.Is(resp.Err, c.after) {
				t.Errorf("After: %v, want %v", resp.Err, c.after)
			}
		})
	}
	// Other errors, and other methods, pass through untouched.
	g := taskGuard{store: &statesStore{states: []a2a.TaskState{a2a.TaskStateWorking}}}
	ctx, _, _ := g.Before(t.Context(), &a2asrv.CallContext{}, sub)
	resp := &a2asrv.Response{Err: a2a.ErrInternalError}
	if _ = g.After(ctx, &a2asrv.CallContext{}, resp); resp.Err != a2a.ErrInternalError {
		t.Errorf("After changed an internal error: %v", resp.Err)
	}
	resp = &a2asrv.Response{Err: a2a.ErrTaskNotFound}
	if _ = g.After(t.Context(), &a2asrv.CallContext{}, resp); resp.Err != a2a.ErrTaskNotFound {
		t.Errorf("After of another call changed its error: %v", resp.Err)
	}
}
