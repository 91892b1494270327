package pushdelivery

import (
	"context"
	"net/http"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
)

// Tracing of deliveries (SPEC H2). Each POST to a webhook is a client
// span, a child of the span of the write that produced the event, so
// that the client's trace runs on to the webhook; the POST carries the
// attempt's W3C traceparent, so the webhook's own spans join it too.
// The parent is, first, the traceparent the store kept with the
// delivered log entry (engine.LogEntry.Trace: the span of the store
// write that made that very revision, on whichever instance), as a
// remote parent; failing that, what a2a-go's push sender was called
// under in this process (the call's span, or in cluster mode the
// execution's), noted by Sender for the task's latest event. The entry's
// comes first because it is exact: the noted span is the latest event's,
// which for an older entry of a batch, or one another instance wrote
// after this one noted a write of its own, is another write's. So an
// attempt made by another process (a PostgreSQL outbox is shared by the
// instances) or after a restart joins the writer's trace too. A child,
// not a link: an entry has exactly one write that produced it, and the
// delivery is that write's work carried on (as pgcluster makes an
// execution the child of its call), so the trace reads the same
// whichever instance delivers. An attempt starts a trace of its own only
// when neither is known: the write was not sampled, the log entry was
// written before its store kept traces, the log was trimmed past the
// cursor (the task itself is sent), or the stored value is no valid
// traceparent (ignored, never trusted). A span never carries the
// webhook's URL past its host, the token, the credentials or an error's
// text.

// traceContext is the propagation format of the POSTs.
var traceContext = propagation.TraceContext{}

// Span attributes of an attempt.
var (
	attrMethod   = attribute.String("http.request.method", http.MethodPost)
	attrHost     = attribute.Key("server.address")
	attrStatus   = attribute.Key("http.response.status_code")
	attrAttempt  = attribute.Key("a2a.push.attempt")
	attrRevision = attribute.Key("a2a.task.revision")
	attrReason   = attribute.Key("a2a.push.reason")
)

// maxProducers bounds the tasks whose producing span a worker keeps; past
// it the kept ones are forgotten (their next deliveries start traces of
// their own).
const maxProducers = 10_000

// producers are the span contexts of the writes that produced each
// task's latest event, as the push sender saw them.
type producers struct {
	mu sync.Mutex
	m  map[a2a.TaskID]trace.SpanContext
}

// note records ctx's span as the producer of task's latest event.
func (w *Worker) note(ctx context.Context, task a2a.TaskID) {
	if w.o.Tracer == nil || task == "" {
		return
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	p := &w.producers
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[task]; !ok && len(p.m) >= maxProducers {
		clear(p.m)
	}
	if p.m == nil {
		p.m = make(map[a2a.TaskID]trace.SpanContext)
	}
	p.m[task] = sc
}

// producer is the span context noted for task (invalid when none).
func (w *Worker) producer(task a2a.TaskID) trace.SpanContext {
	p := &w.producers
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[task]
}

// startAttempt starts the span of a POST of rec's entry at revision rev,
// written under the traceparent written: a child of written when it is
// a valid traceparent, else of the span that produced the task's latest
// event when this process knows it; nil without Options.Tracer.
func (w *Worker) startAttempt(ctx context.Context, rec *Record, rev int64, written string) (context.Context, trace.Span) {
	if w.o.Tracer == nil {
		return ctx, nil
	}
	if sc, ok := engine.ParseTraceParent(written); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else if sc := w.producer(rec.TaskID); sc.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	ctx, span := w.o.Tracer.Start(ctx, "a2a.push.deliver", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attrMethod, attrHost.String(host(rec.Dest)), attrAttempt.Int(rec.Attempts+1), attrRevision.Int64(rev))
	}
	return ctx, span
}

// endAttempt ends an attempt's span with its status and reason (never
// the error's text, which may hold the URL).
func endAttempt(span trace.Span, status int, err error) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		reason := classify(status, err)
		span.SetAttributes(attrReason.String(reason))
		if status != 0 {
			span.SetAttributes(attrStatus.Int(status))
		}
		if reason != ReasonDelivered {
			span.SetStatus(codes.Error, reason)
		}
	}
	span.End()
}

// injectTrace sets the traceparent (and tracestate) header of the
// attempt's span in ctx; nothing without Options.Tracer.
func (w *Worker) injectTrace(ctx context.Context, h http.Header) {
	if w.o.Tracer != nil {
		traceContext.Inject(ctx, propagation.HeaderCarrier(h))
	}
}
