package pgcluster

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing of cluster work (SPEC H2). A work item's stored body carries,
// beside a2a-go's payload, the W3C trace context of the call that wrote
// it (traceparent and tracestate, as the headers spell them); the
// instance that claims the item runs the execution, or the cancelation,
// in a span that is a child of that context. A child, not a link: the
// item has exactly one producer, the call, and the execution is that
// call's work carried on elsewhere, so the client's trace runs on through
// the executing instance, its store writes and the push deliveries of
// their events. A retried or taken-over execution is another child of
// the same call, beside the first.

// workTrace is the trace context a work item's body carries: a
// propagation.TextMapCarrier of the W3C fields.
type workTrace struct {
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

var _ propagation.TextMapCarrier = (*workTrace)(nil)

func (w *workTrace) Get(key string) string {
	switch key {
	case "traceparent":
		return w.TraceParent
	case "tracestate":
		return w.TraceState
	}
	return ""
}

func (w *workTrace) Set(key, value string) {
	switch key {
	case "traceparent":
		w.TraceParent = value
	case "tracestate":
		w.TraceState = value
	}
}

func (w *workTrace) Keys() []string { return []string{"traceparent", "tracestate"} }

// traceContext is the propagation format of work items.
var traceContext = propagation.TraceContext{}

// tracedPayload is a work item's stored body: a2a-go's payload with the
// trace fields beside its own (which a2a-go's decoding ignores).
type tracedPayload struct {
	*workqueue.Payload
	workTrace
}

// encodeWork is the stored body of p written under ctx: p's JSON with
// ctx's trace context, when it has one.
func encodeWork(ctx context.Context, p *workqueue.Payload) ([]byte, error) {
	var tc workTrace
	traceContext.Inject(ctx, &tc)
	return json.Marshal(tracedPayload{p, tc})
}

// reencodeWork is p's stored body keeping the trace context of body, the
// body p was decoded from.
func reencodeWork(body []byte, p *workqueue.Payload) ([]byte, error) {
	return json.Marshal(tracedPayload{p, workTraceOf(body)})
}

// workTraceOf reads the trace fields of a stored body (none when it has
// none or does not decode).
func workTraceOf(body []byte) workTrace {
	var tc workTrace
	_ = json.Unmarshal(body, &tc)
	return tc
}

// Span attributes of an execution.
var (
	attrInstance = attribute.Key("a2a.cluster.instance")
	attrAttempt  = attribute.Key("a2a.cluster.attempt")
)

// startWorkSpan starts the span of claimed item m's execution or
// cancelation on this instance, a child of the trace context its body
// carries; ctx unchanged without Options.Tracer.
func (q *workQueue) startWorkSpan(ctx context.Context, m *message) context.Context {
	if q.c.opts.Tracer == nil {
		return ctx
	}
	tc := workTraceOf(m.body)
	parent := traceContext.Extract(ctx, &tc)
	name := "a2a.cluster.execute"
	if m.payload.Type == workqueue.PayloadTypeCancel {
		name = "a2a.cluster.cancel"
	}
	ctx, span := q.c.opts.Tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(attrInstance.String(q.c.opts.Instance), attrAttempt.Int(m.attempt))
	}
	return context.WithValue(ctx, workSpanKey{}, span)
}

// workSpanKey keys the span startWorkSpan started.
type workSpanKey struct{}

// endWorkSpan ends the span startWorkSpan put in ctx, if any, with the
// class of the execution's error (never its text, which may quote the
// task).
func endWorkSpan(ctx context.Context, err error) {
	span, ok := ctx.Value(workSpanKey{}).(trace.Span)
	if !ok {
		return
	}
	if err != nil && span.IsRecording() {
		class := "error"
		switch {
		case errors.Is(err, ErrLeaseLost):
			class = "lease_lost"
		case errors.Is(err, ErrCanceled), errors.Is(err, context.Canceled):
			class = "canceled"
		}
		span.SetStatus(codes.Error, class)
	}
	span.End()
}
