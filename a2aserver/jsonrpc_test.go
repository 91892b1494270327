package a2aserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine/memstore"
)

// TestJSONRPCParamsCompat (W3, W7): params that are JSON but not a valid
// request are -32602 with a fixed message on every method, never -32700
// and never quoting the value, as a plain JSON-RPC error response also for
// the streaming methods; the request ID is echoed; valid requests and
// requests that are not JSON at all go to a2a-go unchanged.
func TestJSONRPCParamsCompat(t *testing.T) {
	h := a2asrv.NewHandler(newHeldAgent(), a2asrv.WithTaskStore(TaskStore(memstore.New(memstore.Options{}))))
	srv := httptest.NewServer(JSONRPCParamsCompat(a2asrv.NewJSONRPCHandler(h)))
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
	code := func(out map[string]any) float64 {
		e, _ := out["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c
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
		// A streaming method's plain error is 400, so that a2a-go's
		// client, which reads any 200 as an event stream, sees an error.
		if want := map[bool]int{false: http.StatusOK, true: http.StatusBadRequest}[strings.Contains(c.method, "Stream") || strings.HasPrefix(c.method, "Subscribe")]; status != want {
			t.Errorf("%s: HTTP status %d, want %d", c.method, status, want)
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
}
