package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// TestTraces (H2): a call on each transport that carries a W3C traceparent
// is a server span of the client's trace, a child of the client's span,
// named after its A2A method, with the store's spans below it; no span of
// the server carries what the client planted in the task's text, context
// ID, metadata or the query.
func TestTraces(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ts := startServer(t, config{Backend: "mem", Tracing: tracingConfig{Provider: tp}})

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	traceparent := fmt.Sprintf("00-%s-%s-01", traceID, parentID)

	// JSON-RPC SendMessage: the task's ID comes back for the others.
	msg := map[string]any{"messageId": "m-SECRET", "contextId": "ctx-SECRET", "role": "ROLE_USER",
		"parts": []any{map[string]any{"text": "text-SECRET"}}, "metadata": map[string]any{"k": "meta-SECRET"}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{"message": msg}})
	var sent struct {
		Result struct {
			Task struct{ ID string }
		}
	}
	if err := json.Unmarshal([]byte(post(t, ts.httpBase+jsonrpcPath, string(body), traceparent)), &sent); err != nil || sent.Result.Task.ID == "" {
		t.Fatalf("SendMessage's answer: %v %+v", err, sent)
	}
	id := sent.Result.Task.ID

	// HTTP+JSON ListTasks by context, gRPC GetTask.
	req, _ := http.NewRequest(http.MethodGet, ts.httpBase+"/tasks?"+url.Values{"contextId": {"ctx-SECRET"}}.Encode(), nil)
	req.Header.Set("traceparent", traceparent)
	do(t, req)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", traceparent)
	if _, err := ts.pb.GetTask(ctx, &a2apb.GetTaskRequest{Id: id}); err != nil {
		t.Fatalf("gRPC GetTask: %v", err)
	}

	calls := map[string]string{"a2a.SendMessage": "store.create", "a2a.ListTasks": "store.list", "a2a.GetTask": "store.get"}
	var spans []sdktrace.ReadOnlySpan
	waitUntil(t, "the three calls' spans", func() bool {
		spans = rec.Ended()
		found := 0
		for _, s := range spans {
			if _, ok := calls[s.Name()]; ok {
				found++
			}
		}
		return found == len(calls)
	})
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
		if strings.Contains(fmt.Sprint(s.Name(), s.Attributes(), s.Events(), s.Status()), "SECRET") {
			t.Errorf("span %s carries a planted value: %v %v %v", s.Name(), s.Attributes(), s.Events(), s.Status())
		}
	}
	for call, storeOp := range calls {
		var server sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Name() == call {
				server = s
			}
		}
		if got := server.SpanContext().TraceID().String(); got != traceID {
			t.Errorf("%s: trace %s, want the client's %s", call, got, traceID)
		}
		if got := server.Parent().SpanID().String(); got != parentID || !server.Parent().IsRemote() {
			t.Errorf("%s: parent %s (remote %v), want the client's span %s", call, got, server.Parent().IsRemote(), parentID)
		}
		if !hasDescendant(spans, byID, server, storeOp) {
			t.Errorf("%s: no %s span below it", call, storeOp)
		}
	}
}

// hasDescendant reports whether a span named name has root among its
// ancestors.
func hasDescendant(spans []sdktrace.ReadOnlySpan, byID map[trace.SpanID]sdktrace.ReadOnlySpan, root sdktrace.ReadOnlySpan, name string) bool {
	for _, s := range spans {
		if s.Name() != name {
			continue
		}
		for p, ok := s, true; ok; p, ok = byID[p.Parent().SpanID()] {
			if p.SpanContext().SpanID() == root.SpanContext().SpanID() {
				return true
			}
		}
	}
	return false
}

func post(t *testing.T, u, body, traceparent string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	return do(t, req)
}

func do(t *testing.T, req *http.Request) string {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"error"`)) {
		t.Fatalf("%s %s: %s %s", req.Method, req.URL.Path, resp.Status, b)
	}
	return string(b)
}

// TestExporterFromEnv: tracing is off unless an OTLP endpoint is set, and
// off when the SDK is disabled; the protocol variables choose gRPC, the
// default is HTTP; an unknown -otel-traces is refused.
func TestExporterFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "none"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "otlp-http"},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp-grpc"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, "otlp-http"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_SDK_DISABLED": "true"}, "none"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_TRACES_EXPORTER": "none"}, "none"},
	} {
		if got := exporterFromEnv(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%v: %s, want %s", c.env, got, c.want)
		}
	}
	if _, _, err := (tracingConfig{Exporter: "jaeger"}).tracerProvider(t.Context()); err == nil || !strings.Contains(err.Error(), "-otel-traces") {
		t.Errorf("an unknown exporter: %v, want an error naming -otel-traces", err)
	}
}
