package a2aserver

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// HistoryLength returns a call interceptor that gives SendMessage's
// configuration.historyLength the semantics A2A v1.0 §3.2.4 gives the
// parameter on every operation: the Task a SendMessage returns — and each
// Task a SendStreamingMessage streams — carries at most the last n
// messages of its history (none, and no history field, for 0); unset
// leaves the history whole. A negative value is invalid params (JSON-RPC
// -32602, HTTP 400, gRPC INVALID_ARGUMENT), as it is for GetTask and
// ListTasks. a2a-go v2.3.1 applies historyLength to GetTask only.
//
// Only what is sent is trimmed: the stored task keeps its history, and a
// streamed Task is copied before trimming (a2a-go may hand the same event
// to several subscribers).
func HistoryLength() a2asrv.CallInterceptor { return historyLength{} }

type historyLength struct {
	a2asrv.PassthroughCallInterceptor
}

// historyLimitKey is the context key under which Before leaves the
// requested history length for After.
type historyLimitKey struct{}

// Before implements a2asrv.CallInterceptor.
func (historyLength) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	r, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok || r == nil || r.Config == nil || r.Config.HistoryLength == nil {
		return ctx, nil, nil
	}
	n := *r.Config.HistoryLength
	if n < 0 {
		return ctx, nil, a2a.NewError(a2a.ErrInvalidParams, msgInvalidParams)
	}
	return context.WithValue(ctx, historyLimitKey{}, n), nil, nil
}

// After implements a2asrv.CallInterceptor: it runs for SendMessage's
// result and for each event of SendStreamingMessage.
func (historyLength) After(ctx context.Context, _ *a2asrv.CallContext, resp *a2asrv.Response) error {
	n, ok := ctx.Value(historyLimitKey{}).(int)
	if !ok {
		return nil
	}
	if task, ok := resp.Payload.(*a2a.Task); ok && task != nil {
		resp.Payload = trimHistory(task, n)
	}
	return nil
}

// trimHistory returns task with at most its last n history messages: task
// itself when it has no more than that, else a shallow copy.
func trimHistory(task *a2a.Task, n int) *a2a.Task {
	if len(task.History) <= n && (n > 0 || task.History == nil) {
		return task
	}
	trimmed := *task
	trimmed.History = nil
	if n > 0 {
		trimmed.History = task.History[len(task.History)-n:]
	}
	return &trimmed
}
