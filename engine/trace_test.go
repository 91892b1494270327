package engine_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
)

// TestTraceParent (H2): a log entry keeps the traceparent of a valid,
// sampled span context and nothing else (no span, an unsampled one);
// ParseTraceParent takes back exactly what TraceParent writes and
// refuses every other value, so that no stored garbage becomes a parent.
func TestTraceParent(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ts, _ := trace.ParseTraceState("k=v")
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled | 0x02, TraceState: ts})
	const want = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if got := engine.TraceParent(trace.ContextWithSpanContext(context.Background(), sampled)); got != want {
		t.Fatalf("TraceParent of a sampled span: %q, want %q (no tracestate, the sampled flag alone)", got, want)
	}
	if got := engine.TraceParent(context.Background()); got != "" {
		t.Errorf("TraceParent without a span: %q", got)
	}
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
	if got := engine.TraceParent(trace.ContextWithSpanContext(context.Background(), unsampled)); got != "" {
		t.Errorf("TraceParent of an unsampled span: %q", got)
	}
	sc, ok := engine.ParseTraceParent(want)
	if !ok || sc.TraceID() != tid || sc.SpanID() != sid || !sc.IsSampled() || !sc.IsRemote() || sc.TraceState().Len() != 0 {
		t.Fatalf("ParseTraceParent(%q) = %v, %v", want, sc, ok)
	}
	if sc, ok := engine.ParseTraceParent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"); !ok || sc.IsSampled() {
		t.Errorf("unsampled traceparent: %v, %v", sc, ok)
	}
	for _, bad := range []string{
		"",
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", // another version
		"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01", // uppercase
		"00-00000000000000000000000000000000-b7ad6b7169203331-01", // zero trace ID
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", // zero span ID
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03", // other flags
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01,k=v",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
		"00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
		"00-0af7651916cd43dd8448eb211c80319x-b7ad6b7169203331-01",
		"task text, not a trace at all, but 55 bytes long......",
	} {
		if sc, ok := engine.ParseTraceParent(bad); ok || sc.IsValid() {
			t.Errorf("ParseTraceParent(%q) accepted: %v", bad, sc)
		}
		if bad != "" && engine.ValidTraceParent(bad) {
			t.Errorf("ValidTraceParent(%q)", bad)
		}
	}
	if !engine.ValidTraceParent("") || !engine.ValidTraceParent(want) {
		t.Error("ValidTraceParent refuses \"\" or a traceparent")
	}
}
