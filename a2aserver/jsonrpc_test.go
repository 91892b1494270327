package a2aserver

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/a2astore/a2astore/engine/memstore"
)

// TestJSONRPCParamsCompat (W3, W7, W10): params that are JSON but not a
// valid request are -32602 with a fixed message on every method, never
// -32700 and never quoting the value, as a plain JSON-RPC error response
// (200, application/json) also for the streaming methods, carrying the
// ErrorInfo reason INVALID_PARAMS; the request ID is echoed; valid
// requests and requests that are not JSON at all go to a2a-go unchanged.
func TestJSONRPCParamsCompat(t *testing.T) {
	h := a2asrv.NewHandler(newHeldAgent(), a2asrv.WithTaskStore(TaskStore(memstore.New(memstore.Options{}))))
	bare := a2asrv.NewJSONRPCHandler(h)
	srv := httptest.NewServer(JSONRPCParamsCompat(bare))
	defer srv.Close()

	var status int // of the last call
	call := func(body string) (string, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		status = resp.StatusCode
		raw, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q; invalid params, streaming methods included, are a plain JSON-RPC error response (W7)", body, ct)
		}
		text := strings.TrimSpace(string(raw))
		var out map[string]any
		if err := json.Unmarshal([]byte(text), &out); err != nil {
			t.Fatalf("%s: response %q is not JSON-RPC: %v", body, raw, err)
		}
		return string(raw), out
	}
	for _, c := range []struct{ method, params, secret string }{
		{"ListTasks", `{"statusTimestampAfter":"yesterday"}`, "yesterday"},
		{"SendMessage", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"secretKey":1}]}}`, "secretKey"},
		{"SendStreamingMessage", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"secretKey":1}]}}`, "secretKey"},
		{"GetTask", `{"id":"x","historyLength":"many"}`, "many"},
		{"SubscribeToTask", `{"id":{"secretKey":1}}`, "secretKey"},
	} {
		raw, out := call(`{"jsonrpc":"2.0","id":12345678901234567890,"method":"` + c.method + `","params":` + c.params + `}`)
		if code(out) != -32602 {
			t.Errorf("%s %s: %s, want -32602", c.method, c.params, raw)
		}
		// 200 for every method: the Python SDK's client turns any other
		// status into a generic HTTP error.
		if status != http.StatusOK {
			t.Errorf("%s: HTTP status %d, want 200", c.method, status)
		}
		if reason := errorInfoReason(out); reason != "INVALID_PARAMS" {
			t.Errorf("%s: ErrorInfo reason %q, want INVALID_PARAMS (W10): %s", c.method, reason, raw)
		}
		if strings.Contains(raw, c.secret) {
			t.Errorf("%s: the response quotes the client's value: %s", c.method, raw)
		}
		if !strings.Contains(raw, `"id":12345678901234567890`) {
			t.Errorf("%s: the request ID is not echoed as sent: %s", c.method, raw)
		}
	}
	// Not JSON: a2a-go's parse error. Valid: a2a-go's answer.
	if _, out := call(`{"jsonrpc":`); code(out) != -32700 {
		t.Errorf("broken JSON: %v, want -32700", out)
	}
	if _, out := call(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":3}}`); out["result"] == nil {
		t.Errorf("valid ListTasks: %v, want a result", out)
	}
	// a2a-go's own errors about params that decode pass through as a2a-go
	// writes them: the wrapper replaces only the answers to params that do
	// not decode (it looks at a2a-go's answer, not before it).
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"no-such-task"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"ListTasks","params":{"pageToken":"not-a-token"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"CancelTask","params":{"id":"no-such-task"}}`,
	} {
		_, got := call(body)
		rec := httptest.NewRecorder()
		bare.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
		var want map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &want); err != nil || code(want) == 0 {
			t.Fatalf("%s: a2a-go answers %q (%v), want an error", body, rec.Body, err)
		}
		gotErr, _ := got["error"].(map[string]any)
		wantErr, _ := want["error"].(map[string]any)
		if code(got) != code(want) || gotErr["message"] != wantErr["message"] {
			t.Errorf("%s: %v, want a2a-go's own answer %v", body, got, want)
		}
	}
}

// errorInfoReason returns the reason of the google.rpc.ErrorInfo in a
// JSON-RPC error response's data, "" when there is none.
func errorInfoReason(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	data, _ := e["data"].([]any)
	for _, d := range data {
		if m, ok := d.(map[string]any); ok && m["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
			r, _ := m["reason"].(string)
			return r
		}
	}
	return ""
}

// TestJSONRPCProtoFieldNames (§5.5, ProtoJSON): params that use the proto
// field names — history_length, page_size, message_id, as the official
// TCK's JSON-RPC client sends them — mean what their camelCase spellings
// mean; keys inside metadata are the client's and stay as sent. a2a-go
// v2.3.1 decodes params with encoding/json and ignores such fields
// (GetTask with history_length 1 returned the whole history).
func TestJSONRPCProtoFieldNames(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	task := &a2a.Task{ID: "t-1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	for i := range 3 {
		task.History = append(task.History, &a2a.Message{ID: fmt.Sprintf("m-%d", i), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}})
	}
	if _, err := mem.Create(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Create(t.Context(), &a2a.Task{ID: "t-2", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}); err != nil {
		t.Fatal(err)
	}
	agent := newHeldAgent()
	defer close(agent.release)
	h := a2asrv.NewHandler(agent, a2asrv.WithTaskStore(TaskStore(mem)))
	srv := httptest.NewServer(JSONRPCParamsCompat(a2asrv.NewJSONRPCHandler(h)))
	defer srv.Close()
	call := func(method, params string) map[string]any {
		t.Helper()
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":"x-1","method":"`+method+`","params":`+params+`}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if out["id"] != "x-1" {
			t.Errorf("%s: id %v, want the request's", method, out["id"])
		}
		return out
	}
	result := func(out map[string]any) map[string]any {
		r, _ := out["result"].(map[string]any)
		return r
	}

	got := result(call("GetTask", `{"id":"t-1","history_length":1}`))
	if h, _ := got["history"].([]any); len(h) != 1 {
		t.Errorf("GetTask history_length 1: %d history messages, want 1: %v", len(h), got)
	}
	if out := call("ListTasks", `{"page_size":101}`); code(out) != -32602 {
		t.Errorf("ListTasks page_size 101: %v, want -32602", out)
	}
	page := result(call("ListTasks", `{"page_size":1,"context_id":"c"}`))
	if tasks, _ := page["tasks"].([]any); len(tasks) != 1 || page["nextPageToken"] == "" {
		t.Errorf("ListTasks page_size 1: %v, want one task and a next page token", page)
	}
	sent := result(call("SendMessage", `{"message":{"message_id":"m-snake","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":{"snake_key":{"inner_key":1}}},"configuration":{"return_immediately":true}}`))
	task2, _ := sent["task"].(map[string]any)
	id, _ := task2["id"].(string)
	rec, err := mem.Get(t.Context(), a2a.TaskID(id))
	if err != nil {
		t.Fatalf("SendMessage with proto field names: %v (answer %v)", err, sent)
	}
	msg := rec.Task.History[0]
	if msg.ID != "m-snake" || fmt.Sprint(msg.Metadata) != "map[snake_key:map[inner_key:1]]" {
		t.Errorf("stored message %q metadata %v, want m-snake with its metadata keys as sent", msg.ID, msg.Metadata)
	}
}

// code returns a JSON-RPC response's error code, 0 when it has none.
func code(out map[string]any) float64 {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// FuzzCamelCaseParams: re-encoding params that use proto field names never
// panics, yields JSON, and means the same request: the re-encoded params
// parse (with protojson) to the message the original parsed to.
func FuzzCamelCaseParams(f *testing.F) {
	for _, seed := range []struct{ method, params string }{
		{"GetTask", `{"id":"t-1","history_length":1}`},
		{"ListTasks", `{"page_size":2,"page_token":"x","context_id":"c","status_timestamp_after":"2026-01-01T00:00:00Z"}`},
		{"SendMessage", `{"message":{"message_id":"m","role":"ROLE_USER","parts":[{"text":"x"},{"data":{"a_b":[1,null]}}],"metadata":{"k_1":{}}},"configuration":{"history_length":0}}`},
		{"CreateTaskPushNotificationConfig", `{"task_id":"t","id":"p","url":"https://x"}`},
		{"SendStreamingMessage", `{"message":{"messageId":"m","parts":[{"raw":"AAE="}],"reference_task_ids":["a"]}}`},
		{"ListTasks", `{"page_size":"NaN"}`},
		{"Unknown", `{"a_b":1}`},
	} {
		f.Add(seed.method, seed.params)
	}
	f.Fuzz(func(t *testing.T, method, params string) {
		out, ok := camelCaseParams(method, json.RawMessage(params))
		if !ok {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%s %s: re-encoded to invalid JSON %s", method, params, out)
		}
		_, before := jsonrpcParams(method)
		_, after := jsonrpcParams(method)
		if err := protojson.Unmarshal([]byte(params), before); err != nil {
			t.Fatalf("%s %s: accepted, but does not parse: %v", method, params, err)
		}
		if err := protojson.Unmarshal(out, after); err != nil {
			t.Fatalf("%s %s: re-encoded %s does not parse: %v", method, params, out, err)
		}
		if !proto.Equal(before, after) {
			t.Fatalf("%s %s: re-encoded %s means %v, not %v", method, params, out, after, before)
		}
	})
}

// FuzzIsJSONRPCResult: whatever the request ID (a2a-go echoes a string, a
// number or null), an answer encoded as a2a-go encodes it is a result
// exactly when it carries one: an error answer is never taken for a
// success, which would let a2a-go's parse error text through.
func FuzzIsJSONRPCResult(f *testing.F) {
	for _, id := range []string{"", "x", `","result":{`, `\`, `\\"`, `a\"b`, "\u2028", `"error"`} {
		f.Add(id, false, 0.0)
	}
	f.Add("", true, 12345678901234567890.0)
	f.Add("", true, -1.5e-300)
	f.Fuzz(func(t *testing.T, s string, numeric bool, n float64) {
		var id any = s
		switch {
		case numeric && !math.IsNaN(n) && !math.IsInf(n, 0):
			id = n
		case numeric:
			id = nil
		}
		type answer struct {
			JSONRPC string `json:"jsonrpc"`
			ID      any    `json:"id"`
			Result  any    `json:"result,omitempty"`
			Error   any    `json:"error,omitempty"`
		}
		ok, _ := json.Marshal(answer{JSONRPC: "2.0", ID: id, Result: map[string]any{"error": 1}})
		bad, _ := json.Marshal(answer{JSONRPC: "2.0", ID: id, Error: map[string]any{"code": -32700, "result": 1}})
		if !isJSONRPCResult(ok) {
			t.Errorf("%s: not taken for a result", ok)
		}
		if isJSONRPCResult(bad) {
			t.Errorf("%s: an error answer taken for a result", bad)
		}
	})
}

// TestHasUnderscoreKey: only object keys count, not values (ROLE_USER),
// escaped quotes do not end a string, white space may precede the colon.
func TestHasUnderscoreKey(t *testing.T) {
	for params, want := range map[string]bool{
		`{"message":{"role":"ROLE_USER"}}`:     false,
		`{"message":{"message_id":"m"}}`:       true,
		`{"a":["x_y",{"b":"_"}]}`:              false,
		`{"a":[{"k_1" :1}]}`:                   true,
		`{"a":"q\"_\":","b":1}`:                false,
		`{"a\"_b":1}`:                          true,
		`{"metadata":{"k":{"deep_key":null}}}`: true,
		`{"id":"t_1","historyLength":2}`:       false,
		`{"x":"_"`:                             false,
	} {
		if got := hasUnderscoreKey([]byte(params)); got != want {
			t.Errorf("hasUnderscoreKey(%s) = %v, want %v", params, got, want)
		}
	}
	if n := testing.AllocsPerRun(10, func() { hasUnderscoreKey([]byte(`{"message":{"role":"ROLE_USER","parts":[{"text":"_"}]}}`)) }); n != 0 {
		t.Errorf("hasUnderscoreKey allocates %v times", n)
	}
}
