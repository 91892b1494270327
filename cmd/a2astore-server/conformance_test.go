package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The conformance tests of issue 29: what the official clients — the TCK's,
// a2a-go's, the JavaScript SDK's (interop/js) and the Python SDK's, whose
// reading of an answer pythonReads encodes — get from the server, on every
// transport.

// wireReq is one A2A call, encoded by call in each transport's own form.
type wireReq struct {
	method  string            // the A2A (JSON-RPC) method name
	task    a2a.TaskID        // the task named; SendMessage: the task continued
	header  map[string]string // HTTP headers, gRPC metadata
	query   string            // HTTP query string (HTTP transports)
	history *int              // SendMessage configuration.historyLength, GetTask historyLength
	noParts bool              // SendMessage: a message without parts (invalid params)
}

// streaming reports whether the method answers with a stream.
func (r wireReq) streaming() bool {
	return r.method == "SendStreamingMessage" || r.method == "SubscribeToTask"
}

// wireAns is an answer as it came over the wire.
type wireAns struct {
	status      int    // HTTP status
	contentType string // HTTP Content-Type
	body        []byte // HTTP body, whole
	grpc        *status.Status
	grpcMsg     proto.Message // gRPC: the (first) response message
}

// call makes one call over tr and returns the answer, a stream read to its
// end (or its first error) within callBound.
func call(t *testing.T, ts *testServer, tr a2a.TransportProtocol, r wireReq) wireAns {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callBound)
	defer cancel()
	msg := map[string]any{"messageId": a2a.NewMessageID(), "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hello"}}}
	if r.noParts {
		msg["parts"] = []any{}
	}
	if r.task != "" {
		msg["taskId"] = string(r.task)
	}
	send := map[string]any{"message": msg}
	if r.history != nil {
		send["configuration"] = map[string]any{"historyLength": *r.history}
	}
	const cfgID = "cfg-1"
	var verb, path string
	var params any
	switch r.method {
	case "SendMessage", "SendStreamingMessage":
		verb, path, params = http.MethodPost, map[string]string{"SendMessage": "/message:send", "SendStreamingMessage": "/message:stream"}[r.method], send
	case "GetTask":
		get := map[string]any{"id": r.task}
		verb, path, params = http.MethodGet, "/tasks/"+url.PathEscape(string(r.task)), get
		if r.history != nil {
			get["historyLength"] = *r.history
			path += "?historyLength=" + strconv.Itoa(*r.history)
		}
	case "SubscribeToTask":
		verb, path, params = http.MethodPost, "/tasks/"+url.PathEscape(string(r.task))+":subscribe", map[string]any{"id": r.task}
	case "CreateTaskPushNotificationConfig":
		params = map[string]any{"taskId": r.task, "id": cfgID, "url": "https://example.com/hook"}
		verb, path = http.MethodPost, "/tasks/"+url.PathEscape(string(r.task))+"/pushNotificationConfigs"
	case "GetTaskPushNotificationConfig":
		verb, path, params = http.MethodGet, "/tasks/"+url.PathEscape(string(r.task))+"/pushNotificationConfigs/"+cfgID, map[string]any{"taskId": r.task, "id": cfgID}
	case "ListTaskPushNotificationConfigs":
		verb, path, params = http.MethodGet, "/tasks/"+url.PathEscape(string(r.task))+"/pushNotificationConfigs", map[string]any{"taskId": r.task}
	case "DeleteTaskPushNotificationConfig":
		verb, path, params = http.MethodDelete, "/tasks/"+url.PathEscape(string(r.task))+"/pushNotificationConfigs/"+cfgID, map[string]any{"taskId": r.task, "id": cfgID}
	default:
		t.Fatalf("call: method %s", r.method)
	}
	var u string
	var body []byte
	switch tr {
	case a2a.TransportProtocolJSONRPC:
		u = ts.httpBase + jsonrpcPath
		verb = http.MethodPost
		body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 5, "method": r.method, "params": params})
	case a2a.TransportProtocolHTTPJSON:
		u = ts.httpBase + path
		if verb == http.MethodPost {
			body, _ = json.Marshal(params)
		}
	default:
		return callGRPC(t, ctx, ts, r, msg)
	}
	if r.query != "" {
		u += map[bool]string{false: "?", true: "&"}[strings.Contains(u, "?")] + r.query
	}
	req, err := http.NewRequestWithContext(ctx, verb, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.streaming() {
		req.Header.Set("Accept", "text/event-stream")
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", r.method, u, tr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && ctx.Err() == nil {
		t.Fatalf("%s over %s: reading the answer: %v", r.method, tr, err)
	}
	return wireAns{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}
}

func callGRPC(t *testing.T, ctx context.Context, ts *testServer, r wireReq, msg map[string]any) wireAns {
	t.Helper()
	for k, v := range r.header {
		ctx = metadata.AppendToOutgoingContext(ctx, strings.ToLower(k), v)
	}
	pbMsg := &a2apb.Message{MessageId: msg["messageId"].(string), Role: a2apb.Role_ROLE_USER, TaskId: string(r.task)}
	if !r.noParts {
		pbMsg.Parts = []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hello"}}}
	}
	send := &a2apb.SendMessageRequest{Message: pbMsg}
	if r.history != nil {
		n := int32(*r.history)
		send.Configuration = &a2apb.SendMessageConfiguration{HistoryLength: &n}
	}
	var resp proto.Message
	var err error
	switch r.method {
	case "SendMessage":
		resp, err = ts.pb.SendMessage(ctx, send)
	case "GetTask":
		get := &a2apb.GetTaskRequest{Id: string(r.task)}
		if r.history != nil {
			n := int32(*r.history)
			get.HistoryLength = &n
		}
		resp, err = ts.pb.GetTask(ctx, get)
	case "CreateTaskPushNotificationConfig":
		resp, err = ts.pb.CreateTaskPushNotificationConfig(ctx, &a2apb.TaskPushNotificationConfig{TaskId: string(r.task), Id: "cfg-1", Url: "https://example.com/hook"})
	case "GetTaskPushNotificationConfig":
		resp, err = ts.pb.GetTaskPushNotificationConfig(ctx, &a2apb.GetTaskPushNotificationConfigRequest{TaskId: string(r.task), Id: "cfg-1"})
	case "ListTaskPushNotificationConfigs":
		resp, err = ts.pb.ListTaskPushNotificationConfigs(ctx, &a2apb.ListTaskPushNotificationConfigsRequest{TaskId: string(r.task)})
	case "DeleteTaskPushNotificationConfig":
		resp, err = ts.pb.DeleteTaskPushNotificationConfig(ctx, &a2apb.DeleteTaskPushNotificationConfigRequest{TaskId: string(r.task), Id: "cfg-1"})
	case "SendStreamingMessage", "SubscribeToTask":
		var stream grpc.ServerStreamingClient[a2apb.StreamResponse]
		if r.method == "SubscribeToTask" {
			stream, err = ts.pb.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: string(r.task)})
		} else {
			stream, err = ts.pb.SendStreamingMessage(ctx, send)
		}
		for err == nil {
			var m *a2apb.StreamResponse
			if m, err = stream.Recv(); err == nil && resp == nil {
				resp = m
			}
		}
		if err == io.EOF {
			err = nil
		}
	}
	return wireAns{grpc: status.Convert(err), grpcMsg: resp}
}

// a2aError is the A2A error an answer carries as the bindings encode it:
// the JSON-RPC error code, the HTTP status or the gRPC code name, and the
// reason of its google.rpc.ErrorInfo; "ok", "" when it carries none. A
// JSON-RPC stream's error may come as its first event.
func (a wireAns) a2aError(tr a2a.TransportProtocol) (code, reason string) {
	if tr == a2a.TransportProtocolGRPC {
		if a.grpc.Code() == 0 {
			return "ok", ""
		}
		for _, d := range a.grpc.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == a2a.ProtocolDomain {
				reason = info.GetReason()
			}
		}
		return a.grpc.Code().String(), reason
	}
	var out jsonError
	if json.Unmarshal(a.firstData(), &out) != nil || out.Error == nil {
		if a.status >= 300 {
			return strconv.Itoa(a.status), ""
		}
		return "ok", ""
	}
	code = out.Error.Code.String()
	if tr == a2a.TransportProtocolHTTPJSON {
		code = strconv.Itoa(a.status)
	}
	return code, out.reason()
}

// firstData is the answer's body, or the data of its first event when it
// is an event stream.
func (a wireAns) firstData() []byte {
	if !strings.HasPrefix(a.contentType, "text/event-stream") {
		return a.body
	}
	for _, d := range sseData(a.body) {
		return d
	}
	return nil
}

// sseData returns the data of each event of a Server-Sent Events body.
func sseData(body []byte) [][]byte {
	var out [][]byte
	var cur []byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if cur != nil {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			if cur != nil {
				cur = append(cur, '\n')
			}
			cur = append(cur, strings.TrimPrefix(d, " ")...)
		}
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out
}

// jsonError is a JSON-RPC or HTTP+JSON error body.
type jsonError struct {
	Error *struct {
		Code    json.Number `json:"code"`
		Message string      `json:"message"`
		Details []errorInfo `json:"details"` // HTTP+JSON
		Data    []errorInfo `json:"data"`    // JSON-RPC
	} `json:"error"`
}

type errorInfo struct {
	Type   string `json:"@type"`
	Reason string `json:"reason"`
	Domain string `json:"domain"`
}

func (e jsonError) reason() string {
	for _, d := range append(e.Error.Details, e.Error.Data...) {
		if d.Type == "type.googleapis.com/google.rpc.ErrorInfo" && d.Domain == a2a.ProtocolDomain {
			return d.Reason
		}
	}
	return ""
}

// pythonJSONRPCErrors is the Python SDK's JSON_RPC_ERROR_CODE_MAP, reversed:
// the error class its JSON-RPC client raises for a code.
var pythonJSONRPCErrors = map[string]string{
	"-32001": "TaskNotFoundError", "-32002": "TaskNotCancelableError", "-32003": "PushNotificationNotSupportedError",
	"-32004": "UnsupportedOperationError", "-32005": "ContentTypeNotSupportedError", "-32006": "InvalidAgentResponseError",
	"-32007": "ExtendedAgentCardNotConfiguredError", "-32008": "ExtensionSupportRequiredError", "-32009": "VersionNotSupportedError",
	"-32600": "InvalidRequestError", "-32601": "MethodNotFoundError", "-32602": "InvalidParamsError", "-32603": "InternalError",
}

// pythonClass is the Python SDK's A2A_REASON_TO_ERROR: the class its
// HTTP+JSON and gRPC clients raise for an ErrorInfo reason.
func pythonClass(reason string) string {
	var b strings.Builder
	for w := range strings.SplitSeq(strings.ToLower(reason), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String() + "Error"
}

// pythonReads is the exception the official Python SDK's client (a2a-sdk
// 1.0: client/transports/jsonrpc.py, rest.py, grpc.py, http_helpers.py)
// raises for an answer — "ok" when it raises none — as issue 29 measured
// it and its source reads:
//
//   - JSON-RPC: any status but 2xx is a generic A2AClientError ("HTTP
//     Error 404: …") before the body is looked at; a 2xx answer to a
//     streaming call that is an event stream is read event by event, one
//     that is not as one JSON-RPC response; an error response raises the
//     class of its code.
//   - HTTP+JSON: a failed status raises the class of the ErrorInfo reason
//     in the error body, a generic error without one.
//   - gRPC: a status raises the class of its A2A-domain ErrorInfo reason,
//     a generic error without one.
func pythonReads(tr a2a.TransportProtocol, streaming bool, a wireAns) string {
	switch tr {
	case a2a.TransportProtocolGRPC:
		if a.grpc.Code() == 0 {
			return "ok"
		}
		if _, reason := a.a2aError(tr); reason != "" {
			return pythonClass(reason)
		}
		return "A2AClientError(gRPC " + a.grpc.Code().String() + ")"
	case a2a.TransportProtocolHTTPJSON:
		if a.status < 300 {
			return "ok"
		}
		var out jsonError
		if json.Unmarshal(a.body, &out) == nil && out.Error != nil && out.reason() != "" {
			return pythonClass(out.reason())
		}
		return fmt.Sprintf("A2AClientError(HTTP %d)", a.status)
	}
	if a.status < 200 || a.status > 299 {
		return fmt.Sprintf("A2AClientError(HTTP %d)", a.status)
	}
	responses := [][]byte{a.body}
	if streaming && strings.Contains(a.contentType, "text/event-stream") {
		responses = sseData(a.body)
	}
	for _, r := range responses {
		var out jsonError
		if json.Unmarshal(r, &out) != nil {
			return "A2AClientError(JSON)"
		}
		if out.Error != nil {
			if cls, ok := pythonJSONRPCErrors[out.Error.Code.String()]; ok {
				return cls
			}
			return "A2AClientError(JSON-RPC " + out.Error.Code.String() + ")"
		}
	}
	return "ok"
}

// spec is the A2A v1.0 encoding (§5.4) of one error on each transport:
// JSON-RPC code, HTTP status, gRPC code; and its ErrorInfo reason.
type spec struct {
	jsonrpc, http, grpc, reason string
}

func (s spec) code(tr a2a.TransportProtocol) string {
	return map[a2a.TransportProtocol]string{a2a.TransportProtocolJSONRPC: s.jsonrpc, a2a.TransportProtocolHTTPJSON: s.http, a2a.TransportProtocolGRPC: s.grpc}[tr]
}

var (
	specVersionNotSupported = spec{"-32009", "400", "Unimplemented", "VERSION_NOT_SUPPORTED"}
	specPushNotSupported    = spec{"-32003", "400", "Unimplemented", "PUSH_NOTIFICATION_NOT_SUPPORTED"}
	specTaskNotFound        = spec{"-32001", "404", "NotFound", "TASK_NOT_FOUND"}
	specUnsupported         = spec{"-32004", "400", "Unimplemented", "UNSUPPORTED_OPERATION"}
	specInvalidParams       = spec{"-32602", "400", "InvalidArgument", "INVALID_PARAMS"}
)

// checkError checks that an answer is the error s on tr — code and
// ErrorInfo reason (W10) — in the form W7 gives a streaming call's early
// error (a plain response, never an event stream), and that the Python
// SDK's client raises the error's class.
func checkError(t *testing.T, what string, tr a2a.TransportProtocol, r wireReq, a wireAns, s spec) {
	t.Helper()
	code, reason := a.a2aError(tr)
	if code != s.code(tr) || reason != s.reason {
		t.Errorf("%s over %s: %s reason %q, want %s reason %s (body %s)", what, tr, code, reason, s.code(tr), s.reason, a.body)
	}
	if tr != a2a.TransportProtocolGRPC && strings.HasPrefix(a.contentType, "text/event-stream") {
		t.Errorf("%s over %s: an event stream; an error decided before the first event is a plain response (W7)", what, tr)
	}
	if got, want := pythonReads(tr, r.streaming(), a), pythonClass(s.reason); got != want {
		t.Errorf("%s over %s: the Python SDK's client raises %s, want %s", what, tr, got, want)
	}
}

// counter returns the value of a counter of the server's registry with
// the given label value (0 when absent).
func counter(t *testing.T, ts *testServer, name, label, value string) float64 {
	t.Helper()
	mfs, err := ts.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestVersionNegotiation (SPEC W8, A2A §3.6.2): a call naming a version the
// server does not serve — 99.0, 0.3, a malformed value, by header, gRPC
// metadata or the A2A-Version query parameter — is VersionNotSupportedError
// on every transport (-32009, 400, UNIMPLEMENTED, reason
// VERSION_NOT_SUPPORTED; the Python SDK raises VersionNotSupportedError),
// the streaming methods answered plainly (W7); 1.0 (with or without a patch
// number) and no version at all are served. The refusals are counted.
// a2a-go v2.3.1 serves every version.
func TestVersionNegotiation(t *testing.T) {
	ts := startServer(t, config{Backend: "mem", Agent: agentConfig{StatusUpdates: 1}})
	task := send(t, ts.clients[a2a.TransportProtocolJSONRPC], "ctx-v", "hi")
	refused := 0
	for _, tr := range transports {
		for _, method := range []string{"SendMessage", "SendStreamingMessage", "GetTask"} {
			r := wireReq{method: method}
			if method == "GetTask" {
				r.task = task.ID
			}
			for _, v := range []string{"", "1.0", "1.0.1"} {
				r.header = map[string]string{"A2A-Version": v}
				if v == "" {
					r.header = nil
				}
				if code, _ := call(t, ts, tr, r).a2aError(tr); code != "ok" {
					t.Errorf("%s over %s with A2A-Version %q: %s, want it served", method, tr, v, code)
				}
			}
			for _, v := range []string{"99.0", "0.3", "1.1", "banana"} {
				r.header, r.query = map[string]string{"A2A-Version": v}, ""
				checkError(t, method+" A2A-Version "+v, tr, r, call(t, ts, tr, r), specVersionNotSupported)
				refused++
				if tr == a2a.TransportProtocolGRPC {
					continue
				}
				r.header, r.query = nil, "A2A-Version="+v
				checkError(t, method+" ?A2A-Version="+v, tr, r, call(t, ts, tr, r), specVersionNotSupported)
				refused++
			}
		}
	}
	if got := counter(t, ts, "a2astore_protocol_version_calls_total", "version", "unsupported"); got != float64(refused) {
		t.Errorf("a2astore_protocol_version_calls_total{version=unsupported} = %v, want %d", got, refused)
	}
	if got := counter(t, ts, "a2astore_protocol_version_calls_total", "version", "1.0"); got == 0 {
		t.Error("no call counted as 1.0: a2a-go's clients send A2A-Version 1.0")
	}
	if got := counter(t, ts, "a2astore_protocol_version_calls_total", "version", "none"); got == 0 {
		t.Error("no call counted as none: calls without A2A-Version were made")
	}
}

// TestPushConfigNotDeclared (A2A §3.3.4): the card declares no push
// notifications, so every push-config method answers
// PushNotificationNotSupportedError on every transport (-32003, 400,
// UNIMPLEMENTED), whatever task it names — one of the caller's, another
// caller's, one that does not exist — and whoever calls: the answer does
// not depend on the task, so it tells nothing about it. Before the
// capability check, TaskGuard answered not found for a task the caller
// cannot see.
func TestPushConfigNotDeclared(t *testing.T) {
	h := startHostile(t)
	own := h.taskOf(t, "alice")
	for _, tr := range transports {
		for _, method := range []string{"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"} {
			for _, c := range []struct {
				name   string
				task   a2a.TaskID
				caller string
			}{{"own task", own, "alice"}, {"another's task", own, "bob"}, {"missing task", a2a.NewTaskID(), "alice"}, {"anonymous", own, ""}} {
				r := wireReq{method: method, task: c.task}
				if c.caller != "" {
					r.header = map[string]string{callerHeader: c.caller}
				}
				checkError(t, method+" of "+c.name, tr, r, call(t, h.testServer, tr, r), specPushNotSupported)
			}
		}
	}
	h.stillServing(t)
}

// TestSendHistoryLength (A2A §3.2.4): SendMessage's
// configuration.historyLength trims the history of the task it returns on
// every transport (the agent leaves three messages: the user's and two of
// its own); a negative one is invalid params, also for a stream and over
// gRPC, whose conversion in a2a-go v2.3.1 drops it.
func TestSendHistoryLength(t *testing.T) {
	ts := startServer(t, config{Backend: "mem", Agent: agentConfig{StatusUpdates: 2, HistoryMessages: 2}})
	history := func(tr a2a.TransportProtocol, a wireAns) int {
		if tr == a2a.TransportProtocolGRPC {
			resp, _ := a.grpcMsg.(*a2apb.SendMessageResponse)
			return len(resp.GetTask().GetHistory())
		}
		var out struct {
			Result *struct {
				Task struct {
					History []json.RawMessage `json:"history"`
				} `json:"task"`
			} `json:"result"`
			Task struct {
				History []json.RawMessage `json:"history"`
			} `json:"task"`
		}
		if err := json.Unmarshal(a.body, &out); err != nil {
			t.Fatalf("%s: %s: %v", tr, a.body, err)
		}
		if out.Result != nil {
			return len(out.Result.Task.History)
		}
		return len(out.Task.History)
	}
	for _, tr := range transports {
		for _, n := range []*int{nil, new(5), new(1), new(0)} {
			a := call(t, ts, tr, wireReq{method: "SendMessage", history: n})
			want := 3
			if n != nil {
				want = min(*n, 3)
			}
			if code, _ := a.a2aError(tr); code != "ok" || history(tr, a) != want {
				t.Errorf("SendMessage over %s with historyLength %v: %s, %d history messages, want %d", tr, deref(n), code, history(tr, a), want)
			}
		}
		for _, method := range []string{"SendMessage", "SendStreamingMessage"} {
			r := wireReq{method: method, history: new(-1)}
			checkError(t, method+" with historyLength -1", tr, r, call(t, ts, tr, r), specInvalidParams)
		}
	}
}

func deref(n *int) any {
	if n == nil {
		return "unset"
	}
	return *n
}

// TestJSONRPCTrailingSlash: JSON-RPC answers at the URL the card gives and
// with a trailing slash, where clients that take the URL for a base post
// (the official TCK's: 60 of its tests got 404); nothing else under it.
func TestJSONRPCTrailingSlash(t *testing.T) {
	ts := startServer(t, config{Backend: "mem"})
	for _, path := range []string{jsonrpcPath, jsonrpcPath + "/"} {
		resp, err := http.Post(ts.httpBase+path, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"result"`) {
			t.Errorf("POST %s: %d %s, want a JSON-RPC result", path, resp.StatusCode, body)
		}
	}
	resp, err := http.Post(ts.httpBase+jsonrpcPath+"/x", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST %s/x: %d, want 404", jsonrpcPath, resp.StatusCode)
	}
}

// TestAgentCardCaching (A2A §8.6.1): the served card carries Cache-Control
// with max-age, an ETag and Last-Modified, and a client revalidating with
// the ETag gets 304.
func TestAgentCardCaching(t *testing.T) {
	ts := startServer(t, config{Backend: "mem"})
	resp, err := http.Get(ts.httpBase + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=") || etag == "" || resp.Header.Get("Last-Modified") == "" {
		t.Fatalf("agent card: Cache-Control %q, ETag %q, Last-Modified %q", cc, etag, resp.Header.Get("Last-Modified"))
	}
	req, _ := http.NewRequest(http.MethodGet, ts.httpBase+"/.well-known/agent-card.json", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match with the ETag: %d, want 304", resp.StatusCode)
	}
}

// TestPythonClientReadsErrors (SPEC W7, W10; issue 29): every error the
// official Python SDK's client disagreed on is one it now raises as the
// A2A error the spec means, on every transport (its reading of an answer
// is pythonReads): streaming calls that fail before their first event
// (JSON-RPC answered 404/400 before, which it turns into a generic HTTP
// error), gRPC INVALID_ARGUMENT from GRPCRequestValidator (no ErrorInfo
// before, so no InvalidParamsError), an unsupported A2A-Version (served
// before) and a push-config call the card does not declare.
func TestPythonClientReadsErrors(t *testing.T) {
	h := startHostile(t)
	finished := h.taskOf(t, "alice")
	alice := map[string]string{callerHeader: "alice"}
	for _, c := range []struct {
		name string
		req  wireReq
		want spec
	}{
		{"subscribe to a missing task", wireReq{method: "SubscribeToTask", task: a2a.NewTaskID(), header: alice}, specTaskNotFound},
		{"subscribe to a finished task", wireReq{method: "SubscribeToTask", task: finished, header: alice}, specUnsupported},
		{"subscribe to another's task", wireReq{method: "SubscribeToTask", task: finished, header: map[string]string{callerHeader: "bob"}}, specTaskNotFound},
		{"stream into a missing task", wireReq{method: "SendStreamingMessage", task: a2a.NewTaskID(), header: alice}, specTaskNotFound},
		{"stream without parts", wireReq{method: "SendStreamingMessage", noParts: true, header: alice}, specInvalidParams},
		{"GetTask historyLength -1", wireReq{method: "GetTask", task: finished, history: new(-1), header: alice}, specInvalidParams},
		{"send with A2A-Version 9.9", wireReq{method: "SendMessage", header: map[string]string{callerHeader: "alice", "A2A-Version": "9.9"}}, specVersionNotSupported},
		{"stream with A2A-Version 9.9", wireReq{method: "SendStreamingMessage", header: map[string]string{callerHeader: "alice", "A2A-Version": "9.9"}}, specVersionNotSupported},
		{"push config", wireReq{method: "ListTaskPushNotificationConfigs", task: finished, header: alice}, specPushNotSupported},
	} {
		for _, tr := range transports {
			checkError(t, c.name, tr, c.req, call(t, h.testServer, tr, c.req), c.want)
		}
	}
	// And a stream that starts is read as one.
	for _, tr := range transports {
		r := wireReq{method: "SendStreamingMessage", header: alice}
		if got := pythonReads(tr, true, call(t, h.testServer, tr, r)); got != "ok" {
			t.Errorf("a stream over %s: the Python SDK's client raises %s", tr, got)
		}
	}
	h.stillServing(t)
}
