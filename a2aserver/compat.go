package a2aserver

import (
	"context"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GRPCListTasksValidator is a gRPC unary server interceptor that rejects the
// ListTasks arguments a2a-go's protobuf conversion (v2.3.1) would otherwise
// drop silently, so gRPC answers INVALID_ARGUMENT like JSON-RPC and
// HTTP+JSON do (W3, L3):
//
//   - a negative history_length (pbconv turns it into "no limit"), and
//   - a status enum value A2A does not define (pbconv turns it into
//     "any state").
//
// Install it with grpc.NewServer(grpc.UnaryInterceptor(GRPCListTasksValidator)).
func GRPCListTasksValidator(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if r, ok := req.(*a2apb.ListTasksRequest); ok {
		if r.HistoryLength != nil && r.GetHistoryLength() < 0 {
			return nil, status.Error(codes.InvalidArgument, msgInvalidParams)
		}
		if _, known := a2apb.TaskState_name[int32(r.GetStatus())]; !known {
			return nil, status.Error(codes.InvalidArgument, msgInvalidParams)
		}
	}
	return next(ctx, req)
}

// RESTQueryCompat wraps a2a-go's HTTP+JSON handler so that ListTasks
// requests from a2a-go's own REST client keep their status-timestamp
// filter. In v2.3.1 the client sends it as lastUpdatedAfter while the server
// reads statusTimestampAfter, so the filter is silently dropped. The wrapper
// copies lastUpdatedAfter into statusTimestampAfter when only the former is
// present. (The client also formats the time as RFC 3339 without fractional
// seconds; that precision is lost before the request leaves the client.)
func RESTQueryCompat(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.RawQuery != "" {
			q := r.URL.Query()
			if v := q.Get("lastUpdatedAfter"); v != "" && q.Get("statusTimestampAfter") == "" {
				q.Set("statusTimestampAfter", v)
				q.Del("lastUpdatedAfter")
				r2 := r.Clone(r.Context())
				r2.URL.RawQuery = q.Encode()
				r = r2
			}
		}
		h.ServeHTTP(w, r)
	})
}
