package a2aserver

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// CapabilityGuard returns a call interceptor that answers the methods of an
// optional capability the agent card does not declare with the error A2A
// v1.0 §3.3.4 requires, before anything else looks at the request:
//
//   - push notifications not declared (caps.PushNotifications false): the
//     four push-config methods answer PushNotificationNotSupportedError
//     (JSON-RPC -32003, HTTP 400, gRPC UNIMPLEMENTED through
//     GRPCErrorCodes);
//   - streaming not declared: SendStreamingMessage and SubscribeToTask
//     answer UnsupportedOperationError (-32004, 400, UNIMPLEMENTED);
//   - extended agent card not declared: GetExtendedAgentCard answers
//     UnsupportedOperationError.
//
// Pass the capabilities the card publishes, so the answers follow the card:
// a server that declares push notifications gets its push-config calls
// through to the handler. Install it before TaskGuard: the guard reads the
// named task first and would answer not-found for a task that does not
// exist, where the spec's answer does not depend on the task. a2a-go
// v2.3.1 checks the same capabilities (a2asrv.WithCapabilityChecks) only
// after every interceptor ran.
func CapabilityGuard(caps a2a.AgentCapabilities) a2asrv.CallInterceptor {
	return capabilityGuard{caps: caps}
}

type capabilityGuard struct {
	a2asrv.PassthroughCallInterceptor
	caps a2a.AgentCapabilities
}

// Errors of CapabilityGuard.
var (
	errPushNotSupported      = a2a.NewError(a2a.ErrPushNotificationNotSupported, "push notifications are not supported by this agent")
	errStreamingNotSupported = a2a.NewError(a2a.ErrUnsupportedOperation, "streaming is not supported by this agent")
	errNoExtendedCard        = a2a.NewError(a2a.ErrUnsupportedOperation, "this agent has no extended agent card")
)

// Before implements a2asrv.CallInterceptor. The method is the one a2a-go
// names in the call context (a2asrv.CallContext.Method).
func (g capabilityGuard) Before(ctx context.Context, callCtx *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	switch callCtx.Method() {
	case "GetTaskPushConfig", "ListTaskPushConfigs", "CreateTaskPushConfig", "DeleteTaskPushConfig":
		if !g.caps.PushNotifications {
			return ctx, nil, errPushNotSupported
		}
	case "SendStreamingMessage", "SubscribeToTask":
		if !g.caps.Streaming {
			return ctx, nil, errStreamingNotSupported
		}
	case "GetExtendedAgentCard":
		if !g.caps.ExtendedAgentCard {
			return ctx, nil, errNoExtendedCard
		}
	}
	return ctx, nil, nil
}
