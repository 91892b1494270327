package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/internal/pgtest"
)

// traceInjector is a client transport that sends the W3C trace context of
// each request's context, as an instrumented A2A client does.
type traceInjector struct{ next http.RoundTripper }

func (t traceInjector) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	return t.next.RoundTrip(req)
}

// hookHeaders are the headers of one POST a webhook took.
type hookHeaders struct{ traceparent, token, authorization string }

// TestTraceAcrossCluster (H2): one SendMessage from a traced client to
// instance a of a two-instance cluster, executed by instance b, whose
// events b delivers to a webhook on loopback, is ONE trace: the client's
// span, a's call span with the work item's insert below it, b's execution
// span (a child of a's call through the work item's traceparent), b's
// store writes with their PostgreSQL statements, and b's delivery
// attempts, each of which the webhook received as its traceparent. Every
// span since the client's call belongs to that trace and hangs from the
// client's span. The message text, context ID, message ID, metadata
// values, the webhook's path and query, its token and its credentials are
// planted with "SECRET"; the webhook receives the token and credentials
// (they did flow), and no span of either instance — name, attribute,
// event, status or link — carries any of them. Each delivery's parent is
// the store write that made its log entry (the traceparent the entry
// keeps).
func TestTraceAcrossCluster(t *testing.T) { traceAcrossCluster(t, "b") }

// TestTraceDeliveredByAnotherInstance (H2): as TestTraceAcrossCluster,
// but the events b writes are delivered by a, which took the call and
// executed nothing (b's push worker is stopped, the PostgreSQL outbox is
// shared): a never saw the writes, so each attempt's parent comes from
// the log entry it delivers, which keeps the traceparent of b's store
// write. The trace still runs from the client through a's call, b's
// execution and store writes, to a's deliveries and the webhook.
func TestTraceDeliveredByAnotherInstance(t *testing.T) { traceAcrossCluster(t, "a") }

// traceAcrossCluster is TestTraceAcrossCluster with the deliveries made
// by instance deliverer ("a", which takes the call, or "b", which
// executes it).
func traceAcrossCluster(t *testing.T, deliverer string) {
	if testing.Short() {
		t.Skip("two cluster servers on PostgreSQL")
	}
	rec := tracetest.NewSpanRecorder()
	provider := func(instance string) *sdktrace.TracerProvider {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.instance.id", instance))))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return tp
	}
	dsn := pgtest.DSN(t)
	start := func(instance string) *testServer {
		return startServer(t, config{Backend: "pg", PGDSN: dsn, Push: pushOn,
			Agent:   agentConfig{StatusUpdates: 2, HistoryMessages: 1, ArtifactBytes: 8},
			Cluster: clusterConfig{Enabled: true, Instance: instance, Lease: 30 * time.Second, Retention: time.Hour, Poll: time.Hour},
			Tracing: tracingConfig{Provider: provider(instance)}})
	}
	a := start("a")
	b := start("b") // the instance that executes
	// a takes calls only: b claims the work; the deliverer's push worker
	// alone delivers its events.
	a.cluster.StopWork()
	idle := map[string]*testServer{"a": b, "b": a}[deliverer]
	if err := idle.pusher.Close(t.Context()); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var hooks []hookHeaders
	recv := &receiver{changed: make(chan struct{})}
	recv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		hooks = append(hooks, hookHeaders{req.Header.Get("traceparent"), req.Header.Get("A2A-Notification-Token"), req.Header.Get("Authorization")})
		mu.Unlock()
		recv.ServeHTTP(w, req)
	}))
	t.Cleanup(recv.Close)

	// The client: a's card, JSON-RPC, the trace context sent with each call.
	var card a2a.AgentCard
	getJSON(t, a.httpBase+a2asrv.WellKnownAgentCardPath, &card)
	client, err := a2aclient.NewFromCard(t.Context(), &card,
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}),
		a2aclient.WithJSONRPCTransport(&http.Client{Transport: traceInjector{http.DefaultTransport}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Destroy() })

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("text-SECRET"))
	msg.ID, msg.ContextID, msg.Metadata = "msgid-SECRET", "ctx-SECRET", map[string]any{"k": "meta-SECRET"}
	const token, creds = "token-SECRET", "cred-SECRET"
	began := time.Now()
	ctx, clientSpan := provider("client").Tracer("test").Start(t.Context(), "client SendMessage", trace.WithSpanKind(trace.SpanKindClient))
	res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{
		URL: recv.URL + "/hook-SECRET?key=query-SECRET", Token: token, Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: creds}}}})
	clientSpan.End()
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("SendMessage answered %T %+v, want the completed task", res, res)
	}
	if deliverer == "a" {
		// a hears of b's writes at its outbox's next rescan (a minute):
		// touch the task now, as a wake-up from b would.
		a.pusher.Wake(task.ID)
	}
	delivered := recv.deliveriesOf(t, task.ID)
	traceID := clientSpan.SpanContext().TraceID()

	// Wait for the spans that end after the answer: a's call, b's
	// execution, one delivery span per POST the webhook took.
	var spans []sdktrace.ReadOnlySpan
	waitUntil(t, "the call's, the execution's and every delivery's spans", func() bool {
		spans = rec.Ended()
		calls, execs, posts := 0, 0, 0
		for _, s := range spans {
			switch s.Name() {
			case "a2a.SendMessage":
				calls++
			case "a2a.cluster.execute":
				execs++
			case "a2a.push.deliver":
				posts++
			}
		}
		return calls == 1 && execs == 1 && posts >= len(delivered)
	})

	// No span carries a planted value.
	for _, s := range spans {
		if strings.Contains(fmt.Sprint(s.Name(), s.Attributes(), s.Events(), s.Status(), s.Links()), "SECRET") {
			t.Errorf("span %s of %s carries a planted value: %v %v %v %v", s.Name(), instanceOf(s), s.Attributes(), s.Events(), s.Status(), s.Links())
		}
	}

	// One trace, one tree under the client's span.
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var ours []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.StartTime().Before(began) {
			continue // the agent cards fetched when the servers started
		}
		ours = append(ours, s)
		byID[s.SpanContext().SpanID()] = s
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %s of %s is in trace %s, not the client's %s", s.Name(), instanceOf(s), s.SpanContext().TraceID(), traceID)
		}
	}
	root := byID[clientSpan.SpanContext().SpanID()]
	for _, s := range ours {
		if s != root && !below(byID, s, root) {
			t.Errorf("span %s of %s does not hang from the client's span", s.Name(), instanceOf(s))
		}
	}

	// What the trace covers, and where.
	find := func(name, instance string, under sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
		t.Helper()
		for _, s := range ours {
			if strings.HasPrefix(s.Name(), name) && instanceOf(s) == instance && (under == nil || below(byID, s, under)) {
				return s
			}
		}
		var all []string
		for _, s := range ours {
			all = append(all, s.Name()+"@"+instanceOf(s))
		}
		t.Fatalf("no span %s of instance %s below %v among %v", name, instance, under, all)
		return nil
	}
	call := find("a2a.SendMessage", "a", root)
	find("pg INSERT a2a_cluster_work", "a", call)
	exec := find("a2a.cluster.execute", "b", call)
	if got := attrOf(exec, "a2a.cluster.instance"); got != "b" {
		t.Errorf("execution span names instance %q, want b", got)
	}
	write := find("store.create", "b", exec)
	find("pg ", "b", write) // its statement: pgstore's create is a WITH … INSERT … SELECT
	deliverSpans := map[trace.SpanID]bool{}
	for _, s := range ours {
		if s.Name() == "a2a.push.deliver" {
			if instanceOf(s) != deliverer || !below(byID, s, exec) {
				t.Errorf("delivery span of %s not below b's execution (deliverer %s)", instanceOf(s), deliverer)
			}
			if p := byID[s.Parent().SpanID()]; p == nil || !strings.HasPrefix(p.Name(), "store.") || instanceOf(p) != "b" {
				t.Errorf("delivery span of %s has parent %v, want one of b's store writes (the log entry's trace)", instanceOf(s), s.Parent())
			}
			deliverSpans[s.SpanContext().SpanID()] = true
		}
	}

	// The webhook took each POST with the trace and the attempt's span.
	mu.Lock()
	defer mu.Unlock()
	if len(hooks) == 0 {
		t.Fatal("the webhook received nothing")
	}
	for i, h := range hooks {
		if h.token != token || h.authorization != "Bearer "+creds {
			t.Errorf("POST %d: token %q, authorization %q: the planted secrets did not reach the webhook", i, h.token, h.authorization)
		}
		sc := traceContextOf(h.traceparent)
		if sc.TraceID() != traceID || !deliverSpans[sc.SpanID()] {
			t.Errorf("POST %d: traceparent %q, want the client's trace %s and a delivery span", i, h.traceparent, traceID)
		}
	}
}

// below reports whether s has root among its ancestors (spans by ID).
func below(byID map[trace.SpanID]sdktrace.ReadOnlySpan, s, root sdktrace.ReadOnlySpan) bool {
	for p, ok := byID[s.Parent().SpanID()]; ok; p, ok = byID[p.Parent().SpanID()] {
		if p == root {
			return true
		}
	}
	return false
}

// instanceOf is the service.instance.id of s's provider.
func instanceOf(s sdktrace.ReadOnlySpan) string {
	v, _ := s.Resource().Set().Value("service.instance.id")
	return v.AsString()
}

// attrOf is s's attribute key, as text.
func attrOf(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// traceContextOf parses a traceparent header.
func traceContextOf(traceparent string) trace.SpanContext {
	h := http.Header{}
	h.Set("traceparent", traceparent)
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
}
