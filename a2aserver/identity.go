package a2aserver

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// HeaderIdentity is an a2asrv.CallInterceptor that takes the caller's
// identity from one request header (HTTP header or gRPC metadata key, case
// insensitive) and records it as the call's authenticated user, where
// authorization policies (engine/authz CallerFrom) find it. A request
// without the header keeps whatever user earlier middleware set.
//
// It trusts the header as sent: use it for staging and load tests, or
// behind a proxy that authenticates callers and sets the header itself.
type HeaderIdentity struct {
	a2asrv.PassthroughCallInterceptor
	Header string // e.g. "X-A2astore-Caller"
}

var _ a2asrv.CallInterceptor = HeaderIdentity{}

// Before implements a2asrv.CallInterceptor.
func (h HeaderIdentity) Before(ctx context.Context, callCtx *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	if vals, ok := callCtx.ServiceParams().Get(h.Header); ok && len(vals) > 0 && vals[0] != "" {
		callCtx.User = a2asrv.NewAuthenticatedUser(vals[0], nil)
	}
	return ctx, nil, nil
}
