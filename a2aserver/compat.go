package a2aserver

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/a2astore/a2astore/engine"
)

// GRPCRequestValidator is a gRPC unary server interceptor that rejects the
// arguments a2a-go's protobuf conversion (v2.3.1) would otherwise drop or
// reinterpret silently, so gRPC answers INVALID_ARGUMENT like JSON-RPC and
// HTTP+JSON do (W3, L3):
//
//   - a negative history_length in ListTasks, GetTask or a SendMessage's
//     configuration (pbconv turns it into "no limit"),
//   - a status enum value A2A does not define in ListTasks (pbconv turns
//     it into "any state"), and
//   - a status_timestamp_after in ListTasks whose seconds or nanos are out
//     of the range a google.protobuf.Timestamp allows (pbconv normalizes
//     them into some other instant).
//
// The message is the fixed "invalid params": the value is never echoed.
// The status carries a google.rpc.ErrorInfo with reason INVALID_PARAMS in
// the A2A domain, as a2a-go's own gRPC errors do (W10): clients that
// classify gRPC errors by reason (the JavaScript and Python SDKs) see
// InvalidParamsError, not an unclassified INVALID_ARGUMENT.
// Install it with grpc.NewServer(grpc.UnaryInterceptor(GRPCRequestValidator)),
// and GRPCStreamRequestValidator for the streaming methods.
func GRPCRequestValidator(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if err := validateGRPCRequest(req); err != nil {
		return nil, err
	}
	return next(ctx, req)
}

// GRPCStreamRequestValidator is GRPCRequestValidator for the streaming
// methods (a SendStreamingMessage's configuration): the call fails with
// its error when the request message arrives.
func GRPCStreamRequestValidator(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	return next(srv, validatingStream{ss})
}

// validatingStream checks each request message it receives.
type validatingStream struct{ grpc.ServerStream }

func (s validatingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return validateGRPCRequest(m)
}

// validateGRPCRequest returns errGRPCInvalidParams for a request a2a-go's
// conversion would change silently (see GRPCRequestValidator), else nil.
func validateGRPCRequest(req any) error {
	switch r := req.(type) {
	case *a2apb.ListTasksRequest:
		if r.HistoryLength != nil && r.GetHistoryLength() < 0 {
			return errGRPCInvalidParams
		}
		if _, known := a2apb.TaskState_name[int32(r.GetStatus())]; !known {
			return errGRPCInvalidParams
		}
		if ts := r.GetStatusTimestampAfter(); ts != nil && ts.CheckValid() != nil {
			return errGRPCInvalidParams
		}
	case *a2apb.GetTaskRequest:
		if r.HistoryLength != nil && r.GetHistoryLength() < 0 {
			return errGRPCInvalidParams
		}
	case *a2apb.SendMessageRequest:
		if c := r.GetConfiguration(); c != nil && c.HistoryLength != nil && c.GetHistoryLength() < 0 {
			return errGRPCInvalidParams
		}
		// A data part whose value is not an object: a2a-go's conversion
		// keeps an empty object in its place (GetStructValue().AsMap()),
		// where JSON-RPC and HTTP+JSON refuse it (checkServable).
		for _, p := range r.GetMessage().GetParts() {
			if d := p.GetData(); d != nil && d.GetStructValue() == nil {
				return errGRPCInvalidParams
			}
		}
	}
	return nil
}

// errGRPCInvalidParams is GRPCRequestValidator's answer.
var errGRPCInvalidParams = grpcA2AError(codes.InvalidArgument, a2a.ErrInvalidParams, msgInvalidParams)

// grpcA2AError is the gRPC status error of an A2A error: code, message and
// a google.rpc.ErrorInfo with the error's reason in the A2A domain, the
// shape a2a-go v2.3.1 gives its own errors.
func grpcA2AError(code codes.Code, sentinel error, msg string) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: a2a.ErrorReason(sentinel), Domain: a2a.ProtocolDomain})
	if err != nil {
		panic(err) // an ErrorInfo always marshals
	}
	return st.Err()
}

// GRPCListTasksValidator is GRPCRequestValidator under its former name,
// kept for existing callers.
var GRPCListTasksValidator = GRPCRequestValidator

// RESTQueryCompat wraps a2a-go's HTTP+JSON handler (a2asrv.NewRESTHandler)
// so that GET /tasks honours every ListTasks query parameter. In a2a-go
// v2.3.1 the server binding silently ignores two of them — its query parser
// has no case for pointer fields, so historyLength and statusTimestampAfter
// never reach the request handler — and a2a-go's own REST client sends the
// status-timestamp filter as lastUpdatedAfter (formatted as RFC 3339 without
// fractional seconds).
//
// The wrapper parses historyLength and statusTimestampAfter (or, when that
// is absent, lastUpdatedAfter) itself and hands them to the TaskStore
// adapter through the request context; the adapter applies them when the
// request arrived without them, or answers ErrInvalidParams (HTTP 400) when
// they do not parse. Everything else — routing, error bodies — stays
// a2a-go's. Only stores built with TaskStore see the parameters.
//
// The sub-second precision the a2a-go client drops before sending
// lastUpdatedAfter cannot be recovered here.
//
// It does the same for GET /tasks/{id}/pushNotificationConfigs, whose
// pageSize and pageToken a2a-go v2.3.1 never reads: PushConfigPages takes
// them from the request context (SPEC N1: push configs list by pages on
// every transport).
func RESTQueryCompat(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.RawQuery != "" {
			r = withRESTQuery(r)
		}
		h.ServeHTTP(w, r)
	})
}

// withRESTQuery is r with the query parameters a2a-go drops in its context.
func withRESTQuery(r *http.Request) *http.Request {
	path := r.URL.Path
	switch {
	case path == "/tasks":
		if p, ok := parseRESTListParams(r.URL.Query()); ok {
			return r.WithContext(context.WithValue(r.Context(), restListKey{}, p))
		}
	case strings.HasPrefix(path, "/tasks/") && strings.HasSuffix(path, "/pushNotificationConfigs"):
		q := r.URL.Query()
		p := restPushPage{size: q.Get("pageSize"), token: q.Get("pageToken")}
		return r.WithContext(context.WithValue(r.Context(), restPushPageKey{}, p))
	}
	return r
}

type restPushPageKey struct{}

// restPushPage is the page of push configs an HTTP+JSON request asked for.
type restPushPage struct{ size, token string }

type restListKey struct{}

// restListParams are the ListTasks query parameters a2a-go's HTTP+JSON
// binding drops.
type restListParams struct {
	historyLength *int
	statusAfter   *time.Time
	invalid       bool // a parameter was present but did not parse
}

func parseRESTListParams(q url.Values) (restListParams, bool) {
	var p restListParams
	if v := q.Get("historyLength"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			p.invalid = true
		} else {
			p.historyLength = &n
		}
	}
	v := q.Get("statusTimestampAfter")
	if v == "" {
		v = q.Get("lastUpdatedAfter")
	}
	if v != "" {
		ts, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			p.invalid = true
		} else {
			p.statusAfter = &ts
		}
	}
	return p, p.invalid || p.historyLength != nil || p.statusAfter != nil
}

// applyRESTListParams fills what RESTQueryCompat parsed into an engine
// request that arrived without it.
func applyRESTListParams(ctx context.Context, req *engine.ListRequest) error {
	p, ok := ctx.Value(restListKey{}).(restListParams)
	if !ok {
		return nil
	}
	if p.invalid {
		return engine.ErrInvalidArgument
	}
	if req.HistoryLength == nil {
		req.HistoryLength = p.historyLength
	}
	if req.StatusTimestampAfter == nil {
		req.StatusTimestampAfter = p.statusAfter
	}
	return nil
}
