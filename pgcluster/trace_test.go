package pgcluster

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestWorkTrace (H2): a work item's body carries the writer's trace
// context beside a2a-go's payload, which decodes from it unchanged; the
// re-encodings of a claimed item (nameTask, a hand-over) keep it; a
// writer without a span writes exactly a2a-go's payload.
func TestWorkTrace(t *testing.T) {
	p := &workqueue.Payload{Type: workqueue.PayloadTypeExecute, TaskID: "t1",
		ExecuteRequest: &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))},
		CallContext:    map[string]any{"tenant": "x"}}
	plain, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := encodeWork(context.Background(), p); err != nil || string(got) != string(plain) {
		t.Fatalf("untraced body %s (%v), want a2a-go's payload %s", got, err, plain)
	}

	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	defer span.End()
	body, err := encodeWork(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	decoded := new(workqueue.Payload)
	if err := json.Unmarshal(body, decoded); err != nil {
		t.Fatal(err)
	}
	if again, _ := json.Marshal(decoded); string(again) != string(plain) {
		t.Errorf("payload decoded from the traced body %s, want %s", again, plain)
	}
	check := func(what string, body []byte) {
		t.Helper()
		tc := workTraceOf(body)
		got := trace.SpanContextFromContext(traceContext.Extract(context.Background(), &tc))
		if !got.IsRemote() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
			t.Errorf("%s: trace context %v, want the writer's %v", what, got, span.SpanContext())
		}
	}
	check("written", body)
	decoded.ExecuteRequest.Message.TaskID = "t1"
	renamed, err := reencodeWork(body, decoded)
	if err != nil {
		t.Fatal(err)
	}
	check("re-encoded", renamed)
	var back workqueue.Payload
	if err := json.Unmarshal(renamed, &back); err != nil || back.ExecuteRequest.Message.TaskID != "t1" {
		t.Errorf("re-encoded payload %+v (%v)", back, err)
	}
}
