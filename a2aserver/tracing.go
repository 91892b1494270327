package a2aserver

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
)

// tracerName names the tracer of the server's spans.
const tracerName = "github.com/a2astore/a2astore/a2aserver"

// traceContext is the only propagation format read: W3C traceparent and
// tracestate.
var traceContext = propagation.TraceContext{}

// Span attributes of an A2A call (H2): the transport and the A2A method,
// never a path, an ID, a header's value or content.
var (
	attrTransport = attribute.Key("a2a.transport")
	attrMethod    = attribute.Key("a2a.method")
)

// TraceHTTP wraps h, a listener's handler (JSON-RPC, HTTP+JSON, the agent
// card): every request is a server span named "a2a.http" until TraceMethod
// names it after its A2A method, a child of the W3C trace context the
// request carries (traceparent), so the store's spans (storemetrics) and
// the rest of the work join the client's trace (H2). The span records no
// path, query or header: REST paths carry task IDs.
func TraceHTTP(h http.Handler, tp trace.TracerProvider) http.Handler {
	tracer := tp.Tracer(tracerName)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, "a2a.http", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attrTransport.String("http")))
		defer span.End()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// TraceGRPC returns the gRPC server options that make every call a server
// span named after its gRPC method, a child of the W3C trace context in
// its metadata (H2); the span ends with the call's status code.
func TraceGRPC(tp trace.TracerProvider) []grpc.ServerOption {
	tracer := tp.Tracer(tracerName)
	start := func(ctx context.Context, method string) (context.Context, trace.Span) {
		md, _ := metadata.FromIncomingContext(ctx)
		ctx = traceContext.Extract(ctx, metadataCarrier(md))
		return tracer.Start(ctx, "a2a.grpc "+method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attrTransport.String("grpc")))
	}
	end := func(span trace.Span, err error) {
		if err != nil {
			code := grpcstatus.Code(err)
			span.SetAttributes(attribute.String("rpc.grpc.status_code", code.String()))
			span.SetStatus(codes.Error, code.String())
		}
		span.End()
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if untraced(info.FullMethod) {
			return handler(ctx, req)
		}
		ctx, span := start(ctx, info.FullMethod)
		resp, err := handler(ctx, req)
		end(span, err)
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if untraced(info.FullMethod) {
			return handler(srv, ss)
		}
		ctx, span := start(ss.Context(), info.FullMethod)
		err := handler(srv, tracedStream{ss, ctx})
		end(span, err)
		return err
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}

// untraced reports whether a gRPC method makes no span: the health
// service's, which probes call every few seconds.
func untraced(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/")
}

// tracedStream is a ServerStream whose context carries the call's span.
type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s tracedStream) Context() context.Context { return s.ctx }

// metadataCarrier reads a trace context from gRPC metadata.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// TraceMethod is a call interceptor that names the call's span (TraceHTTP's
// or TraceGRPC's) after its A2A method ("a2a.SendMessage") and marks it
// failed with the error's A2A class when the call fails. Put it first.
type TraceMethod struct{}

var _ a2asrv.CallInterceptor = TraceMethod{}

// Before implements a2asrv.CallInterceptor.
func (TraceMethod) Before(ctx context.Context, callCtx *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetName("a2a." + callCtx.Method())
		span.SetAttributes(attrMethod.String(callCtx.Method()))
	}
	return ctx, nil, nil
}

// After implements a2asrv.CallInterceptor. Only the error's class is
// recorded: an error's text may name a task or echo a client's input.
func (TraceMethod) After(ctx context.Context, _ *a2asrv.CallContext, resp *a2asrv.Response) error {
	if span := trace.SpanFromContext(ctx); resp.Err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, errorClass(resp.Err))
	}
	return nil
}

// errorClasses name the A2A errors a span may record, in the order they are
// tried.
var errorClasses = []struct {
	err   error
	class string
}{
	{a2a.ErrTaskNotFound, "task_not_found"},
	{a2a.ErrTaskNotCancelable, "task_not_cancelable"},
	{a2a.ErrInvalidParams, "invalid_params"},
	{a2a.ErrInvalidRequest, "invalid_request"},
	{a2a.ErrParseError, "parse_error"},
	{a2a.ErrMethodNotFound, "method_not_found"},
	{a2a.ErrUnsupportedOperation, "unsupported_operation"},
	{a2a.ErrPushNotificationNotSupported, "push_notification_not_supported"},
	{a2a.ErrUnsupportedContentType, "unsupported_content_type"},
	{a2a.ErrVersionNotSupported, "version_not_supported"},
	{a2a.ErrExtensionSupportRequired, "extension_support_required"},
	{a2a.ErrUnauthenticated, "unauthenticated"},
	{a2a.ErrUnauthorized, "unauthorized"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline_exceeded"},
}

// errorClass is err's A2A class, "internal" for any other error.
func errorClass(err error) string {
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			return c.class
		}
	}
	return "internal"
}
