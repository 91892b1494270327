package load

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/taskiter"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// smallRun is a quick run: op counts, not wall time.
func smallRun(t *testing.T, cfg Config) *Result {
	t.Helper()
	cfg.Seed = testSeed(t)
	if cfg.Ops == 0 {
		cfg.Ops = 1500
	}
	if cfg.Initial == 0 {
		cfg.Initial = 300
	}
	cfg.Concurrency = 4
	cfg.Shape.Contexts = 20
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var b strings.Builder
	_ = res.WriteTable(&b)
	t.Log("\n" + b.String())
	return res
}

// assertClean: the run did work, traversals were checked, nothing broke.
func assertClean(t *testing.T, res *Result) {
	t.Helper()
	if err := res.Err(); err != nil {
		t.Errorf("run failed its checks: %v", err)
	}
	if res.Total.Count == 0 || res.Total.OpsPerSec <= 0 {
		t.Errorf("no throughput: %+v", res.Total)
	}
	if Workloads[res.Workload].Weights[OpTraverse] == 0 { // send-only, list-only
		if res.Traversals != 0 {
			t.Errorf("%s ran %d traversals", res.Workload, res.Traversals)
		}
	} else {
		if res.Traversals == 0 || res.ExactlyOnce == 0 {
			t.Errorf("no traversal was checked: %d traversals, %d appearances", res.Traversals, res.ExactlyOnce)
		}
		if res.CursorChecks == 0 {
			t.Errorf("no cursor was compared in %d traversals", res.Traversals)
		}
	}
	if n := res.Total.Errors[ClassTransport] + res.Total.Errors[ClassInvalidArgument]; n > 0 {
		t.Errorf("%d transport or invalid-argument errors: %v", n, res.Total.Errors)
	}
}

func TestRunEmbedded(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"mem", func(*testing.T) Config { return Config{Target: "mem"} }},
		{"pebble", func(t *testing.T) Config { return Config{Target: "pebble", Dir: t.TempDir(), PebbleNoSync: true} }},
		{"pg", func(t *testing.T) Config { return Config{Target: "pg", DSN: pgtest.DSN(t)} }},
	} {
		t.Run("backend="+tc.name, func(t *testing.T) {
			for _, w := range WorkloadNames() {
				t.Run("workload="+w, func(t *testing.T) {
					cfg := tc.cfg(t)
					cfg.Workload = w
					switch w {
					case "write-heavy", "read-heavy":
						cfg.Ops = 3000 // traversals are 1%: enough ops to see some
					case "list-deep":
						cfg.Ops = 400 // 40% are full traversals of everything
					}
					res := smallRun(t, cfg)
					assertClean(t, res)
					if res.GC == nil {
						t.Error("an embedded run reports no GC figures")
					}
				})
			}
		})
	}
}

// echoAgent turns every message into a task that works once and completes.
type echoAgent struct{}

func (echoAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (echoAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// startServer serves a memstore over JSON-RPC, HTTP+JSON and gRPC the way
// cmd/a2astore-server does (a2aserver adapter and compat wrappers) and
// returns its base URL; opts are added to the handler's.
func startServer(t *testing.T, store engine.Store, opts ...a2asrv.RequestHandlerOption) string {
	t.Helper()
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	grpcLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + httpLn.Addr().String()
	card := &a2a.AgentCard{
		Name: "loadgen test agent", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(base+"/jsonrpc", a2a.TransportProtocolJSONRPC),
			a2a.NewAgentInterface(base, a2a.TransportProtocolHTTPJSON),
			a2a.NewAgentInterface(grpcLn.Addr().String(), a2a.TransportProtocolGRPC),
		},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
	}
	handler := a2asrv.NewHandler(echoAgent{}, append([]a2asrv.RequestHandlerOption{a2asrv.WithTaskStore(a2aserver.TaskStore(store)),
		a2asrv.WithLogger(slog.New(slog.DiscardHandler)),
		a2asrv.WithCallInterceptors(a2aserver.HeaderIdentity{Header: "X-A2astore-Caller"})}, opts...)...)
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/jsonrpc", a2asrv.NewJSONRPCHandler(handler))
	mux.Handle("/", a2aserver.RESTQueryCompat(a2asrv.NewRESTHandler(handler)))
	hs := &http.Server{Handler: mux}
	gs := grpc.NewServer(grpc.UnaryInterceptor(a2aserver.GRPCListTasksValidator))
	a2agrpc.NewHandler(handler).RegisterWith(gs)
	var wg sync.WaitGroup
	wg.Go(func() { _ = hs.Serve(httpLn) })
	wg.Go(func() { _ = gs.Serve(grpcLn) })
	t.Cleanup(func() {
		_ = hs.Close()
		gs.Stop()
		wg.Wait()
	})
	return base
}

func TestRunRemote(t *testing.T) {
	for _, tr := range Transports {
		t.Run("transport="+tr, func(t *testing.T) {
			store := memstore.New(memstore.Options{})
			t.Cleanup(func() { _ = store.Close() })
			base := startServer(t, store)
			res := smallRun(t, Config{Target: base, Transport: tr, Ops: 400, Initial: 100})
			assertClean(t, res)
			for _, op := range []Op{OpReplace, OpAppend, OpDelete} {
				if _, ok := res.Ops[op]; ok {
					t.Errorf("remote run did %s, which A2A has no method for", op)
				}
			}
		})
	}
}

// callerRuns are the caller identities of the caller tests, with the
// owners their tasks get.
var callerRuns = []struct {
	cfg    Config
	owners []string
}{
	{Config{Caller: "alice"}, []string{"alice"}},
	{Config{Callers: 3}, []string{"loadgen-1", "loadgen-2", "loadgen-3"}},
}

// TestRunRemoteCallers: a server that authorizes by caller (owner policy)
// is loaded without errors with one identity (Caller) and with several
// (Callers): each task is read and canceled by the caller that created it,
// and each context's lists run as its owner.
func TestRunRemoteCallers(t *testing.T) {
	for _, c := range callerRuns {
		mem := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = mem.Close() })
		base := startServer(t, authz.New(mem, authz.OwnerPolicy{}))
		cfg := c.cfg
		cfg.Target, cfg.Workload, cfg.Ops, cfg.Initial, cfg.PageSize = base, "traversal-under-churn", 400, 60, 3
		res := smallRun(t, cfg)
		assertClean(t, res)
		if n := res.Ops[OpGet].Errors[ClassNotFound] + res.Ops[OpCancel].Errors[ClassNotFound]; n > 0 || res.Ops[OpCancel].Count == 0 {
			t.Errorf("callers %v: %d of %d cancels and gets not found: a task used by another caller than its creator", c.owners, n, res.Ops[OpCancel].Count)
		}
		checkOwners(t, mem, c.owners)
	}
}

// checkOwners fails unless the tasks of s are owned by exactly the owners
// given, each owning some.
func checkOwners(t *testing.T, s engine.Store, want []string) {
	t.Helper()
	owners := map[string]int{}
	for page, err := range taskiter.StorePages(t.Context(), s, engine.ListRequest{PageSize: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.TaskOwners {
			owners[o]++
		}
	}
	for _, o := range want {
		if owners[o] == 0 {
			t.Errorf("callers %v: no task owned by %s; owners %v", want, o, owners)
		}
	}
	if len(owners) != len(want) {
		t.Errorf("callers %v: owners %v, want %v", want, owners, want)
	}
}

// TestRunEmbeddedCallers: caller identities on an embedded store run it
// through an authz dispatcher under OwnerPolicy: each task is owned by its
// context's caller, and the traversals, each of one context as its owner,
// see every task they must (a task created or used as another caller
// would be missing from its owner's traversal: a violation). A store that
// does not record owners is refused before the run.
func TestRunEmbeddedCallers(t *testing.T) {
	for _, c := range callerRuns {
		mem := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = mem.Close() })
		cfg := c.cfg
		cfg.Store, cfg.Workload, cfg.Ops, cfg.Initial, cfg.PageSize = mem, "traversal-under-churn", 600, 100, 3
		res := smallRun(t, cfg)
		assertClean(t, res)
		checkOwners(t, mem, c.owners)
	}
	plain := struct{ engine.Store }{memstore.New(memstore.Options{})}
	if _, err := Run(t.Context(), Config{Store: plain, Caller: "alice"}); !errors.Is(err, errNoOwners) {
		t.Errorf("caller identities over a store without owners: %v, want errNoOwners", err)
	}
}

// repeatingStore breaks L7: every page after the first starts with the last
// task of the page before (a repeat, and a cursor that does not descend).
type repeatingStore struct {
	engine.Store
	mu   sync.Mutex
	last map[string]struct {
		task   *a2a.Task
		cursor engine.Cursor
	} // by the token that continues after it
}

func (s *repeatingStore) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := s.Store.List(ctx, req)
	if err != nil || len(resp.Tasks) == 0 {
		return resp, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.last[req.PageToken]; ok && req.PageToken != "" {
		resp.Tasks = append([]*a2a.Task{prev.task}, resp.Tasks...)
		resp.TaskCursors = append([]engine.Cursor{prev.cursor}, resp.TaskCursors...)
	}
	if resp.NextPageToken != "" {
		n := len(resp.Tasks) - 1
		s.last[resp.NextPageToken] = struct {
			task   *a2a.Task
			cursor engine.Cursor
		}{resp.Tasks[n], resp.TaskCursors[n]}
	}
	return resp, nil
}

// TestBrokenStoreIsCaught: the checker reports a store that repeats tasks
// across pages, with the seed, and the run fails.
func TestBrokenStoreIsCaught(t *testing.T) {
	base := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = base.Close() })
	broken := &repeatingStore{Store: base, last: map[string]struct {
		task   *a2a.Task
		cursor engine.Cursor
	}{}}
	res := smallRun(t, Config{Store: broken, Workload: "list-deep", Ops: 200})
	if res.Err() == nil || res.ViolationCount == 0 {
		t.Fatalf("a store repeating tasks across pages passed: %d violations", res.ViolationCount)
	}
	kinds := map[string]bool{}
	for _, v := range res.Violations {
		kinds[v.Kind] = true
		if v.Seed != res.Seed || v.TaskID == "" && v.Kind == "repeat" {
			t.Errorf("violation lacks seed or task: %+v", v)
		}
	}
	if !kinds["repeat"] || !kinds["cursor-order"] {
		t.Errorf("violation kinds %v, want repeat and cursor-order", kinds)
	}
	if !strings.Contains(res.Err().Error(), "seed") {
		t.Errorf("Err() does not name the seed: %v", res.Err())
	}
}

// droppingStore breaks L7 the other way: it leaves out the first task of
// every page after the first, so untouched tasks go missing.
type droppingStore struct{ engine.Store }

func (s droppingStore) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := s.Store.List(ctx, req)
	if err == nil && req.PageToken != "" && len(resp.Tasks) > 1 {
		resp.Tasks, resp.TaskCursors = resp.Tasks[1:], resp.TaskCursors[1:]
	}
	return resp, err
}

func TestDroppingStoreIsCaught(t *testing.T) {
	base := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = base.Close() })
	res := smallRun(t, Config{Store: droppingStore{base}, Workload: "list-deep", Ops: 200})
	missing := 0
	for _, v := range res.Violations {
		if v.Kind == "missing" {
			missing++
		}
	}
	if res.Err() == nil || missing == 0 {
		t.Fatalf("a store dropping tasks passed: %d violations, %d missing", res.ViolationCount, missing)
	}
}

// TestRunPaced: with a target rate the run is open loop and still does
// exactly the configured number of operations.
func TestRunPaced(t *testing.T) {
	res := smallRun(t, Config{Target: "mem", Rate: 20000, Ops: 500, Workload: "traversal-under-churn"})
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if res.Total.Count != 500 || res.Rate != 20000 {
		t.Errorf("paced run: %d ops at rate %v, want 500 at 20000", res.Total.Count, res.Rate)
	}
	if s := res.Schedule; s == nil || s.MaxLagMs < s.EndLagMs || s.EndLagMs < 0 {
		t.Errorf("paced run's schedule %+v: want max lag >= end lag >= 0", s)
	}
	if res.Total.ServiceP99Ms <= 0 || res.Total.ServiceP99Ms > res.Total.P99Ms*1.01 {
		t.Errorf("service p99 %v ms, response p99 %v ms: service must be positive and at most the response", res.Total.ServiceP99Ms, res.Total.P99Ms)
	}
}
