package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/internal/taskgen"
	"github.com/a2astore/a2astore/taskiter"
)

// transports in the order a portable traversal rotates through them.
var transports = []a2a.TransportProtocol{
	a2a.TransportProtocolJSONRPC,
	a2a.TransportProtocolHTTPJSON,
	a2a.TransportProtocolGRPC,
}

// testServer is a real server on loopback with one real a2a-go client per
// transport (built from the served agent card) and a raw gRPC stub.
type testServer struct {
	*server
	httpBase string
	clients  map[a2a.TransportProtocol]*a2aclient.Client
	pb       a2apb.A2AServiceClient
}

func TestMain(m *testing.M) {
	runChildServer() // TestTwoServers's server processes
	pgtest.Main(m)
}

// testBackends are the stores the end-to-end tests run on. Each returns the
// server config for a fresh, empty store; pg uses a throwaway database
// (pgtest: skipped when no PostgreSQL is available, a failure under CI).
var testBackends = []struct {
	name string
	cfg  func(t testing.TB) config
}{
	{"mem", func(testing.TB) config { return config{Backend: "mem"} }},
	{"pebble", func(t testing.TB) config { return config{Backend: "pebble", PebbleDir: t.TempDir()} }},
	{"pg", func(t testing.TB) config { return config{Backend: "pg", PGDSN: pgtest.DSN(t)} }},
}

// forEachBackend runs f as one subtest per backend.
func forEachBackend(t *testing.T, f func(t *testing.T, cfg config)) {
	for _, b := range testBackends {
		t.Run("backend="+b.name, func(t *testing.T) { f(t, b.cfg(t)) })
	}
}

func startServer(t testing.TB, cfg config) *testServer {
	t.Helper()
	ctx := t.Context()
	cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := newServer(ctx, cfg)
	if err != nil {
		t.Fatalf("newServer: %v", err)
	}
	s.serve()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	ts := &testServer{server: s, httpBase: "http://" + s.httpLn.Addr().String(), clients: map[a2a.TransportProtocol]*a2aclient.Client{}}

	// Build every client from the agent card the server publishes (W2).
	var card a2a.AgentCard
	getJSON(t, ts.httpBase+a2asrv.WellKnownAgentCardPath, &card)
	if len(card.SupportedInterfaces) != 3 {
		t.Fatalf("agent card lists %d interfaces, want 3: %+v", len(card.SupportedInterfaces), card.SupportedInterfaces)
	}
	dial := grpc.WithTransportCredentials(insecure.NewCredentials())
	for _, tr := range transports {
		c, err := a2aclient.NewFromCard(ctx, &card,
			a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{tr}}),
			a2agrpc.WithGRPCTransport(dial))
		if err != nil {
			t.Fatalf("client for %s: %v", tr, err)
		}
		t.Cleanup(func() { _ = c.Destroy() })
		ts.clients[tr] = c
	}
	conn, err := grpc.NewClient(s.grpcLn.Addr().String(), dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ts.pb = a2apb.NewA2AServiceClient(conn)
	return ts
}

func getJSON(t testing.TB, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// send sends one user message through c; the synthetic agent turns it into
// a completed task.
func send(t testing.TB, c *a2aclient.Client, contextID, text string) *a2a.Task {
	t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	msg.ContextID = contextID
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage returned %T, want *a2a.Task", res)
	}
	return task
}

// seedEpoch is the status timestamp of the first directly created task;
// task i has seedEpoch + i seconds.
var seedEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// seed creates tasks through the wire (one SendMessage per transport and
// context) and directly in the store, in several contexts and states.
func seed(t testing.TB, ts *testServer, direct int) {
	t.Helper()
	for i, tr := range transports {
		for _, ctxID := range []string{"ctx-a", "ctx-b"} {
			send(t, ts.clients[tr], ctxID, fmt.Sprintf("hello %d", i))
		}
	}
	seedDirect(t, ts, direct)
}

// seedDirect creates n tasks directly in the store: contexts ctx-a/b/c and
// states working/completed/submitted in turn, status timestamps seedEpoch+i
// s, one history message and one artifact each (taskgen content).
func seedDirect(t testing.TB, ts *testServer, n int) {
	t.Helper()
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateSubmitted}
	gen := taskgen.New(taskgen.Shape{History: 1, Artifacts: 1, ArtifactBytes: 7})
	for i := range n {
		now := seedEpoch.Add(time.Duration(i) * time.Second)
		task := gen.Build(a2a.TaskID(fmt.Sprintf("direct-%03d", i)), []string{"ctx-a", "ctx-b", "ctx-c"}[i%3], states[i%len(states)], &now, i)
		if _, err := ts.store.Create(t.Context(), task); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
}

// TestSendMessageCreatesTasks: SendMessage on each transport runs the
// synthetic agent, whose writes go through the adapter into the store.
func TestSendMessageCreatesTasks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg config) {
		cfg.Agent = agentConfig{StatusUpdates: 3, HistoryMessages: 2, ArtifactBytes: 100}
		ts := startServer(t, cfg)
		for _, tr := range transports {
			task := send(t, ts.clients[tr], "ctx-"+string(tr), "hi")
			if task.Status.State != a2a.TaskStateCompleted {
				t.Errorf("%s: state %s, want completed", tr, task.Status.State)
			}
			rec, err := ts.store.Get(t.Context(), task.ID)
			if err != nil {
				t.Fatalf("%s: store Get: %v", tr, err)
			}
			// 1 Create + 3 working updates + 1 artifact + 1 completion.
			if rec.Revision != 6 {
				t.Errorf("%s: revision %d, want 6", tr, rec.Revision)
			}
			// The user message plus the two agent messages.
			if n := len(rec.Task.History); n != 3 {
				t.Errorf("%s: history has %d messages, want 3", tr, n)
			}
			if len(rec.Task.Artifacts) != 1 || len(rec.Task.Artifacts[0].Parts) != 1 || len(rec.Task.Artifacts[0].Parts[0].Text()) != 100 {
				t.Errorf("%s: artifacts %+v, want one of 100 bytes", tr, rec.Task.Artifacts)
			}
			got, err := ts.clients[tr].GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
			if err != nil || got.ID != task.ID || got.Status.State != a2a.TaskStateCompleted {
				t.Errorf("%s: GetTask = %v, %v", tr, got, err)
			}
		}
	})
}

// page is what a traversal observes of one page.
type page struct {
	IDs       []a2a.TaskID
	States    []a2a.TaskState
	History   []int // messages per task (historyLength must reach the store)
	Artifacts []int // artifacts per task (includeArtifacts must reach the store)
	Token     string
	TotalSize int
	PageSize  int
}

func observe(resp *a2a.ListTasksResponse) page {
	p := page{Token: resp.NextPageToken, TotalSize: resp.TotalSize, PageSize: resp.PageSize}
	for _, task := range resp.Tasks {
		p.IDs = append(p.IDs, task.ID)
		p.States = append(p.States, task.Status.State)
		p.History = append(p.History, len(task.History))
		p.Artifacts = append(p.Artifacts, len(task.Artifacts))
	}
	return p
}

// traverse walks req to the end, asking pick(i) which client serves page i.
func traverse(t *testing.T, ts *testServer, req a2a.ListTasksRequest, pick func(i int) a2a.TransportProtocol) []page {
	t.Helper()
	var pages []page
	byPage := taskiter.ListerFunc(func(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
		return ts.clients[pick(len(pages))].ListTasks(ctx, req)
	})
	for resp, err := range taskiter.Pages(t.Context(), byPage, &req) {
		if err != nil {
			t.Fatalf("page %d over %s: %v", len(pages), pick(len(pages)), err)
		}
		pages = append(pages, observe(resp))
		if len(pages) > 1000 {
			t.Fatal("traversal does not end")
		}
	}
	return pages
}

// TestPortableTraversal (W2, T1, T2): a traversal that switches transport on
// every page returns exactly the tasks, order and tokens of a traversal on
// any single transport.
func TestPortableTraversal(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg config) {
		cfg.Agent = agentConfig{StatusUpdates: 1, HistoryMessages: 1, ArtifactBytes: 10}
		ts := startServer(t, cfg)
		seed(t, ts, 40)
		cases := []a2a.ListTasksRequest{
			{PageSize: 7},
			{PageSize: 1},
			{PageSize: 100},
			{ContextID: "ctx-a", PageSize: 4},
			{Status: a2a.TaskStateCompleted, PageSize: 3, IncludeArtifacts: true},
			{ContextID: "ctx-a", Status: a2a.TaskStateWorking, PageSize: 2, HistoryLength: new(0)},
			{PageSize: 6, HistoryLength: new(1), IncludeArtifacts: true},
			// Whole seconds: a2a-go's REST client drops sub-second precision.
			{StatusTimestampAfter: new(seedEpoch.Add(25 * time.Second)), PageSize: 4},
		}
		for _, req := range cases {
			want := traverse(t, ts, req, func(int) a2a.TransportProtocol { return a2a.TransportProtocolJSONRPC })
			var ids int
			for _, p := range want {
				ids += len(p.IDs)
			}
			if ids == 0 || ids != want[0].TotalSize {
				t.Fatalf("%+v: traversal returned %d tasks, totalSize %d", req, ids, want[0].TotalSize)
			}
			for _, tr := range transports[1:] {
				got := traverse(t, ts, req, func(int) a2a.TransportProtocol { return tr })
				assertSamePages(t, fmt.Sprintf("%+v only %s", req, tr), got, want)
			}
			for start := range transports {
				got := traverse(t, ts, req, func(i int) a2a.TransportProtocol { return transports[(start+i)%len(transports)] })
				assertSamePages(t, fmt.Sprintf("%+v rotating from %s", req, transports[start]), got, want)
			}
		}
	})
}

func assertSamePages(t *testing.T, name string, got, want []page) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("%s:\n got  %s\n want %s", name, g, w)
	}
}

// jsonrpcCall posts one JSON-RPC request and returns the raw response body.
func jsonrpcCall(t *testing.T, ts *testServer, method string, params any) []byte {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := http.Post(ts.httpBase+jsonrpcPath, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// restGet sends GET path?query and returns status code and raw body.
func restGet(t *testing.T, ts *testServer, path string, query url.Values) (int, []byte) {
	t.Helper()
	u := ts.httpBase + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// engineRejects reports whether the engine's own validation agrees that a
// request is invalid, so the wire tests check the adapter, not a guess.
func engineRejects(req *a2a.ListTasksRequest) bool {
	_, err := engine.ParseListRequest(&engine.ListRequest{
		Status: req.Status, PageSize: req.PageSize, PageToken: req.PageToken, HistoryLength: req.HistoryLength,
	})
	return err != nil
}
