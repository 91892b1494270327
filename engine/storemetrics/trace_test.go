package storemetrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
)

// TestSpans (H2): with a tracer every operation is a span, a child of the
// caller's, named store.<operation> and carrying the backend, the operation
// and its outcome; a page's span carries its shape and cost; no span holds
// a task ID, a filter's value, task content or an error's text — a test
// that plants "SECRET" in each and greps every span for it.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(t.Context())
	m := storemetrics.New(namingStore{memstore.New(memstore.Options{})}, storemetrics.Options{Backend: "mem", Tracer: tp.Tracer("test")})

	ctx, parent := tp.Tracer("test").Start(t.Context(), "request")
	task := &a2a.Task{ID: "task-SECRET", ContextID: "ctx-SECRET", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("text-SECRET"))}}
	if _, err := m.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, "missing-SECRET"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get of a missing task: %v", err)
	}
	resp, err := m.List(ctx, &engine.ListRequest{ContextID: "ctx-SECRET", Status: a2a.TaskStateWorking, PageSize: 7, IncludeTotalSize: true})
	if err != nil || len(resp.Tasks) != 1 {
		t.Fatalf("list: %v, %d tasks", err, len(resp.Tasks))
	}
	parent.End()

	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want create, get, list and the request", len(spans))
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
		if strings.Contains(fmt.Sprint(s.Name(), s.Attributes(), s.Events(), s.Status(), s.Links()), "SECRET") {
			t.Errorf("span %s carries a planted value: %v %v %v", s.Name(), s.Attributes(), s.Events(), s.Status())
		}
	}
	want := map[string]string{"store.create": "ok", "store.get": "not_found", "store.list": "ok"}
	for name, outcome := range want {
		s, ok := byName[name]
		if !ok {
			t.Fatalf("no span %s among %d", name, len(spans))
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s is not a child of the caller's span", name)
		}
		attrs := attrMap(s)
		if attrs["a2astore.backend"] != "mem" || attrs["a2astore.outcome"] != outcome {
			t.Errorf("%s attributes %v, want backend mem, outcome %s", name, attrs, outcome)
		}
	}
	if st := byName["store.get"].Status(); st.Description != "not_found" {
		t.Errorf("failed get's status %+v, want the outcome class only", st)
	}
	list := attrMap(byName["store.list"])
	for k, v := range map[string]string{"a2astore.list.page_size": "7", "a2astore.list.tasks": "1",
		"a2astore.list.total_size": "true", "a2astore.list.filters": `["context","status"]`} {
		if list[k] != v {
			t.Errorf("list span %s = %q, want %q (all: %v)", k, list[k], v, list)
		}
	}
	if list["a2astore.list.examined"] == "" {
		t.Errorf("list span lacks the entries examined: %v", list)
	}
}

// namingStore's Get errors name the task, as a backend's may.
type namingStore struct{ engine.Store }

func (s namingStore) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	rec, err := s.Store.Get(ctx, id)
	if err != nil {
		err = fmt.Errorf("get %s: %w", id, err)
	}
	return rec, err
}

func attrMap(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// TestNoTracerNoAllocations: without a tracer the decorator adds no
// allocation to a Get (the span machinery stays off the hot path).
func TestNoTracerNoAllocations(t *testing.T) {
	bare := memstore.New(memstore.Options{})
	m := storemetrics.New(bare, storemetrics.Options{Backend: "mem"})
	ctx := t.Context()
	if _, err := m.Create(ctx, &a2a.Task{ID: "t", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	get := func(s engine.Store) func() {
		return func() {
			if _, err := s.Get(ctx, "t"); err != nil {
				t.Fatal(err)
			}
		}
	}
	base, decorated := testing.AllocsPerRun(200, get(bare)), testing.AllocsPerRun(200, get(m))
	if decorated > base {
		t.Errorf("Get allocates %v times through the decorator, %v bare: want no more", decorated, base)
	}
}

// An operation called without a span in its context (background work)
// makes no span: at full sampling each would be a trace of its own.
func TestNoSpanWithoutParent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(t.Context())
	m := storemetrics.New(memstore.New(memstore.Options{}), storemetrics.Options{Backend: "mem", Tracer: tp.Tracer("test")})
	if _, err := m.Create(t.Context(), &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.List(t.Context(), &engine.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	if spans := rec.Ended(); len(spans) != 0 {
		t.Errorf("%d spans without a parent, want none (first: %s)", len(spans), spans[0].Name())
	}
}
