package a2aserver

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine"
)

// HeaderIdentity is an a2asrv.CallInterceptor that takes the caller's
// identity from one request header (HTTP header or gRPC metadata key, case
// insensitive) and records it as the call's authenticated user, where
// authorization policies (engine/authz CallerFrom) find it.
//
// Trust model: the header is trusted as sent. Anyone who can reach the
// listener can claim any identity, so use it for staging and load tests, or
// behind a proxy that authenticates callers and sets the header itself,
// overwriting any the client sent. A request carrying the header more than
// once (as a proxy that appends instead of overwriting would forward it) is
// rejected with a2a.ErrUnauthenticated rather than trusting either value.
//
// An identity longer than engine.MaxOwnerBytes, which no task owner can be,
// is rejected with a2a.ErrUnauthenticated on every method (engine/authz's
// OwnerPolicy counts such an identity as none, whoever set it).
//
// A request without the header (or with an empty one) keeps whatever user
// earlier middleware set. With Required, when that leaves no authenticated,
// named user, it is rejected with a2a.ErrUnauthenticated (HTTP 401,
// JSON-RPC -31401, gRPC UNAUTHENTICATED). -31401 is a2a-go's code: the
// A2A v1.0 specification's error table (§5.4) has no unauthenticated
// entry, and §3.3.2 leaves JSON-RPC to "a custom error".
// Set Required whenever the store applies a policy that needs an identity,
// so an anonymous caller learns that it must authenticate instead of
// getting an empty list or an invalid-params error.
type HeaderIdentity struct {
	a2asrv.PassthroughCallInterceptor
	Header   string // e.g. "X-A2astore-Caller"
	Required bool   // reject calls without the header
}

var _ a2asrv.CallInterceptor = HeaderIdentity{}

// Errors of HeaderIdentity. They never quote the header's values.
var (
	errRepeatedIdentity = a2a.NewError(a2a.ErrUnauthenticated, "caller identity header repeated")
	errNoIdentity       = a2a.NewError(a2a.ErrUnauthenticated, "caller identity required")
	errLongIdentity     = a2a.NewError(a2a.ErrUnauthenticated, fmt.Sprintf("caller identity longer than %d bytes", engine.MaxOwnerBytes))
)

// Before implements a2asrv.CallInterceptor.
func (h HeaderIdentity) Before(ctx context.Context, callCtx *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	vals, _ := callCtx.ServiceParams().Get(h.Header)
	switch {
	case len(vals) > 1:
		return ctx, nil, errRepeatedIdentity
	case len(vals) == 1 && len(vals[0]) > engine.MaxOwnerBytes:
		return ctx, nil, errLongIdentity
	case len(vals) == 1 && vals[0] != "":
		callCtx.User = a2asrv.NewAuthenticatedUser(vals[0], nil)
	case h.Required && (callCtx.User == nil || !callCtx.User.Authenticated || callCtx.User.Name == ""):
		return ctx, nil, errNoIdentity
	}
	return ctx, nil, nil
}
