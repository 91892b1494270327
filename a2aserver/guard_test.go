package a2aserver

import (
	"context"
	"errors"
	"iter"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
)

// heldAgent creates a task, reports working, then holds until release is
// closed (or its context ends) before completing: a running execution.
type heldAgent struct {
	release chan struct{}
}

func newHeldAgent() *heldAgent {
	return &heldAgent{release: make(chan struct{})}
}

func (a *heldAgent) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if execCtx.StoredTask == nil && !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateWorking, nil), nil) {
			return
		}
		select {
		case <-a.release:
		case <-ctx.Done():
			return
		}
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCompleted, nil), nil)
	}
}

func (a *heldAgent) Cancel(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}

const callerHeader = "X-Test-Caller"

// caller returns a context carrying the identity header as a transport
// would set it (no header for "").
func caller(ctx context.Context, name string) context.Context {
	h := map[string][]string{}
	if name != "" {
		h[callerHeader] = []string{name}
	}
	ctx, _ = a2asrv.NewCallContext(ctx, a2asrv.NewServiceParams(h))
	return ctx
}

// stored is one task state a task store wrote.
type stored struct {
	id    a2a.TaskID
	state a2a.TaskState
}

// updateSignal is a handler's task store that reports every update it
// stores, so tests wait on the store instead of on time.
type updateSignal struct {
	taskstore.Store
	updates chan stored
}

func newUpdateSignal(ts taskstore.Store) updateSignal {
	return updateSignal{Store: ts, updates: make(chan stored, 256)}
}

func (s updateSignal) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	v, err := s.Store.Update(ctx, req)
	if err == nil {
		s.updates <- stored{req.Task.ID, req.Task.Status.State}
	}
	return v, err
}

// await returns the next task stored in state.
func (s updateSignal) await(state a2a.TaskState) a2a.TaskID {
	for u := range s.updates {
		if u.state == state {
			return u.id
		}
	}
	return ""
}

// guardedHandler is an a2a-go request handler over an owner-policy store,
// with HeaderIdentity and, when guard is set, TaskGuard.
func guardedHandler(t *testing.T, agent a2asrv.AgentExecutor, guard bool) (a2asrv.RequestHandler, *memstore.Store, updateSignal) {
	t.Helper()
	mem := memstore.New(memstore.Options{})
	ts := TaskStore(authz.New(mem, authz.OwnerPolicy{}))
	interceptors := []a2asrv.CallInterceptor{HeaderIdentity{Header: callerHeader}}
	if guard {
		interceptors = append(interceptors, TaskGuard(ts))
	}
	sig := newUpdateSignal(ts)
	h := a2asrv.NewHandler(agent, a2asrv.WithTaskStore(sig), a2asrv.WithCallInterceptors(interceptors...))
	return h, mem, sig
}

// firstErr reads an event stream's first item: its error, or got 1 when
// it is an event (the call got through).
func firstErr(events iter.Seq2[a2a.Event, error]) (got int, err error) {
	for _, err := range events {
		if err != nil {
			return 0, err
		}
		return 1, nil
	}
	return 0, nil
}

// guardedCalls are the task-naming methods, each returning its error.
var guardedCalls = map[string]func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error{
	"GetTask": func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error {
		_, err := h.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		return err
	},
	"CancelTask": func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error {
		_, err := h.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
		return err
	},
	"SubscribeToTask": func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error {
		n, err := firstErr(h.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}))
		if n > 0 {
			return errors.New("subscribed")
		}
		return err
	},
	"SendMessage": func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("more"))
		msg.TaskID = id
		_, err := h.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		return err
	},
	"SendStreamingMessage": func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("more"))
		msg.TaskID = id
		n, err := firstErr(h.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}))
		if err == nil || n > 0 {
			return errors.New("streamed")
		}
		return err
	},
	"GetTaskPushConfig": func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error {
		_, err := h.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: id, ID: "c"})
		return err
	},
	"ListTaskPushConfigs": func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error {
		_, err := h.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: id})
		return err
	},
	"CreateTaskPushConfig": func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error {
		_, err := h.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: id, URL: "http://127.0.0.1:1/"})
		return err
	},
	"DeleteTaskPushConfig": func(ctx context.Context, h a2asrv.RequestHandler, id a2a.TaskID) error {
		return h.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: id, ID: "c"})
	},
}

// TestTaskGuard: every task-naming method answers another caller's running
// task — as another identity or as none — exactly as it answers a task
// that does not exist, and changes nothing; its owner still gets through.
// Without the guard (a2a-go v2.3.1 alone) SubscribeToTask streams the
// foreign task and SendMessage/CancelTask answer differently for it.
func TestTaskGuard(t *testing.T) {
	agent := newHeldAgent()
	h, mem, working := guardedHandler(t, agent, true)

	// Alice's task runs until the agent is released; her blocking
	// SendMessage returns once it is completed and stored.
	result := make(chan a2a.SendMessageResult, 1)
	go func() {
		res, err := h.SendMessage(caller(t.Context(), "alice"), &a2a.SendMessageRequest{
			Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("mine")),
		})
		if err != nil {
			t.Error(err)
		}
		result <- res
	}()
	id := working.await(a2a.TaskStateWorking)

	for name, call := range guardedCalls {
		missing := call(caller(t.Context(), "bob"), h, "no-such-task")
		if !errors.Is(missing, a2a.ErrTaskNotFound) {
			t.Errorf("%s of a missing task: %v, want task not found", name, missing)
		}
		for _, who := range []string{"bob", ""} {
			err := call(caller(t.Context(), who), h, id)
			if err == nil || err.Error() != missing.Error() || !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("%s of alice's running task as %q: %v; want exactly %v", name, who, err, missing)
			}
		}
	}

	// The owner gets through.
	if _, err := h.GetTask(caller(t.Context(), "alice"), &a2a.GetTaskRequest{ID: id}); err != nil {
		t.Errorf("alice GetTask: %v", err)
	}
	close(agent.release)
	<-result
	// Nothing the others sent reached the task: not canceled, no message
	// appended; created, working, completed.
	after, err := mem.Get(t.Context(), id)
	if err != nil || after.Revision != 3 || after.Task.Status.State != a2a.TaskStateCompleted || len(after.Task.History) != 1 {
		t.Errorf("alice's task afterwards: %+v, %v; want completed at revision 3 with her one message", after, err)
	}

	// W3: a negative history length is invalid for everyone.
	neg := -1
	if _, err := h.GetTask(caller(t.Context(), "alice"), &a2a.GetTaskRequest{ID: id, HistoryLength: &neg}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("GetTask historyLength -1: %v, want invalid params", err)
	}
}

// TestHeaderIdentity: one header value is the caller; a repeated header is
// refused rather than trusting either value, and so is one longer than any
// owner can be; Required refuses calls with no identity.
func TestHeaderIdentity(t *testing.T) {
	for _, c := range []struct {
		name     string
		values   []string
		required bool
		user     string
		err      error
	}{
		{"one value", []string{"alice"}, false, "alice", nil},
		{"repeated", []string{"alice", "bob"}, false, "", errRepeatedIdentity},
		{"repeated, same value", []string{"alice", "alice"}, true, "", errRepeatedIdentity},
		{"missing", nil, false, "", nil},
		{"missing, required", nil, true, "", errNoIdentity},
		{"empty, required", []string{""}, true, "", errNoIdentity},
		{"one value, required", []string{"alice"}, true, "alice", nil},
		{"longest", []string{strings.Repeat("x", engine.MaxOwnerBytes)}, true, strings.Repeat("x", engine.MaxOwnerBytes), nil},
		{"over-long", []string{strings.Repeat("x", engine.MaxOwnerBytes+1)}, false, "", errLongIdentity},
	} {
		params := map[string][]string{}
		if c.values != nil {
			params["x-test-caller"] = c.values
		}
		ctx, callCtx := a2asrv.NewCallContext(t.Context(), a2asrv.NewServiceParams(params))
		_, _, err := HeaderIdentity{Header: callerHeader, Required: c.required}.Before(ctx, callCtx, &a2asrv.Request{})
		if err != c.err {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
		if c.err != nil && !errors.Is(err, a2a.ErrUnauthenticated) {
			t.Errorf("%s: %v is not a2a.ErrUnauthenticated", c.name, err)
		}
		if got, _ := authz.CallerFrom(ctx); got != c.user {
			t.Errorf("%s: caller %q, want %q", c.name, got, c.user)
		}
	}
}
