package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// badList is one invalid ListTasks request, written once and sent on each
// transport in that transport's own encoding.
type badList struct {
	name          string
	token         string // non-empty: a bad page token case
	pageSize      *int
	status        string // A2A enum name, for JSON-RPC and HTTP+JSON
	pbStatus      a2apb.TaskState
	historyLength *int
}

func (b badList) jsonParams() map[string]any {
	p := map[string]any{}
	if b.token != "" {
		p["pageToken"] = b.token
	}
	if b.pageSize != nil {
		p["pageSize"] = *b.pageSize
	}
	if b.status != "" {
		p["status"] = b.status
	}
	if b.historyLength != nil {
		p["historyLength"] = *b.historyLength
	}
	return p
}

func (b badList) query() url.Values {
	q := url.Values{}
	if b.token != "" {
		q.Set("pageToken", b.token)
	}
	if b.pageSize != nil {
		q.Set("pageSize", strconv.Itoa(*b.pageSize))
	}
	if b.status != "" {
		q.Set("status", b.status)
	}
	if b.historyLength != nil {
		q.Set("historyLength", strconv.Itoa(*b.historyLength))
	}
	return q
}

func (b badList) proto() *a2apb.ListTasksRequest {
	r := &a2apb.ListTasksRequest{PageToken: b.token, Status: b.pbStatus}
	if b.pageSize != nil {
		ps := int32(*b.pageSize)
		r.PageSize = &ps
	}
	if b.historyLength != nil {
		hl := int32(*b.historyLength)
		r.HistoryLength = &hl
	}
	return r
}

func (b badList) a2a() *a2a.ListTasksRequest {
	r := &a2a.ListTasksRequest{PageToken: b.token, Status: a2a.TaskState(b.status), HistoryLength: b.historyLength}
	if b.pageSize != nil {
		r.PageSize = *b.pageSize
	}
	return r
}

var badLists = []badList{
	{name: "token=0", token: "0"},
	{name: "token=1", token: "1"},
	{name: "token=50", token: "50"},
	{name: "token=-1", token: "-1"},
	{name: "token=garbage", token: "garbage-token!"},
	{name: "token=base64ish", token: "AAAAAAAAAAAAAAAA"},
	{name: "token=v1-prefix-then-junk", token: "v1.zzzz"},
	{name: "pageSize=101", pageSize: new(101)},
	{name: "pageSize=-1", pageSize: new(-1)},
	{name: "status=unknown", status: "TASK_STATE_BOGUS", pbStatus: a2apb.TaskState(99)},
	{name: "historyLength=-1", historyLength: new(-1)},
}

type rpcError struct {
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type restError struct {
	Error *struct {
		Code    int    `json:"code"`
		Status  string `json:"status"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestErrorCodes (W3, T4, L3): invalid ListTasks arguments are -32602 /
// HTTP 400 / INVALID_ARGUMENT, every bad token gets one and the same message
// that never echoes the token, and an unknown task is -32001 / 404 /
// NOT_FOUND.
func TestErrorCodes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg config) {
		ts := startServer(t, cfg)
		seed(t, ts, 5)
		tokenMessages := map[string]bool{}
		for _, bc := range badLists {
			if !engineRejects(bc.a2a()) {
				t.Fatalf("%s: the engine accepts this request; the case is wrong", bc.name)
			}
			t.Run(bc.name, func(t *testing.T) {
				var rpc rpcError
				if err := json.Unmarshal(jsonrpcCall(t, ts, "ListTasks", bc.jsonParams()), &rpc); err != nil || rpc.Error == nil {
					t.Fatalf("JSON-RPC: want an error object, got %+v (%v)", rpc, err)
				}
				if rpc.Error.Code != -32602 {
					t.Errorf("JSON-RPC code %d, want -32602 (%s)", rpc.Error.Code, rpc.Error.Message)
				}

				code, body := restGet(t, ts, "/tasks", bc.query())
				var re restError
				if err := json.Unmarshal(body, &re); err != nil || re.Error == nil {
					t.Fatalf("HTTP+JSON: want an error object, got %s (%v)", body, err)
				}
				if code != http.StatusBadRequest || re.Error.Status != "INVALID_ARGUMENT" {
					t.Errorf("HTTP+JSON: %d %s, want 400 INVALID_ARGUMENT (%s)", code, re.Error.Status, re.Error.Message)
				}

				_, err := ts.pb.ListTasks(t.Context(), bc.proto())
				st, _ := status.FromError(err)
				if st.Code() != codes.InvalidArgument {
					t.Errorf("gRPC: %v, want INVALID_ARGUMENT", err)
				}

				if bc.token != "" {
					for tr, msg := range map[string]string{"jsonrpc": rpc.Error.Message, "rest": re.Error.Message, "grpc": st.Message()} {
						if strings.Contains(msg, bc.token) {
							t.Errorf("%s: message %q echoes the token", tr, msg)
						}
						tokenMessages[tr+": "+msg] = true
					}
				}

				// The a2a-go client surfaces the same sentinel on every
				// transport (the status filter is not carried by its gRPC
				// conversion, so that case is covered by the raw stub above).
				if bc.pbStatus == 0 {
					for _, tr := range transports {
						if _, err := ts.clients[tr].ListTasks(t.Context(), bc.a2a()); !errors.Is(err, a2a.ErrInvalidParams) {
							t.Errorf("%s client: %v, want a2a.ErrInvalidParams", tr, err)
						}
					}
				}
			})
		}
		// One message per transport for every bad token, and the same text
		// on all three.
		var texts []string
		for m := range tokenMessages {
			texts = append(texts, m[strings.Index(m, ": ")+2:])
		}
		slices.Sort(texts)
		if len(tokenMessages) != 3 || len(slices.Compact(texts)) != 1 {
			t.Errorf("bad tokens produced messages %v, want one per transport, all equal", tokenMessages)
		}

		t.Run("unknown task", func(t *testing.T) {
			var rpc rpcError
			if err := json.Unmarshal(jsonrpcCall(t, ts, "GetTask", map[string]any{"id": "no-such-task"}), &rpc); err != nil || rpc.Error == nil || rpc.Error.Code != -32001 {
				t.Errorf("JSON-RPC GetTask unknown: %+v (%v), want -32001", rpc.Error, err)
			}
			if code, body := restGet(t, ts, "/tasks/no-such-task", nil); code != http.StatusNotFound {
				t.Errorf("HTTP+JSON GetTask unknown: %d %s, want 404", code, body)
			}
			_, err := ts.pb.GetTask(t.Context(), &a2apb.GetTaskRequest{Id: "no-such-task"})
			if st, _ := status.FromError(err); st.Code() != codes.NotFound {
				t.Errorf("gRPC GetTask unknown: %v, want NOT_FOUND", err)
			}
			for _, tr := range transports {
				if _, err := ts.clients[tr].GetTask(t.Context(), &a2a.GetTaskRequest{ID: "no-such-task"}); !errors.Is(err, a2a.ErrTaskNotFound) {
					t.Errorf("%s client GetTask unknown: %v, want a2a.ErrTaskNotFound", tr, err)
				}
			}
		})
	})
}

// internalWords must never appear in a ListTasks body (W4).
var internalWords = []string{"cursor", "includetotalsize", "include_total_size", "projection", "revision", "updatedat", "updated_at"}

func checkNoInternal(t *testing.T, where string, body []byte) {
	t.Helper()
	lower := strings.ToLower(string(body))
	for _, w := range internalWords {
		if strings.Contains(lower, w) {
			t.Errorf("%s: body mentions %q: %s", where, w, body)
		}
	}
}

// checkListResult checks one decoded ListTasks result object: exactly the
// four public fields, nextPageToken always present, artifacts only when
// asked for. It returns the next token and the number of tasks.
func checkListResult(t *testing.T, where string, result map[string]json.RawMessage, includeArtifacts bool) (string, int) {
	t.Helper()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range result {
			if !yield(k) {
				return
			}
		}
	})
	if want := []string{"nextPageToken", "pageSize", "tasks", "totalSize"}; !slices.Equal(keys, want) {
		t.Errorf("%s: result fields %v, want %v", where, keys, want)
	}
	var token string
	if err := json.Unmarshal(result["nextPageToken"], &token); err != nil {
		t.Errorf("%s: nextPageToken: %v", where, err)
	}
	var tasks []map[string]json.RawMessage
	if err := json.Unmarshal(result["tasks"], &tasks); err != nil || tasks == nil {
		t.Errorf("%s: tasks %s is not a list (%v)", where, result["tasks"], err)
	}
	withArtifacts := 0
	for _, task := range tasks {
		if _, ok := task["artifacts"]; ok {
			withArtifacts++
		}
	}
	if !includeArtifacts && withArtifacts > 0 {
		t.Errorf("%s: %d tasks carry artifacts without includeArtifacts", where, withArtifacts)
	}
	if includeArtifacts && len(tasks) > 0 && withArtifacts == 0 {
		t.Errorf("%s: no task carries artifacts with includeArtifacts", where)
	}
	return token, len(tasks)
}

// TestNothingInternalOnWire (W1, W4, T6): raw JSON-RPC and HTTP+JSON bodies
// and decoded gRPC responses carry only the public ListTasks fields.
func TestNothingInternalOnWire(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg config) {
		cfg.Agent = agentConfig{StatusUpdates: 1, ArtifactBytes: 8}
		ts := startServer(t, cfg)
		seed(t, ts, 12)
		total := 12 + 2*len(transports)

		for _, include := range []bool{false, true} {
			// JSON-RPC, whole traversal.
			params := map[string]any{"pageSize": 5, "includeArtifacts": include}
			seen := 0
			for i := 0; ; i++ {
				body := jsonrpcCall(t, ts, "ListTasks", params)
				checkNoInternal(t, "JSON-RPC", body)
				var env struct {
					Result map[string]json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal(body, &env); err != nil || env.Result == nil {
					t.Fatalf("JSON-RPC: %s (%v)", body, err)
				}
				tok, n := checkListResult(t, fmt.Sprintf("JSON-RPC page %d", i), env.Result, include)
				seen += n
				if tok == "" {
					break
				}
				params["pageToken"] = tok
			}
			if seen != total {
				t.Errorf("JSON-RPC traversal saw %d tasks, want %d", seen, total)
			}

			// HTTP+JSON, whole traversal.
			q := url.Values{"pageSize": {"5"}}
			if include {
				q.Set("includeArtifacts", "true")
			}
			seen = 0
			for i := 0; ; i++ {
				code, body := restGet(t, ts, "/tasks", q)
				if code != http.StatusOK {
					t.Fatalf("HTTP+JSON: %d %s", code, body)
				}
				checkNoInternal(t, "HTTP+JSON", body)
				var result map[string]json.RawMessage
				if err := json.Unmarshal(body, &result); err != nil {
					t.Fatal(err)
				}
				tok, n := checkListResult(t, fmt.Sprintf("HTTP+JSON page %d", i), result, include)
				seen += n
				if tok == "" {
					break
				}
				q.Set("pageToken", tok)
			}
			if seen != total {
				t.Errorf("HTTP+JSON traversal saw %d tasks, want %d", seen, total)
			}

			// gRPC, whole traversal on the raw stub.
			ps := int32(5)
			req := &a2apb.ListTasksRequest{PageSize: &ps, IncludeArtifacts: &include}
			seen = 0
			for {
				resp, err := ts.pb.ListTasks(t.Context(), req)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.ProtoReflect().GetUnknown()) != 0 {
					t.Errorf("gRPC response carries unknown fields")
				}
				for _, task := range resp.GetTasks() {
					if has := len(task.GetArtifacts()) > 0; has != include {
						t.Errorf("gRPC: task %s artifacts=%v with includeArtifacts=%v", task.GetId(), has, include)
					}
				}
				seen += len(resp.GetTasks())
				if resp.GetNextPageToken() == "" {
					break
				}
				req.PageToken = resp.GetNextPageToken()
			}
			if seen != total {
				t.Errorf("gRPC traversal saw %d tasks, want %d", seen, total)
			}
		}

		// An empty page is "tasks": [] with an empty token on both JSON bindings.
		body := jsonrpcCall(t, ts, "ListTasks", map[string]any{"contextId": "no-such-context"})
		if !strings.Contains(string(body), `"tasks":[]`) || !strings.Contains(string(body), `"nextPageToken":""`) {
			t.Errorf("JSON-RPC empty page: %s", body)
		}
		_, body = restGet(t, ts, "/tasks", url.Values{"contextId": {"no-such-context"}})
		if !strings.Contains(string(body), `"tasks":[]`) || !strings.Contains(string(body), `"nextPageToken":""`) {
			t.Errorf("HTTP+JSON empty page: %s", body)
		}
	})
}

// TestMetrics: after a short workload /metrics exposes the documented
// series with non-zero counts, including the backend's own collectors.
func TestMetrics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, cfg config) {
		cfg.Agent = agentConfig{StatusUpdates: 2}
		ts := startServer(t, cfg)
		seed(t, ts, 30)
		traverse(t, ts, a2a.ListTasksRequest{PageSize: 10}, func(i int) a2a.TransportProtocol { return transports[i%3] })
		_, _ = ts.clients[a2a.TransportProtocolJSONRPC].ListTasks(t.Context(), &a2a.ListTasksRequest{PageToken: "0"})
		_, _ = ts.clients[a2a.TransportProtocolJSONRPC].GetTask(t.Context(), &a2a.GetTaskRequest{ID: "no-such-task"})

		resp, err := http.Get("http://" + ts.metricsLn.Addr().String() + metricsPath)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		// value returns the sample count (histograms) or value (counters,
		// gauges) of the first series with these labels.
		value := func(name string, labels map[string]string) float64 {
			f := families[name]
			if f == nil {
				t.Errorf("series %s missing", name)
				return 0
			}
		metrics:
			for _, m := range f.GetMetric() {
				have := map[string]string{}
				for _, lp := range m.GetLabel() {
					have[lp.GetName()] = lp.GetValue()
				}
				for k, v := range labels {
					if have[k] != v {
						continue metrics
					}
				}
				switch {
				case m.GetHistogram() != nil:
					return float64(m.GetHistogram().GetSampleCount())
				case m.GetGauge() != nil:
					return m.GetGauge().GetValue()
				}
				return m.GetCounter().GetValue()
			}
			return 0
		}
		op := func(operation, outcome string) map[string]string {
			return map[string]string{"backend": cfg.Backend, "operation": operation, "outcome": outcome}
		}
		be := map[string]string{"backend": cfg.Backend}
		series := []struct {
			name   string
			labels map[string]string
		}{
			{"a2astore_store_operation_duration_seconds", op("create", "ok")},
			{"a2astore_store_operation_duration_seconds", op("replace", "ok")},
			{"a2astore_store_operation_duration_seconds", op("get", "ok")},
			{"a2astore_store_operation_duration_seconds", op("get", "not_found")},
			{"a2astore_store_operation_duration_seconds", op("list", "ok")},
			{"a2astore_store_operation_duration_seconds", op("list", "invalid_argument")},
			{"a2astore_store_list_page_tasks", be},
			{"a2astore_store_list_examined_entries", be},
			{"a2astore_store_list_totals_total", map[string]string{"backend": cfg.Backend, "total": "computed"}},
		}
		switch cfg.Backend {
		case "pebble":
			series = append(series, struct {
				name   string
				labels map[string]string
			}{"a2astore_lsm_disk_bytes", be})
		case "pg":
			series = append(series, struct {
				name   string
				labels map[string]string
			}{"a2astore_pool_acquires_total", be})
		}
		for _, c := range series {
			if v := value(c.name, c.labels); v <= 0 {
				t.Errorf("%s%v = %v, want > 0", c.name, c.labels, v)
			}
		}
	})
}

// TestGracefulShutdown: shutdown waits for in-flight SendMessage calls,
// which complete and are acknowledged; then the store is closed and the
// listeners refuse new work. On the durable backends every acknowledged
// task is in the store when it is opened again.
func TestGracefulShutdown(t *testing.T) {
	const inFlight = 6
	forEachBackend(t, func(t *testing.T, cfg config) {
		started, release := make(chan struct{}, inFlight), make(chan struct{})
		cfg.Agent = agentConfig{StatusUpdates: 2, HistoryMessages: 1, beforeComplete: func(context.Context, *a2asrv.ExecutorContext) {
			started <- struct{}{}
			<-release
		}}
		ts := startServer(t, cfg)

		acks := make(chan *a2a.Task, inFlight)
		for i := range inFlight {
			c := ts.clients[transports[i%len(transports)]]
			go func() {
				msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("in flight"))
				res, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: msg})
				if err != nil {
					t.Errorf("in-flight SendMessage: %v", err)
				}
				task, _ := res.(*a2a.Task)
				acks <- task
			}()
		}
		for range inFlight {
			<-started
		}

		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done <- ts.shutdown(ctx)
		}()
		// While the requests are held, shutdown cannot have finished.
		select {
		case err := <-done:
			t.Fatalf("shutdown returned %v while requests were in flight", err)
		case <-acks:
			t.Fatal("SendMessage returned before the agent was released")
		default:
		}
		close(release)
		var acked []*a2a.Task
		for range inFlight {
			task := <-acks
			if task == nil || task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("in-flight SendMessage acknowledged %+v, want a completed task", task)
			}
			acked = append(acked, task)
		}
		if err := <-done; err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if _, err := http.Get(ts.httpBase + a2asrv.WellKnownAgentCardPath); err == nil {
			t.Error("HTTP listener still accepts requests after shutdown")
		}
		if _, err := ts.store.Get(t.Context(), acked[0].ID); err == nil {
			t.Error("store still answers after shutdown; want it closed")
		}
		if cfg.Backend == "mem" {
			return // nothing survives a closed in-memory store
		}
		reopened, err := openBackend(t.Context(), &cfg)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer reopened.Store.Close()
		for _, task := range acked {
			rec, err := reopened.Store.Get(t.Context(), task.ID)
			if err != nil {
				t.Errorf("acknowledged task %s lost: %v", task.ID, err)
				continue
			}
			// Create, 2 working updates, completion.
			if rec.Task.Status.State != a2a.TaskStateCompleted || rec.Revision != 4 {
				t.Errorf("task %s reopened as %s at revision %d, want completed at 4", task.ID, rec.Task.Status.State, rec.Revision)
			}
		}
	})
}
