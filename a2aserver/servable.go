package a2aserver

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine"
)

// checkServable rejects content that a2a-go v2.3.1 stores but cannot serve
// over gRPC: what its protobuf conversion on the server fails (or panics)
// on, and what its gRPC client refuses to decode (a2apb/v1/pbconv). Such a
// task, created over JSON-RPC or HTTP+JSON, would make every gRPC GetTask
// of it and every gRPC ListTasks page holding it fail — and a failed page
// delivers no token, so a gRPC traversal could not get past it. The
// TaskStore adapter refuses it up front with invalid params, so what it
// stores can be served on all three transports. The list, exhaustive for
// the task's fields (ToProtoTask / FromProtoTask):
//
//   - a task without a context ID (the client: "context id cannot be
//     empty"; the engine already refuses an empty task ID);
//   - a message — the status message or a history entry — that is nil in
//     the history, has no ID, or whose role is neither ROLE_USER nor
//     ROLE_AGENT (sent as ROLE_UNSPECIFIED, which the client refuses);
//   - an artifact that is nil or has no ID;
//   - a part that is nil (the server's conversion dereferences it), has no
//     content, or is a data part whose value is not a JSON object.
//
// Strings need no check: JSON and protobuf decoding both leave them valid
// UTF-8, which is all protobuf asks. Metadata values are what JSON
// decodes into, which structpb converts; their depth is engine.Limits'.
func checkServable(t *a2a.Task) error {
	if t == nil {
		return nil
	}
	if t.ContextID == "" {
		return unservable("task without a context ID")
	}
	if m := t.Status.Message; m != nil {
		if err := servableMessage(m); err != nil {
			return err
		}
	}
	for _, m := range t.History {
		if err := servableMessage(m); err != nil {
			return err
		}
	}
	for _, a := range t.Artifacts {
		switch {
		case a == nil:
			return unservable("nil artifact")
		case a.ID == "":
			return unservable("artifact without an ID")
		}
		if err := servableParts(a.Parts); err != nil {
			return err
		}
	}
	return nil
}

func unservable(what string) error {
	return fmt.Errorf("a2aserver: %s: %w", what, engine.ErrInvalidArgument)
}

// servableMessage checks one message as checkServable does.
func servableMessage(m *a2a.Message) error {
	switch {
	case m == nil:
		return unservable("nil message")
	case m.ID == "":
		return unservable("message without an ID")
	case m.Role != a2a.MessageRoleUser && m.Role != a2a.MessageRoleAgent:
		return unservable("message role other than ROLE_USER and ROLE_AGENT")
	}
	return servableParts(m.Parts)
}

func servableParts(ps a2a.ContentParts) error {
	for _, p := range ps {
		if p == nil {
			return unservable("nil part")
		}
		switch c := p.Content.(type) {
		case nil:
			return unservable("part without content")
		case a2a.Data:
			if _, ok := c.Value.(map[string]any); !ok {
				return unservable("data part whose value is not an object")
			}
		}
	}
	return nil
}

// ContentGuard returns a call interceptor that answers invalid params, on
// every transport, to a SendMessage or SendStreamingMessage whose message
// the TaskStore adapter would refuse to store (see checkServable: a role
// other than ROLE_USER and ROLE_AGENT, no message ID, a null part, a part
// without content, a data part that is not an object), or whose message
// or request metadata is beyond the store's default limits
// (engine.Limits{}: ContentGuardLimits says why). Without it a2a-go
// v2.3.1 runs the request anyway and fails later, and not as invalid
// params: a null part breaks its deep copy of the task ("gob: encodeArray:
// nil element", answered -32603 / 500 with that text and logged at WARN),
// and the adapter's refusal comes back as a processor error. Install it
// with the other interceptors, after the identity:
//
//	a2asrv.WithCallInterceptors(identity, a2aserver.ContentGuard(), a2aserver.TaskGuard(ts))
//
// Over gRPC such messages mostly cannot arrive (a2a-go's conversion of the
// request refuses an unspecified role and a missing ID); the guard answers
// the rest the same way.
func ContentGuard() a2asrv.CallInterceptor {
	return ContentGuardLimits(engine.Limits{})
}

// ContentGuardLimits is ContentGuard for a store with limits l: it also
// answers invalid params (the adapter's "task exceeds the store's size or
// nesting limit") to a message, or request metadata, that l refuses
// (engine.Limits.CheckMessage), before a2a-go deep-copies the task that
// holds it. That copy (gob) costs the square of the nesting: one
// SendMessage of 54 KB whose metadata was nested 9,000 deep held 1.3 GB
// and took seconds before the store refused it.
func ContentGuardLimits(l engine.Limits) a2asrv.CallInterceptor {
	return contentGuard{limits: l}
}

type contentGuard struct {
	a2asrv.PassthroughCallInterceptor
	limits engine.Limits
}

// Before implements a2asrv.CallInterceptor.
func (g contentGuard) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	r, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok || r == nil {
		return ctx, nil, nil
	}
	if r.Message != nil && servableMessage(r.Message) != nil {
		return ctx, nil, a2a.NewError(a2a.ErrInvalidParams, msgInvalidParams)
	}
	if r.Message != nil && g.limits.CheckMessage(r.Message) != nil ||
		g.limits.CheckMessage(&a2a.Message{Metadata: r.Metadata}) != nil {
		return ctx, nil, a2a.NewError(a2a.ErrInvalidParams, msgLimitExceeded)
	}
	return ctx, nil, nil
}
