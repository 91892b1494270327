package engine

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// A log entry keeps the W3C trace context of the write that made it
// (LogEntry.Trace, SPEC H2), so that whoever delivers its event later —
// another instance sharing the store, or this one after a restart — can
// carry the writer's trace on. Only the traceparent is kept: a version,
// the trace and span IDs and the sampled flag, 55 bytes that hold no task
// content, token or credential. A client's tracestate and baggage are
// not kept: they are free text of the client's, unbounded by the store.
// Only a sampled span context is kept: an unsampled trace records nothing
// to join, and a store with tracing off pays nothing.

// TraceParentLen is the length of a traceparent LogEntry.Trace holds.
const TraceParentLen = 55

// TraceParent is the traceparent of ctx's span (version 00, flags 01),
// or "" when ctx has no valid, sampled span context: what a LogStore
// records as LogEntry.Trace of a write made under ctx (H2).
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return formatTraceParent(sc)
}

func formatTraceParent(sc trace.SpanContext) string {
	b := make([]byte, 0, TraceParentLen)
	b = append(b, "00-"...)
	b = append(b, sc.TraceID().String()...)
	b = append(b, '-')
	b = append(b, sc.SpanID().String()...)
	b = append(b, '-')
	if sc.IsSampled() {
		return string(append(b, "01"...))
	}
	return string(append(b, "00"...))
}

// ParseTraceParent is the remote span context a LogEntry.Trace names, and
// whether it is one: exactly what TraceParent writes (version 00,
// lowercase hex, non-zero IDs, flags 00 or 01). Anything else — a value
// written by hand, truncated or corrupted — is refused, so that no
// garbage becomes a span's parent (H2).
func ParseTraceParent(s string) (trace.SpanContext, bool) {
	if len(s) != TraceParentLen || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(s[3:35]) // lowercase hex, not all zero
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(s[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags trace.TraceFlags
	switch s[53:] {
	case "00":
	case "01":
		flags = trace.FlagsSampled
	default:
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}), true
}

// ValidTraceParent reports whether s is "" or a traceparent
// ParseTraceParent accepts: what a LogStore keeps as LogEntry.Trace. A
// store reading a stored value that is neither returns "" in its place.
func ValidTraceParent(s string) bool {
	if s == "" {
		return true
	}
	_, ok := ParseTraceParent(s)
	return ok
}
