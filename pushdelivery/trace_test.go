package pushdelivery

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestDeliverySpans (H2): with a tracer each POST is a client span, a
// child of the span the push sender was called under (the write that
// produced the event), and the webhook receives that attempt's span as
// its traceparent; a failed attempt's span carries the failure's class
// and status, never the URL past its host, the token or the credentials
// ("SECRET" planted in each; every span grepped).
func TestDeliverySpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	rc := newReceiver(t, func(_ *http.Request, n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	h := newHarness(t, func(o *Options) { o.Tracer = tp.Tracer("test") })
	cfg := a2a.PushConfig{TaskID: "t1", ID: "c1", URL: rc.srv.URL + "/hook-SECRET?sig=query-SECRET", Token: "token-SECRET",
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-SECRET"}}
	if err := h.outbox.Save(h.ctx, &Record{TaskID: "t1", Dest: rc.srv.URL, Created: h.clock.Now(), Config: cfg}); err != nil {
		t.Fatal(err)
	}
	h.create("t1")
	h.update("t1", a2a.TaskStateCompleted)
	ctx, write := tp.Tracer("test").Start(h.ctx, "write")
	write.End()
	if err := h.w.Sender().SendPush(ctx, &cfg, &a2a.Task{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first attempt", func() bool { return h.outbox.rec("t1", "c1").Attempts == 1 })
	h.drive(time.Second, "done", func() bool { return h.outbox.rec("t1", "c1").Done })

	var attempts []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.Contains(fmt.Sprint(s.Name(), s.Attributes(), s.Events(), s.Status(), s.Links()), "SECRET") {
			t.Errorf("span %s carries a planted value: %v %v", s.Name(), s.Attributes(), s.Status())
		}
		if s.Name() == "a2a.push.deliver" {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 3 {
		t.Fatalf("%d attempt spans, want 3 (a failure, its retry, the next entry)", len(attempts))
	}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range attempts {
		byID[s.SpanContext().SpanID()] = s
		if s.Parent().SpanID() != write.SpanContext().SpanID() || s.SpanContext().TraceID() != write.SpanContext().TraceID() {
			t.Errorf("attempt span's parent %v, want the write's span %v", s.Parent(), write.SpanContext())
		}
	}
	first := attrs(attempts[0])
	if first["http.response.status_code"] != "503" || first["a2a.push.reason"] != Reason5xx || first["a2a.push.attempt"] != "1" ||
		first["server.address"] != "127.0.0.1" || attempts[0].Status().Description != Reason5xx {
		t.Errorf("failed attempt's span: %v, status %+v", first, attempts[0].Status())
	}
	if a := attrs(attempts[1]); a["a2a.push.reason"] != ReasonDelivered || a["a2a.push.attempt"] != "2" || a["a2a.task.revision"] != "1" {
		t.Errorf("retry's span: %v", a)
	}
	hits := rc.hits()
	if len(hits) != 2 {
		t.Fatalf("%d deliveries, want 2", len(hits))
	}
	for i, hit := range hits {
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(h.ctx, propagation.HeaderCarrier(hit.header)))
		if sc.TraceID() != write.SpanContext().TraceID() || byID[sc.SpanID()] == nil {
			t.Errorf("delivery %d: traceparent %q, want an attempt span of the write's trace", i, hit.header.Get("traceparent"))
		}
	}
}

// TestNoTracerNoTraceparent: without a tracer a POST carries no trace
// context, whatever the sender was called under.
func TestNoTracerNoTraceparent(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	rc := newReceiver(t, nil)
	h := newHarness(t, nil)
	h.config("t1", "c1", rc.srv.URL)
	h.create("t1")
	ctx, write := tp.Tracer("test").Start(h.ctx, "write")
	defer write.End()
	if err := h.w.Sender().SendPush(ctx, &a2a.PushConfig{TaskID: "t1", ID: "c1"}, &a2a.Task{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "delivered", func() bool { return len(rc.hits()) == 1 })
	if got := rc.hits()[0].header.Get("traceparent"); got != "" {
		t.Errorf("traceparent %q without a tracer", got)
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}
