package pushdelivery

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/pebblestore"
)

// TestTraceAfterRestart (H2): events written under a sampled span to a
// Pebble store, with their webhook's record in its outbox, and delivered
// only after the process that wrote them is gone (store and outbox
// closed, opened again by a new worker that never saw the writes), are
// attempts in the writer's trace, children of the write's span, and the
// webhook receives that trace as its traceparent.
func TestTraceAfterRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() (*pebblestore.Store, *Local) {
		t.Helper()
		s, err := pebblestore.Open(filepath.Join(dir, "tasks"), pebblestore.Options{Log: true, Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		ob, err := OpenPebble(filepath.Join(dir, "push"), s, LocalOptions{Logger: pebblelog.Quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		return s, ob
	}
	var mu sync.Mutex
	var got []string // the traceparents the webhook received
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))

	// The process that writes, and dies before delivering.
	s, ob := open()
	ctx := context.Background()
	if err := ob.Save(ctx, &Record{TaskID: "t1", Dest: hook.URL, Created: time.Now(),
		Config: a2a.PushConfig{TaskID: "t1", ID: "c1", URL: hook.URL}}); err != nil {
		t.Fatal(err)
	}
	wctx, write := tp.Tracer("test").Start(ctx, "write")
	task := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	r, err := s.Create(wctx, task)
	if err != nil {
		t.Fatal(err)
	}
	task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted}
	ev := &a2a.TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c", Status: task.Status}
	if _, err := s.Replace(engine.WithEvent(wctx, ev), task, r.Revision); err != nil {
		t.Fatal(err)
	}
	write.End()
	if err := ob.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The next process delivers.
	s, ob = open()
	defer s.Close()
	defer ob.Close()
	w := Start(ctx, Options{Outbox: ob, Store: s, Tracer: tp.Tracer("test"),
		Client: NewClient(ClientOptions{AllowPrivate: true}), Logger: slog.New(slog.DiscardHandler)})
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = w.Close(cctx)
	}()
	w.Wake("t1")
	var attempts []sdktrace.ReadOnlySpan
	eventually(t, "both entries delivered, their spans ended", func() bool {
		attempts = attempts[:0]
		for _, sp := range rec.Ended() {
			if sp.Name() == "a2a.push.deliver" {
				attempts = append(attempts, sp)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return len(attempts) == 2 && len(got) == 2
	})
	want := write.SpanContext()
	for _, sp := range attempts {
		if sp.SpanContext().TraceID() != want.TraceID() || sp.Parent().SpanID() != want.SpanID() || !sp.Parent().IsRemote() {
			t.Errorf("attempt span in trace %s with parent %s, want a child of the write's span %s in trace %s",
				sp.SpanContext().TraceID(), sp.Parent().SpanID(), want.SpanID(), want.TraceID())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, h := range got {
		hdr := http.Header{}
		hdr.Set("traceparent", h)
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(hdr)))
		if sc.TraceID() != want.TraceID() {
			t.Errorf("POST %d: traceparent %q, want the write's trace %s", i, h, want.TraceID())
		}
	}
}
