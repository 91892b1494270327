package a2aserver

import (
	"context"
	"errors"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// TaskGuard returns a call interceptor that makes every method naming a
// task answer exactly as for a missing task — same code, same message, on
// every transport — when the caller cannot access it. Install it after
// the interceptor that establishes the caller (HeaderIdentity or your own
// authentication), passing the task store the handler uses:
//
//	ts := a2aserver.TaskStore(authz.New(store, policy))
//	handler := a2asrv.NewHandler(agent, a2asrv.WithTaskStore(ts),
//		a2asrv.WithCallInterceptors(identity, a2aserver.TaskGuard(ts)))
//
// Why it is needed: a2a-go v2.3.1 answers some methods without asking the
// task store. SubscribeToTask streams a running execution to whoever names
// its task, and SendMessage and CancelTask on a running task answer from
// the execution manager ("task execution is already in progress", "setup
// failed") before or instead of reading the task, so a restrictive policy
// in the store alone neither protects running tasks nor hides their
// existence.
//
// The guard reads the named task through store before the request reaches
// a2a-go. The access decision is the store's own: a store that applies a
// policy (engine/authz through TaskStore) answers not found for a task the
// caller cannot access, exactly as for a missing one (A6), and the guard
// then answers with one fixed not-found error, whichever it was. Only when
// the read succeeds does the request continue. The methods checked are
// GetTask, CancelTask, SubscribeToTask, SendMessage and
// SendStreamingMessage continuing a task (Message.TaskID), and the four
// push-notification config methods. A message's ReferenceTasks are not
// checked here: a2a-go loads them (a2asrv.ReferencedTasksLoader) through
// the same store, which does not return inaccessible tasks.
//
// SubscribeToTask of a task in a terminal state (completed, failed,
// canceled, rejected) is answered with A2A's UnsupportedOperationError
// (W6; JSON-RPC -32004, HTTP 400 with reason UNSUPPORTED_OPERATION, gRPC
// UNIMPLEMENTED through GRPCErrorCodes): a client that resubscribes after a
// disconnect learns that the task finished, not that it is missing.
// a2a-go v2.3.1 asks only its execution manager, which answers task not
// found ("no active execution") for a finished task; the guard decides
// from the task it read, and again after a2a-go answered not found for a
// task that finished between the guard's read and a2a-go's subscription.
//
// The guard also rejects a GetTask historyLength below 0 with invalid
// params on every transport (W3), as the engine does for ListTasks; a2a-go
// treats it as "all history" and its gRPC binding drops it (see
// GRPCRequestValidator).
//
// Costs: one store read per guarded call (GetTask reads the task twice; a
// SubscribeToTask that a2a-go answers not found, once more).
func TaskGuard(store taskstore.Store) a2asrv.CallInterceptor {
	return taskGuard{store: store}
}

type taskGuard struct {
	a2asrv.PassthroughCallInterceptor
	store taskstore.Store
}

// errTaskNotFound is the guard's answer for a missing or inaccessible task:
// the message the TaskStore adapter gives a missing task.
var errTaskNotFound = a2a.NewError(a2a.ErrTaskNotFound, msgTaskNotFound)

// errTerminalTask is the guard's answer to SubscribeToTask of a task in a
// terminal state (W6).
var errTerminalTask = a2a.NewError(a2a.ErrUnsupportedOperation, "task is in a terminal state: nothing to subscribe to")

// subscribedKey is the context key under which Before leaves the ID of
// the task a SubscribeToTask names, for After.
type subscribedKey struct{}

// Before implements a2asrv.CallInterceptor.
func (g taskGuard) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	if r, ok := req.Payload.(*a2a.GetTaskRequest); ok && r != nil && r.HistoryLength != nil && *r.HistoryLength < 0 {
		return ctx, nil, a2a.NewError(a2a.ErrInvalidParams, msgInvalidParams)
	}
	id := namedTask(req.Payload)
	if id == "" && pushConfigCall(req.Payload) {
		// a2a-go v2.3.1 does not reject it for these: the config store
		// fails, answered as an internal error that shows its text.
		return ctx, nil, a2a.NewError(a2a.ErrInvalidParams, msgInvalidParams)
	}
	if id == "" {
		return ctx, nil, nil // nothing named, or a2a-go rejects the empty ID itself
	}
	stored, err := g.store.Get(ctx, id)
	if err != nil {
		if errors.Is(err, a2a.ErrTaskNotFound) {
			return ctx, nil, errTaskNotFound
		}
		return ctx, nil, err
	}
	if _, ok := req.Payload.(*a2a.SubscribeToTaskRequest); ok {
		if stored.Task.Status.State.Terminal() {
			return ctx, nil, errTerminalTask
		}
		ctx = context.WithValue(ctx, subscribedKey{}, id)
	}
	return ctx, nil, nil
}

// After implements a2asrv.CallInterceptor: a SubscribeToTask that a2a-go
// answers not found for a task the guard could read is answered again
// from the task as it is now (W6): finished, or gone.
func (g taskGuard) After(ctx context.Context, _ *a2asrv.CallContext, resp *a2asrv.Response) error {
	id, ok := ctx.Value(subscribedKey{}).(a2a.TaskID)
	if !ok || !errors.Is(resp.Err, a2a.ErrTaskNotFound) {
		return nil
	}
	stored, err := g.store.Get(ctx, id)
	switch {
	case err == nil && stored.Task.Status.State.Terminal():
		resp.Err = errTerminalTask
	case err == nil || errors.Is(err, a2a.ErrTaskNotFound):
		resp.Err = errTaskNotFound
	default:
		resp.Err = err
	}
	return nil
}

// pushConfigCall reports whether payload is a push configuration call's.
func pushConfigCall(payload any) bool {
	switch payload.(type) {
	case *a2a.GetTaskPushConfigRequest, *a2a.ListTaskPushConfigRequest, *a2a.PushConfig, *a2a.DeleteTaskPushConfigRequest:
		return true
	}
	return false
}

// namedTask returns the ID of the existing task a request acts on, or "".
func namedTask(payload any) a2a.TaskID {
	switch r := payload.(type) {
	case *a2a.GetTaskRequest:
		if r != nil {
			return r.ID
		}
	case *a2a.CancelTaskRequest:
		if r != nil {
			return r.ID
		}
	case *a2a.SubscribeToTaskRequest:
		if r != nil {
			return r.ID
		}
	case *a2a.SendMessageRequest:
		if r != nil && r.Message != nil {
			return r.Message.TaskID
		}
	case *a2a.GetTaskPushConfigRequest:
		if r != nil {
			return r.TaskID
		}
	case *a2a.ListTaskPushConfigRequest:
		if r != nil {
			return r.TaskID
		}
	case *a2a.PushConfig:
		if r != nil {
			return r.TaskID
		}
	case *a2a.DeleteTaskPushConfigRequest:
		if r != nil {
			return r.TaskID
		}
	}
	return ""
}
