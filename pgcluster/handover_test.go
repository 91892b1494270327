package pgcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// blankingConfigs blanks the token of the config a2a-go saves, as
// pushdelivery.ConfigStore does to a config it fails to save (SPEC N3).
type blankingConfigs struct{ push.ConfigStore }

func (s blankingConfigs) Save(ctx context.Context, id a2a.TaskID, cfg *a2a.PushConfig) (*a2a.PushConfig, error) {
	saved, err := s.ConfigStore.Save(ctx, id, cfg)
	cfg.Token = ""
	return saved, err
}

// A hand-over writes back the work item as it was claimed: a push config
// whose token was blanked in the payload a2a-go ran (a failed save hides
// it from a2a-go's error) keeps its token for the next instance.
func TestHandOverKeepsClaimedPayload(t *testing.T) {
	h := newHarness(t)
	h.push = blankingConfigs{push.NewInMemoryStore()}
	agent := newGateAgent(1)
	a := h.start(t, "a", agent)
	ctx := t.Context()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	req := &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{
		PushConfig: &a2a.PushConfig{URL: "https://hook.example/", Token: "kept-token"}}}
	events, _ := stream(a.handler.SendStreamingMessage(ctx, req))
	task, ok := next(t, events).(*a2a.Task)
	if !ok {
		t.Fatal("first event is not the submitted task")
	}
	// The first event may come from the enqueue, before any claim: hand
	// over once the execution runs (a claim between HandOver's look at the
	// executions and its Settle would leave Settle waiting for the agent).
	select {
	case <-agent.started:
	case <-time.After(waitFor):
		t.Fatal("the execution did not start")
	}
	hctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	if n, err := a.cluster.HandOver(hctx); err != nil || n != 1 {
		t.Fatalf("HandOver = %d, %v; want 1 execution", n, err)
	}
	var body []byte
	q := fmt.Sprintf(`SELECT payload FROM %q.a2a_cluster_work WHERE task_id = $1`, h.schema)
	if err := a.pool.QueryRow(ctx, q, string(task.ID)).Scan(&body); err != nil {
		t.Fatal(err)
	}
	var p workqueue.Payload
	if err := json.Unmarshal(body, &p); err != nil || p.ExecuteRequest == nil || p.ExecuteRequest.Config == nil {
		t.Fatalf("payload after hand-over: %s (%v)", body, err)
	}
	if got := p.ExecuteRequest.Config.PushConfig.Token; got != "kept-token" {
		t.Errorf("handed-over payload's token %q, want kept-token", got)
	}
	if p.ExecuteRequest.Message.TaskID != task.ID || !strings.Contains(string(body), string(task.ID)) {
		t.Errorf("handed-over payload does not name the stored task: %s", body)
	}
}

// HandOver covers the executions claimed after it listed the running ones:
// an item claimed before the call but not yet started (here held between
// its claim and a2a-go's before-execution callback until HandOver has
// listed the executions) is handed over before its agent starts, so that
// HandOver returns at once with no item held here; another instance then
// runs it and the caller's stream ends. Before, the execution started
// after the list and HandOver waited for it until its context ended.
func TestHandOverCoversLateClaim(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	agentA := newGateAgent(1) // would block until stepped
	a := h.start(t, "a", agentA)
	ctx := t.Context()
	claimed, looked := make(chan a2a.TaskID, 1), make(chan struct{})
	var once sync.Once
	a.cluster.BeforeExecution(func(id a2a.TaskID) {
		once.Do(func() {
			claimed <- id
			<-looked
		})
	})
	a.cluster.AfterHandOverLook(func() { close(looked) })
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	events, done := stream(a.handler.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}))
	var id a2a.TaskID
	select {
	case id = <-claimed:
	case <-time.After(waitFor):
		t.Fatal("the item was not claimed")
	}
	a.cluster.StopWork()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n, err := a.cluster.HandOver(hctx); err != nil || n != 0 {
		t.Fatalf("HandOver = %d, %v; want 0 running executions and no item left", n, err)
	}
	select {
	case <-agentA.started:
		t.Fatal("the agent started on the instance handing over")
	default:
	}
	if l, err := a.cluster.ExecutionLease(ctx, id); err != nil || l.State != "available" || l.Attempt != 0 {
		t.Fatalf("lease after HandOver: %+v, %v; want available, attempt 0", l, err)
	}
	h.start(t, "b", newGateAgent(0))
	for state(next(t, events)) != a2a.TaskStateCompleted {
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
	case <-time.After(waitFor):
		t.Fatal("the stream did not end after the terminal event")
	}
}

// cancelGate is a pgx tracer that holds the statement writing a task
// CANCELED: it reports the write on writing and lets it run once let is
// closed (or after waitFor).
type cancelGate struct {
	writing chan struct{}
	let     chan struct{}
	once    sync.Once
}

func (g *cancelGate) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "UPDATE") && len(data.Args) > 2 && fmt.Sprint(data.Args[2]) == string(a2a.TaskStateCanceled) {
		g.once.Do(func() {
			close(g.writing)
			select {
			case <-g.let:
			case <-time.After(waitFor):
			}
		})
	}
	return ctx
}

func (*cancelGate) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// An execution handed over or claimed again waits for the cancelation
// of its task running on the same instance before it decides to run its
// message (K8). With the CANCELED write held in flight, a hands over the
// execution it runs; the cancelation runs on a ("handing over": the item
// goes back only once it ended) or on c, which claims the item
// ("claiming": the answered check waits for it). Either way c finds the
// task canceled and never runs the message again. Before, the item went
// back and was checked at once, and c ran the message while the CANCELED
// write was landing (TestFaultSweep's handover mode failed so in CI, once
// in many runs).
func TestHandOverAwaitsCancelRunningHere(t *testing.T) {
	for _, where := range []string{"handing over", "claiming"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			canceler := map[string]string{"handing over": "a", "claiming": "c"}[where]
			testAwaitsCancel(t, canceler)
		})
	}
}

// testAwaitsCancel runs TestHandOverAwaitsCancelRunningHere with the
// cancelation on instance canceler ("a" or "c").
func testAwaitsCancel(t *testing.T, canceler string) {
	h := newHarness(t)
	gate := &cancelGate{writing: make(chan struct{}), let: make(chan struct{})}
	h.poolConfig = func(name string, cfg *pgxpool.Config) {
		if name == canceler {
			cfg.ConnConfig.Tracer = gate
		}
	}
	agent := newTurnAgent(true)
	a := h.start(t, "a", agent)
	b := h.start(t, "b", agent)
	b.cluster.StopWork() // a executes; b answers the calls
	ctx, cancel := context.WithTimeout(t.Context(), 2*waitFor)
	defer cancel()
	res, err := send(ctx, b, "", "m1", "nohold")
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	go func() { _, _ = send(ctx, b, id, "m2", "hold") }()
	for range 2 { // m1's turn, then m2's, running on a
		select {
		case <-agent.working:
		case <-ctx.Done():
			t.Fatal("m2 did not start")
		}
	}
	ranOnC, awaiting := make(chan struct{}, 1), make(chan struct{}, 1)
	var c *instance
	startC := func() {
		c = h.start(t, "c", agent)
		c.cluster.BeforeExecution(func(a2a.TaskID) { ranOnC <- struct{}{} })
	}
	if canceler == "c" {
		a.cluster.StopWork() // c runs the cancelation, then claims m2's item
		startC()
		c.cluster.AwaitingCancel(func(a2a.TaskID) { awaiting <- struct{}{} })
	} else {
		a.cluster.AwaitingCancel(func(a2a.TaskID) { awaiting <- struct{}{} })
	}
	go func() { _, _ = b.handler.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id}) }()
	select {
	case <-gate.writing:
	case <-ctx.Done():
		t.Fatal("the cancelation did not write")
	}
	if c == nil {
		startC() // after a claimed the cancelation: c claims m2's item
	}
	handedOver := make(chan error, 1)
	go func() {
		a.cluster.StopWork()
		_, err := a.cluster.HandOver(ctx)
		handedOver <- err
	}()
	select {
	case <-awaiting:
		close(gate.let)
	case <-ranOnC:
		close(gate.let)
		t.Fatal("the execution was decided on while its task's CANCELED write was in flight: c ran m2 again")
	case <-ctx.Done():
		t.Fatal("neither waited for the cancelation nor handed over")
	}
	if err := <-handedOver; err != nil {
		t.Fatalf("HandOver: %v", err)
	}
	if st := waitTerminal(t, ctx, b, id); st != a2a.TaskStateCanceled {
		t.Fatalf("task ended %s, want CANCELED", st)
	}
	if n := agent.ran("m2"); n != 1 {
		t.Fatalf("m2 ran %d times, want 1", n)
	}
}
