package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/a2astore/a2astore/internal/pgtest"
)

// BenchmarkTracingOverhead (#56, H2): what tracing costs the server per
// call — a blocking SendMessage (the synthetic agent's status update and
// artifact: a create and three updates) and a 50-task ListTasks page, over
// JSON-RPC on loopback, on mem and pg, with tracing off (no middleware, no
// tracer: the default), and on with 1 % and 100 % of the calls sampled
// (the SDK's parent-based ratio sampler, as OTEL_TRACES_SAMPLER=
// parentbased_traceidratio sets it; calls arrive without a traceparent).
// Spans go through the SDK's batch processor to an exporter that drops
// them, so no network is measured. cpu-us/op is the process's CPU per
// call (client and server: the client's share is the same in every
// mode, the difference is the server's tracing); spans/op the spans
// exported per call. Compare with benchstat -col /tracing.
func BenchmarkTracingOverhead(b *testing.B) {
	for _, backend := range []string{"mem", "pg"} {
		for _, mode := range []struct {
			name    string
			sampler sdktrace.Sampler // nil: tracing off
		}{
			{"off", nil},
			{"1%", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))},
			{"100%", sdktrace.ParentBased(sdktrace.AlwaysSample())},
		} {
			b.Run(fmt.Sprintf("backend=%s/tracing=%s", backend, mode.name), func(b *testing.B) {
				cfg := config{Backend: backend, Agent: agentConfig{StatusUpdates: 1, ArtifactBytes: 64}}
				if backend == "pg" {
					cfg.PGDSN = pgtest.DSN(b)
				}
				exp := &countingExporter{}
				cfg.Tracing = tracingConfig{Exporter: "none"}
				if mode.sampler != nil {
					tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(mode.sampler), sdktrace.WithBatcher(exp))
					b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
					cfg.Tracing = tracingConfig{Provider: tp}
				}
				ts := startServer(b, cfg)
				seedDirect(b, ts, 1000)
				c := ts.clients[a2a.TransportProtocolJSONRPC]
				flush := func() { // export what was ended so far (the seeding's spans, before a measure)
					if tp, ok := cfg.Tracing.Provider.(*sdktrace.TracerProvider); ok {
						_ = tp.ForceFlush(context.Background())
					}
				}
				measure := func(b *testing.B, call func()) {
					b.ReportAllocs()
					flush()
					spans0, cpu0 := exp.spans(), cpuTime()
					for b.Loop() {
						call()
					}
					b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
					flush()
					b.ReportMetric(float64(exp.spans()-spans0)/float64(b.N), "spans/op")
				}
				b.Run("op=SendMessage", func(b *testing.B) {
					measure(b, func() {
						msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("bench"))
						res, err := c.SendMessage(b.Context(), &a2a.SendMessageRequest{Message: msg})
						if task, ok := res.(*a2a.Task); err != nil || !ok || task.Status.State != a2a.TaskStateCompleted {
							b.Fatalf("SendMessage: %v %v", res, err)
						}
					})
				})
				b.Run("op=ListTasks/page=50", func(b *testing.B) {
					measure(b, func() {
						resp, err := c.ListTasks(b.Context(), &a2a.ListTasksRequest{PageSize: 50})
						if err != nil || len(resp.Tasks) != 50 {
							b.Fatalf("ListTasks: %v", err)
						}
					})
				})
			})
		}
	}
}

// countingExporter drops the spans it is given, counting them.
type countingExporter struct{ n atomic.Int64 }

var _ sdktrace.SpanExporter = (*countingExporter)(nil)

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.n.Add(int64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

func (e *countingExporter) spans() int64 { return e.n.Load() }
