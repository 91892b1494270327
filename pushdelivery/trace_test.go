package pushdelivery

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
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

// retraced is a LogStore whose ReadLog replaces the Trace of the
// entries at the revisions in traces (a value written by hand into the
// store, or damaged there).
type retraced struct {
	engine.LogStore
	traces map[int64]string
}

func (r retraced) ReadLog(ctx context.Context, id a2a.TaskID, after int64, limit int) ([]engine.LogEntry, error) {
	out, err := r.LogStore.ReadLog(ctx, id, after, limit)
	for i := range out {
		if tp, ok := r.traces[out[i].Revision]; ok {
			out[i].Trace = tp
		}
	}
	return out, err
}

// TestDeliveryParentFromLog (H2): a worker that never saw the writes (no
// SendPush noted them: another instance made them, or this one before a
// restart) makes each attempt a child of the traceparent the delivered
// log entry keeps, the span of the write that made it, and sends it on to
// the webhook; an entry whose stored trace is no valid traceparent (a
// wrong version, uppercase hex, a zero trace ID, extra flags, a
// traceparent with a tracestate glued on) is ignored: its attempt starts a
// trace of its own, with no part of the stored value in it.
func TestDeliveryParentFromLog(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	rc := newReceiver(t, nil)
	bad := []string{
		"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03",
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01,k=v",
	}
	traces := map[int64]string{}
	for i, v := range bad {
		traces[int64(i+2)] = v
	}
	h := newHarness(t, func(o *Options) {
		o.Tracer = tp.Tracer("test")
		o.Store = retraced{o.Store, traces}
	})
	h.config("t1", "c1", rc.srv.URL)
	ctx, write := tp.Tracer("test").Start(h.ctx, "write")
	if _, err := h.store.Create(ctx, &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}); err != nil {
		t.Fatal(err)
	}
	write.End()
	for range bad {
		h.update("t1", a2a.TaskStateWorking)
	}
	h.w.Wake("t1")
	byRev := map[string]sdktrace.ReadOnlySpan{}
	eventually(t, "every entry delivered, its span ended", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "a2a.push.deliver" {
				byRev[attrs(s)["a2a.task.revision"]] = s
			}
		}
		return len(rc.hits()) == 1+len(bad) && len(byRev) == 1+len(bad)
	})
	first := byRev["1"]
	if first == nil || first.Parent().SpanID() != write.SpanContext().SpanID() || !first.Parent().IsRemote() ||
		first.SpanContext().TraceID() != write.SpanContext().TraceID() {
		t.Fatalf("attempt of revision 1: %v, want a child of the write's span %v (remote)", first, write.SpanContext())
	}
	for _, hit := range rc.hits() {
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(h.ctx, propagation.HeaderCarrier(hit.header)))
		if hit.rev == 1 && (sc.TraceID() != write.SpanContext().TraceID() || sc.SpanID() != first.SpanContext().SpanID()) {
			t.Errorf("revision 1 reached the webhook with traceparent %q, want the attempt's span in the write's trace", hit.header.Get("traceparent"))
		}
		if hit.rev > 1 && sc.TraceID() == write.SpanContext().TraceID() {
			t.Errorf("revision %d reached the webhook in the write's trace", hit.rev)
		}
	}
	for rev, v := range traces {
		s := byRev[strconv.FormatInt(rev, 10)]
		if s == nil {
			t.Fatalf("no attempt span of revision %d", rev)
		}
		if s.Parent().IsValid() || strings.Contains(s.SpanContext().TraceID().String(), "0af7651916cd43dd8448eb211c80319c") {
			t.Errorf("stored trace %q: attempt span's parent %v, trace %s; want a trace of its own", v, s.Parent(), s.SpanContext().TraceID())
		}
	}
}
