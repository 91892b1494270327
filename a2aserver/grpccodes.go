package a2aserver

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// specGRPCCodes are the gRPC status codes of the A2A v1.0 error mapping
// table (specification §5.4, "Error Code Mappings") where a2a-go v2.3.1's
// gRPC binding answers another code (FAILED_PRECONDITION for all three),
// keyed by the ErrorInfo reason a2a-go attaches to the status.
var specGRPCCodes = map[string]codes.Code{
	"UNSUPPORTED_OPERATION":           codes.Unimplemented,
	"PUSH_NOTIFICATION_NOT_SUPPORTED": codes.Unimplemented,
	"VERSION_NOT_SUPPORTED":           codes.Unimplemented,
}

// a2aDomain is the ErrorInfo domain of A2A errors (a2a.ProtocolDomain).
const a2aDomain = "a2a-protocol.org"

// GRPCErrorCodes returns the server options (a unary and a stream
// interceptor, chained) that give A2A errors the gRPC status code of the
// A2A v1.0 mapping table (§5.4) where a2a-go v2.3.1 answers another:
// UnsupportedOperationError — among others SubscribeToTask of a task in a
// terminal state (W6) — PushNotificationNotSupportedError and
// VersionNotSupportedError are UNIMPLEMENTED, not FAILED_PRECONDITION.
// The message and details (the ErrorInfo with its reason) are kept, so a
// client can tell the three from an unknown method by the reason.
//
// Note: a2a-go v2.3.1's own gRPC client classifies an error by code and
// reason together and knows these reasons only with
// FAILED_PRECONDITION; it reports the spec's UNIMPLEMENTED as an internal
// error (message kept).
func GRPCErrorCodes() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
			resp, err := next(ctx, req)
			return resp, specGRPCError(err)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
			return specGRPCError(next(srv, ss))
		}),
	}
}

// specGRPCError returns err with the spec's code for its A2A reason, and
// an INVALID_ARGUMENT without one (a2a-go v2.3.1's refusals of a request
// its conversion cannot take: a message without an ID, a part without
// content) with the invalid params reason (W10).
func specGRPCError(err error) error {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return err
	}
	if st.Code() == codes.InvalidArgument && !hasA2AReason(st) {
		return grpcA2AError(codes.InvalidArgument, a2a.ErrInvalidParams, st.Message())
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != a2aDomain {
			continue
		}
		code, remap := specGRPCCodes[info.GetReason()]
		if !remap || code == st.Code() {
			return err
		}
		p := st.Proto()
		p.Code = int32(code)
		return status.FromProto(p).Err()
	}
	return err
}

// hasA2AReason reports whether st carries an ErrorInfo of the A2A domain.
func hasA2AReason(st *status.Status) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == a2aDomain {
			return true
		}
	}
	return false
}
