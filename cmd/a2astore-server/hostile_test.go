package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/openfinding"
	"github.com/a2astore/a2astore/internal/rawhttp"
)

// The hostile-client suite: each finding of issue 14, tried as an attacker
// would against a server with -policy owner on all three transports. Each
// test checks the answer, that nothing was stored, and that the server
// still serves afterwards.

const callerHeader = "X-A2astore-Caller"

// syncBuffer is a log sink the server writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// hostile is a server under attack: owner policy, short limits, and an
// agent that holds every task whose message says "hold" until released.
type hostile struct {
	*testServer
	log     *syncBuffer
	held    chan a2a.TaskID // a held task reached its hold
	release chan struct{}
}

func startHostile(t *testing.T) *hostile {
	t.Helper()
	h := &hostile{log: &syncBuffer{}, held: make(chan a2a.TaskID, 16), release: make(chan struct{})}
	cfg := config{
		Backend: "mem", Policy: "owner", CallerHeader: callerHeader,
		Serve: a2aserver.ServeLimits{
			ReadTimeout:  2 * time.Second,
			WriteTimeout: 2 * time.Second,
			IdleTimeout:  time.Second,
		},
		Agent: agentConfig{StatusUpdates: 1, HistoryMessages: 1, beforeComplete: func(ctx context.Context, execCtx *a2asrv.ExecutorContext) {
			if execCtx.Message == nil || len(execCtx.Message.Parts) == 0 || execCtx.Message.Parts[0].Text() != "hold" {
				return
			}
			h.held <- execCtx.TaskID
			select {
			case <-h.release:
			case <-ctx.Done():
			}
		}},
		Logger: slog.New(slog.NewTextHandler(h.log, nil)),
	}
	h.testServer = startServer(t, cfg)
	t.Cleanup(h.releaseHeld) // before the server's shutdown
	return h
}

// releaseHeld lets held tasks complete (once).
func (h *hostile) releaseHeld() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// asCallers returns a context whose calls carry the given identity header values
// (none: anonymous; two: a repeated header).
func asCallers(ctx context.Context, callers ...string) context.Context {
	if len(callers) == 0 {
		return ctx
	}
	return a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{callerHeader: callers})
}

// taskCount is how many tasks the store holds, whoever owns them.
func (h *hostile) taskCount(t *testing.T) int {
	t.Helper()
	resp, err := h.backend.List(t.Context(), &engine.ListRequest{IncludeTotalSize: true, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return resp.TotalSize
}

// stillServing checks every transport still answers alice, and returns the
// number of tasks it created.
func (h *hostile) stillServing(t *testing.T) int {
	t.Helper()
	for _, tr := range transports {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("still there?"))
		res, err := h.clients[tr].SendMessage(asCallers(t.Context(), "alice"), &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			t.Fatalf("after the attack, SendMessage over %s: %v", tr, err)
		}
		if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("after the attack, SendMessage over %s: %+v", tr, res)
		}
	}
	return len(transports)
}

// holdTask starts a task of alice's that stays working until h.release.
func (h *hostile) holdTask(t *testing.T) a2a.TaskID {
	t.Helper()
	res, err := h.clients[a2a.TransportProtocolJSONRPC].SendMessage(asCallers(t.Context(), "alice"), &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hold")),
		Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	if got := <-h.held; got != id {
		t.Fatalf("held %s, want %s", got, id)
	}
	return id
}

// answer is what a caller observes of a call on the wire: the code (the
// JSON-RPC error code, HTTP status or gRPC code; "ok" when the call got
// through) and the message, without per-response details (timestamps).
type answer struct {
	Code, Message string
}

// callBound bounds one call: a stream that stays open without answering
// (what an unguarded SubscribeToTask of a held task does) is reported as
// such instead of hanging the test.
const callBound = 5 * time.Second

// call runs one task-naming method over one transport as the given
// callers (header values) and returns what came back first: an error or
// "ok" for the first result or event. Streams are not read further.
func (h *hostile) call(t *testing.T, tr a2a.TransportProtocol, method string, id a2a.TaskID, callers ...string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callBound)
	defer cancel()
	msg := map[string]any{"messageId": a2a.NewMessageID(), "role": "ROLE_USER", "taskId": string(id), "parts": []any{map[string]any{"text": "let me in"}}}
	switch tr {
	case a2a.TransportProtocolJSONRPC:
		params := map[string]any{"id": string(id)}
		if strings.HasPrefix(method, "Send") {
			params = map[string]any{"message": msg}
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
		return h.httpAnswer(t, ctx, http.MethodPost, h.httpBase+jsonrpcPath, body, callers)
	case a2a.TransportProtocolHTTPJSON:
		path, verb, body := "/tasks/"+url.PathEscape(string(id)), http.MethodPost, []byte(nil)
		switch method {
		case "GetTask":
			verb = http.MethodGet
		case "CancelTask":
			path += ":cancel"
		case "SubscribeToTask":
			path += ":subscribe"
		case "SendMessage", "SendStreamingMessage":
			path = map[string]string{"SendMessage": "/message:send", "SendStreamingMessage": "/message:stream"}[method]
			body, _ = json.Marshal(map[string]any{"message": msg})
		}
		return h.httpAnswer(t, ctx, verb, h.httpBase+path, body, callers)
	}
	if len(callers) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, callerPairs(callers)...)
	}
	pbMsg := &a2apb.Message{MessageId: a2a.NewMessageID(), Role: a2apb.Role_ROLE_USER, TaskId: string(id),
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "let me in"}}}}
	var err error
	switch method {
	case "GetTask":
		_, err = h.pb.GetTask(ctx, &a2apb.GetTaskRequest{Id: string(id)})
	case "CancelTask":
		_, err = h.pb.CancelTask(ctx, &a2apb.CancelTaskRequest{Id: string(id)})
	case "SendMessage":
		_, err = h.pb.SendMessage(ctx, &a2apb.SendMessageRequest{Message: pbMsg})
	case "SubscribeToTask", "SendStreamingMessage":
		var stream grpc.ServerStreamingClient[a2apb.StreamResponse]
		if method == "SubscribeToTask" {
			stream, err = h.pb.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: string(id)})
		} else {
			stream, err = h.pb.SendStreamingMessage(ctx, &a2apb.SendMessageRequest{Message: pbMsg})
		}
		if err == nil {
			_, err = stream.Recv()
		}
	}
	if err == nil {
		return answer{Code: "ok"}
	}
	if ctx.Err() != nil {
		return answer{Code: "open", Message: "no answer within the bound"}
	}
	st := status.Convert(err)
	return answer{Code: st.Code().String(), Message: st.Message()}
}

func callerPairs(callers []string) []string {
	var kv []string
	for _, c := range callers {
		kv = append(kv, strings.ToLower(callerHeader), c)
	}
	return kv
}

// httpAnswer sends one HTTP request and reads the first answer: a JSON
// body (JSON-RPC result or error, HTTP+JSON resource or error) or the first
// Server-Sent Event.
func (h *hostile) httpAnswer(t *testing.T, ctx context.Context, verb, u string, body []byte, callers []string) answer {
	t.Helper()
	resp, err := doAs(t, ctx, verb, u, body, callers)
	if err != nil && ctx.Err() != nil {
		return answer{Code: "open", Message: "no answer within the bound"}
	}
	if err != nil {
		t.Fatalf("%s %s: %v", verb, u, err)
	}
	defer resp.Body.Close()
	payload, _ := firstPayload(resp)
	if len(payload) == 0 && ctx.Err() != nil {
		return answer{Code: "open", Message: "no answer within the bound"}
	}
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    json.Number `json:"code"`
			Message string      `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(payload, &out)
	switch {
	case out.Error != nil:
		// JSON-RPC: the error code; HTTP+JSON: the HTTP status in the
		// error body (also for an error inside an SSE stream, which
		// comes with status 200; see TestStreamErrors for which form).
		return answer{Code: out.Error.Code.String(), Message: out.Error.Message}
	case resp.StatusCode >= 300:
		return answer{Code: strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(payload))}
	}
	return answer{Code: "ok"}
}

// doAs sends one JSON request carrying the identity header once per
// caller.
func doAs(t *testing.T, ctx context.Context, verb, u string, body []byte, callers []string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, verb, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, c := range callers {
		req.Header.Add(callerHeader, c)
	}
	return http.DefaultClient.Do(req)
}

// firstPayload reads the first answer of an HTTP response: its body, or
// the data of its first Server-Sent Event; stream says which.
func firstPayload(resp *http.Response) (payload []byte, stream bool) {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		payload, _ = io.ReadAll(resp.Body)
		return payload, false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			return []byte(strings.TrimSpace(d)), true
		}
	}
	return nil, true
}

var taskMethods = []string{"GetTask", "CancelTask", "SubscribeToTask", "SendMessage", "SendStreamingMessage"}

// notFound and unauthenticated are the codes per transport.
var (
	notFound        = map[a2a.TransportProtocol]string{a2a.TransportProtocolJSONRPC: "-32001", a2a.TransportProtocolHTTPJSON: "404", a2a.TransportProtocolGRPC: "NotFound"}
	unauthenticated = map[a2a.TransportProtocol]string{a2a.TransportProtocolJSONRPC: "-31401", a2a.TransportProtocolHTTPJSON: "401", a2a.TransportProtocolGRPC: "Unauthenticated"}
)

// TestHostileBypass (findings 1, 2): while alice's task is running, every
// task-naming method answers bob and mallory exactly as for a task that
// does not exist, on every transport — same code, same message — and an
// anonymous caller is told to authenticate; nothing they send reaches the
// task. Checked by removing TaskGuard from newServer: SubscribeToTask
// streams alice's task to bob, SendMessage and CancelTask answer
// differently for it (500 "task execution is already in progress",
// "setup failed").
func TestHostileBypass(t *testing.T) {
	h := startHostile(t)
	id := h.holdTask(t)
	missing := a2a.NewTaskID()
	for _, tr := range transports {
		for _, m := range taskMethods {
			ref := h.call(t, tr, m, missing, "bob")
			if ref.Code != notFound[tr] {
				t.Errorf("%s %s of a missing task: %+v, want %s", tr, m, ref, notFound[tr])
			}
			for _, who := range []string{"bob", "mallory"} {
				if got := h.call(t, tr, m, id, who); got != ref {
					t.Errorf("%s %s of alice's running task as %s: %+v; a missing task: %+v", tr, m, who, got, ref)
				}
			}
			anonMissing, anon := h.call(t, tr, m, missing), h.call(t, tr, m, id)
			if anon.Code != unauthenticated[tr] || anon != anonMissing {
				t.Errorf("%s %s of alice's running task with no identity: %+v (missing task: %+v), want %s", tr, m, anon, anonMissing, unauthenticated[tr])
			}
		}
	}
	// Alice herself gets through: her subscription sees the task, then,
	// once the agent is released, its completion.
	events := h.clients[a2a.TransportProtocolGRPC].SubscribeToTask(asCallers(t.Context(), "alice"), &a2a.SubscribeToTaskRequest{ID: id})
	first := true
	for ev, err := range events {
		if err != nil {
			t.Fatalf("alice SubscribeToTask: %v", err)
		}
		if first {
			first = false
			h.releaseHeld()
		}
		if ev.TaskInfo().TaskID != id {
			t.Errorf("alice's subscription: event of %s", ev.TaskInfo().TaskID)
		}
	}
	// Nothing the others sent reached the task: created, working,
	// completed; no message of theirs in its history.
	after, err := h.backend.Get(t.Context(), id)
	if err != nil || after.Revision != 3 || after.Task.Status.State != a2a.TaskStateCompleted {
		t.Errorf("alice's task afterwards: %+v, %v; want completed at revision 3", after, err)
	}
	for _, m := range after.Task.History {
		if len(m.Parts) > 0 && m.Parts[0].Text() == "let me in" {
			t.Errorf("another caller's message reached alice's task")
		}
	}
	h.stillServing(t)
}

// TestHostileIdentity (finding 9): a repeated identity header is refused
// on every transport, whichever order its values come in; SendMessage with
// no identity is "unauthenticated", not "invalid params"; nothing is stored.
func TestHostileIdentity(t *testing.T) {
	h := startHostile(t)
	n := h.taskCount(t)
	for _, tr := range transports {
		// The same value twice, as two header lines (a2a-go's client
		// merges equal values, so this goes on the wire directly).
		for _, m := range taskMethods {
			if a := h.call(t, tr, m, "any", "alice", "alice"); a.Code != unauthenticated[tr] {
				t.Errorf("%s %s with the identity header twice: %+v, want %s", tr, m, a, unauthenticated[tr])
			}
		}
		for _, callers := range [][]string{{"alice", "bob"}, {"bob", "alice"}, {}} {
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("who am I"))
			_, err := h.clients[tr].SendMessage(asCallers(t.Context(), callers...), &a2a.SendMessageRequest{Message: msg})
			if !errors.Is(err, a2a.ErrUnauthenticated) {
				t.Errorf("%s SendMessage as %q: %v, want unauthenticated", tr, callers, err)
			}
			_, err = h.clients[tr].ListTasks(asCallers(t.Context(), callers...), &a2a.ListTasksRequest{})
			if !errors.Is(err, a2a.ErrUnauthenticated) {
				t.Errorf("%s ListTasks as %q: %v, want unauthenticated", tr, callers, err)
			}
		}
	}
	if got := h.taskCount(t); got != n {
		t.Errorf("%d tasks stored by refused callers", got-n)
	}
	h.stillServing(t)
	if !strings.Contains(h.log.String(), "trusted as sent") {
		t.Errorf("no startup warning that the identity header is trusted as sent:\n%s", h.log.String())
	}
}

// TestHostileBodies (finding 3): a 50 MB request is answered 413 without
// being read (declared length) or after the limit (chunked), and the heap
// does not grow by its size; gRPC refuses a message over the limit; a body
// within the limit whose task would exceed the store's size limit is
// invalid params. Nothing is stored. Checked by removing the Content-Length
// check (the declared body is read until the read timeout: 408) and the
// body limit (the chunked body is buffered whole: the heap check fails).
func TestHostileBodies(t *testing.T) {
	h := startHostile(t)
	n := h.taskCount(t)
	addr := h.httpLn.Addr().String()

	for _, path := range []string{jsonrpcPath, "/message:send"} {
		c := rawhttp.Dial(t, addr)
		c.Send(t, []string{"POST " + path + " HTTP/1.1", "Host: x", "Content-Type: application/json", callerHeader + ": alice",
			fmt.Sprint("Content-Length: ", 50<<20)}, "{")
		if code := c.Status(t); code != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s with a declared 50 MB body: %d, want 413", path, code)
		}
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := rawhttp.Dial(t, addr)
	c.Send(t, []string{"POST " + jsonrpcPath + " HTTP/1.1", "Host: x", "Content-Type: application/json", callerHeader + ": alice",
		"Transfer-Encoding: chunked"}, "")
	c.Flood(50 << 20)
	if code := c.Status(t); code != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked 50 MB JSON-RPC body: %d, want 413", code)
	}
	_ = c.Close()
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("a chunked 50 MB body allocated %d MB; want it cut at the 4 MiB limit", grew>>20)
	}

	// gRPC: over the message limit.
	ctx := metadata.AppendToOutgoingContext(t.Context(), strings.ToLower(callerHeader), "alice")
	big := &a2apb.Message{MessageId: "big", Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: strings.Repeat("a", 5<<20)}}}}
	if _, err := h.pb.SendMessage(ctx, &a2apb.SendMessageRequest{Message: big}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gRPC SendMessage of 5 MiB: %v, want RESOURCE_EXHAUSTED", err)
	}

	// Within the body limit, over the task limit (2 MiB): invalid params
	// naming the limit, on every transport.
	text := strings.Repeat("a", 3<<20)
	for _, tr := range transports {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		_, err := h.clients[tr].SendMessage(asCallers(t.Context(), "alice"), &a2a.SendMessageRequest{Message: msg})
		if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "size or nesting limit") {
			t.Errorf("%s SendMessage of a 3 MiB task: %v, want invalid params naming the limit", tr, err)
		}
	}
	if got := h.taskCount(t); got != n {
		t.Errorf("%d tasks stored by oversize requests", got-n)
	}
	h.stillServing(t)
}

// nestedStruct is a protobuf Struct nested depth levels deep.
func nestedStruct(depth int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{"leaf": structpb.NewBoolValue(true)}}
	for range depth - 1 {
		s = &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStructValue(s)}}
	}
	return s
}

// nestedJSON is a JSON object nested depth levels deep.
func nestedJSON(depth int) string {
	return strings.Repeat(`{"k":`, depth-1) + `{"leaf":true}` + strings.Repeat("}", depth-1)
}

// TestHostileShapes (finding 5): metadata nested past the depth limit and
// a data part gRPC cannot carry are refused with invalid params on every
// transport; nothing is stored; a gRPC traversal of everything stored
// still completes. Checked by disabling engine.Limits (MaxDepth -1) and the
// adapter's servable check: the tasks are stored and the gRPC traversal
// fails on them.
func TestHostileShapes(t *testing.T) {
	h := startHostile(t)
	n := h.taskCount(t)
	for _, depth := range []int{engine.DefaultMaxDepth + 1, 6000} {
		body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"deep","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":` + nestedJSON(depth) + `}}}`
		if a := h.postJSON(t, jsonrpcPath, body, "alice"); a.Code != "-32602" {
			t.Errorf("JSON-RPC metadata %d deep: %+v, want -32602", depth, a)
		}
		rest := `{"message":{"messageId":"deep","role":"ROLE_USER","parts":[{"data":` + nestedJSON(depth) + `}]}}`
		if a := h.postJSON(t, "/message:send", rest, "alice"); a.Code != "400" {
			t.Errorf("HTTP+JSON data part %d deep: %+v, want 400", depth, a)
		}
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), strings.ToLower(callerHeader), "alice")
	deep := &a2apb.Message{MessageId: "deep", Role: a2apb.Role_ROLE_USER, Metadata: nestedStruct(engine.DefaultMaxDepth + 1),
		Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "x"}}}}
	if _, err := h.pb.SendMessage(ctx, &a2apb.SendMessageRequest{Message: deep}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("gRPC metadata %d deep: %v, want INVALID_ARGUMENT", engine.DefaultMaxDepth+1, err)
	}
	for name, part := range map[string]string{"list data": `{"data":[1,2]}`, "number data": `{"data":5}`, "no content": `{"mediaType":"text/plain"}`} {
		body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"p","role":"ROLE_USER","parts":[` + part + `]}}}`
		if a := h.postJSON(t, jsonrpcPath, body, "alice"); a.Code != "-32602" {
			t.Errorf("JSON-RPC part with %s: %+v, want -32602", name, a)
		}
	}
	if got := h.taskCount(t); got != n {
		t.Errorf("%d tasks stored with shapes past the limits", got-n)
	}
	made := h.stillServing(t)
	if tasks := h.grpcTraversal(t, "alice", 2); tasks != made {
		t.Errorf("gRPC traversal read %d tasks, want %d", tasks, made)
	}
}

// grpcTraversal reads every task caller can see with a2a-go's gRPC client,
// page by page, and returns how many there were; a page that fails fails
// the test.
func (h *hostile) grpcTraversal(t *testing.T, caller string, pageSize int) int {
	t.Helper()
	tasks := 0
	req := &a2a.ListTasksRequest{PageSize: pageSize}
	for {
		resp, err := h.clients[a2a.TransportProtocolGRPC].ListTasks(asCallers(t.Context(), caller), req)
		if err != nil {
			t.Fatalf("gRPC traversal after %d tasks: %v", tasks, err)
		}
		tasks += len(resp.Tasks)
		if resp.NextPageToken == "" {
			return tasks
		}
		req.PageToken = resp.NextPageToken
	}
}

// postJSON posts body to path as caller and returns the answer.
func (h *hostile) postJSON(t *testing.T, path, body, caller string) answer {
	t.Helper()
	return h.httpAnswer(t, t.Context(), http.MethodPost, h.httpBase+path, []byte(body), []string{caller})
}

// TestHostileConnections (finding 4): a client dribbling its body is cut
// with 408 once the read timeout passes (the test waits for the cut, not
// for the time); an idle keep-alive connection and a connection that never
// sends a request are closed; the server serves on. Checked by setting
// ServeLimits' timeouts to zero in newServer: the slow client is held and
// the idle connections stay open until the test's bound.
func TestHostileConnections(t *testing.T) {
	h := startHostile(t)
	addr := h.httpLn.Addr().String()

	slow := rawhttp.Dial(t, addr)
	slow.Send(t, []string{"POST " + jsonrpcPath + " HTTP/1.1", "Host: x", "Content-Type: application/json", "Content-Length: 100000"}, "{")
	if code, sent := slow.Dribble(t, 50*time.Millisecond); code != http.StatusRequestTimeout || sent >= 100000 {
		t.Errorf("slow body: %d after %d bytes, want 408", code, sent)
	}

	idle := rawhttp.Dial(t, addr)
	idle.Send(t, []string{"GET " + a2asrv.WellKnownAgentCardPath + " HTTP/1.1", "Host: x"}, "")
	if code := idle.Status(t); code != 200 {
		t.Fatalf("agent card: %d", code)
	}
	if !idle.Closed() {
		t.Error("idle keep-alive connection not closed")
	}
	if !rawhttp.Dial(t, addr).Closed() {
		t.Error("a connection that never sends a request is not closed")
	}
	h.stillServing(t)
}

// TestHostileArguments (finding 10, W3): out-of-range gRPC timestamps, a
// negative GetTask historyLength on every transport and a JSON-RPC
// statusTimestampAfter of "yesterday" are invalid params, never echoing
// the value. Checked by removing GRPCRequestValidator's timestamp and
// GetTask cases, TaskGuard's historyLength check and JSONRPCParamsCompat.
func TestHostileArguments(t *testing.T) {
	h := startHostile(t)
	ctx := metadata.AppendToOutgoingContext(t.Context(), strings.ToLower(callerHeader), "alice")
	for _, ts := range []*timestamppb.Timestamp{{Seconds: 1, Nanos: 2_000_000_000}, {Nanos: -5}, {Seconds: -1e13}, {Seconds: 1e13}} {
		_, err := h.pb.ListTasks(ctx, &a2apb.ListTasksRequest{StatusTimestampAfter: ts})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("gRPC statusTimestampAfter %v: %v, want INVALID_ARGUMENT", ts, err)
		}
	}
	id := h.taskOf(t, "alice")
	neg := -1
	for _, tr := range transports {
		_, err := h.clients[tr].GetTask(asCallers(t.Context(), "alice"), &a2a.GetTaskRequest{ID: id, HistoryLength: &neg})
		if !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("%s GetTask historyLength -1: %v, want invalid params", tr, err)
		}
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"statusTimestampAfter":"yesterday"}}`
	if a := h.postJSON(t, jsonrpcPath, body, "alice"); a.Code != "-32602" || strings.Contains(a.Message, "yesterday") {
		t.Errorf("JSON-RPC statusTimestampAfter \"yesterday\": %+v, want -32602 without the value", a)
	}
	if code, b := restGetAs(t, h, "/tasks", url.Values{"statusTimestampAfter": {"yesterday"}}, "alice"); code != 400 || strings.Contains(string(b), "yesterday") {
		t.Errorf("HTTP+JSON statusTimestampAfter=yesterday: %d %s, want 400 without the value", code, b)
	}
	h.stillServing(t)
}

// taskOf creates one task as caller and returns its ID.
func (h *hostile) taskOf(t *testing.T, caller string) a2a.TaskID {
	t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("mine"))
	res, err := h.clients[a2a.TransportProtocolJSONRPC].SendMessage(asCallers(t.Context(), caller), &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	return res.(*a2a.Task).ID
}

func restGetAs(t *testing.T, h *hostile, path string, q url.Values, caller string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, h.httpBase+path+"?"+q.Encode(), nil)
	req.Header.Set(callerHeader, caller)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestHostileLogs (finding 6): a multi-megabyte context ID or cancel ID
// costs a short log line, and canceling a completed task (an expected
// answer) is not logged at ERROR. Checked by removing a2aserver.LogHandler
// from newServer: the log grows by megabytes and shows level=ERROR.
func TestHostileLogs(t *testing.T) {
	h := startHostile(t)
	huge := strings.Repeat("c", 3<<20)
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","contextId":"` + huge + `","parts":[{"text":"x"}]}}}`
	if a := h.postJSON(t, jsonrpcPath, body, "alice"); a.Code != "-32602" {
		t.Errorf("3 MB context ID: %+v, want -32602", a)
	}
	body = `{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":"` + huge + `"}}`
	if a := h.postJSON(t, jsonrpcPath, body, "alice"); a.Code != "-32602" {
		t.Errorf("3 MB cancel ID: %+v, want -32602", a)
	}
	id := h.taskOf(t, "alice")
	for _, tr := range transports {
		if _, err := h.clients[tr].CancelTask(asCallers(t.Context(), "alice"), &a2a.CancelTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
			t.Errorf("%s cancel of a completed task: %v, want not cancelable", tr, err)
		}
	}
	h.stillServing(t)
	logs := h.log.String()
	if len(logs) > 64<<10 {
		t.Errorf("%d bytes of log for a few requests; want client values cut", len(logs))
	}
	for _, line := range strings.Split(logs, "\n") {
		if len(line) > 4<<10 {
			t.Errorf("log line of %d bytes: %.300s…", len(line), line)
		}
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("expected outcome logged at ERROR: %.500s", line)
		}
	}
}

// TestHostileMetrics (finding 7): /metrics is not served on the A2A
// listener (a caller cannot read what other callers' traffic cost there)
// but on the metrics listener.
func TestHostileMetrics(t *testing.T) {
	h := startHostile(t)
	h.taskOf(t, "alice")
	code, body := restGet(t, h.testServer, metricsPath, nil)
	if code == 200 || strings.Contains(string(body), "a2astore_store_list_examined_entries") {
		t.Errorf("GET /metrics on the A2A listener: %d %.200s; want no metrics", code, body)
	}
	resp, err := http.Get("http://" + h.metricsLn.Addr().String() + metricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "a2astore_store_operation_duration_seconds") {
		t.Errorf("metrics listener: %s %.200s", resp.Status, b)
	}
}

// stalledCall is a gRPC call made frame by frame whose request never
// completes: the headers, then either part of a GetTask message or all of
// it without the end of the stream. Until its connection closes it answers
// the server's pings and settings, as any HTTP/2 client does.
type stalledCall struct {
	ended chan string // how the server ended the call or the connection, once
}

func stallGRPC(t *testing.T, addr string, wholeMessage bool) *stalledCall {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	fr := http2.NewFramer(conn, conn)
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/lf.a2a.v1.A2AService/GetTask"},
		{":authority", "x"}, {"content-type", "application/grpc"}, {"te", "trailers"}, {strings.ToLower(callerHeader), "alice"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	// GetTaskRequest{id: "x"}: 3 bytes after the 5-byte gRPC prefix.
	msg := []byte{0, 0, 0, 0, 3, 0x0a, 0x01, 'x'}
	if !wholeMessage {
		msg = msg[:6]
	}
	if err := errors.Join(fr.WriteSettings(),
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}),
		fr.WriteData(1, false, msg)); err != nil {
		t.Fatal(err)
	}
	c := &stalledCall{ended: make(chan string, 1)}
	go func() {
		report := func(how string) {
			select {
			case c.ended <- how:
			default:
			}
		}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				report("connection closed")
				return
			}
			switch f := f.(type) {
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = fr.WritePing(true, f.Data)
				}
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.GoAwayFrame:
				report("GOAWAY")
			case *http2.RSTStreamFrame:
				report("stream reset")
			case *http2.HeadersFrame:
				if f.StreamEnded() {
					report("call ended")
				}
			}
		}
	}()
	return c
}

// end waits until the server ends the call or the connection, and says
// how; "" when neither happened within bound.
func (c *stalledCall) end(bound time.Duration) string {
	select {
	case how := <-c.ended:
		return how
	case <-time.After(bound):
		return ""
	}
}

// TestHostileGRPCStalledCall (review of #14, finding 3): a gRPC call whose
// request message never completes — part of the message, or all of it
// without the end of the stream — is ended once the read timeout (2 s)
// passes, though the client answers every keepalive ping; the server
// serves on. Checked by removing the request deadline (GRPCServer's tap):
// both calls are still open after the bound.
func TestHostileGRPCStalledCall(t *testing.T) {
	h := startHostile(t)
	for _, whole := range []bool{false, true} {
		c := stallGRPC(t, h.grpcLn.Addr().String(), whole)
		start := time.Now()
		how := c.end(15 * time.Second)
		t.Logf("whole message %v: %s after %v", whole, how, time.Since(start).Round(10*time.Millisecond))
		if how == "" {
			t.Errorf("stalled call (whole message %v) still open after %v; read timeout 2 s", whole, time.Since(start).Round(time.Second))
		}
	}
	h.stillServing(t)
}

// TestHostileContent (review of #14, findings 4 and 5): a message a2a-go
// would accept but cannot serve over gRPC — a role other than ROLE_USER
// and ROLE_AGENT, a null part — is invalid params on every transport, with
// the fixed message and nothing logged above DEBUG; nothing is stored, and
// a gRPC client still lists every task, page by page. Checked by removing
// ContentGuard from newServer: the roles are stored (and the gRPC
// traversal fails on them, "message role cannot be unspecified"), and the
// null part is answered -32603 / 500 "processor error: … gob: encodeArray:
// nil element" and logged at WARN.
func TestHostileContent(t *testing.T) {
	const invalidParams = "invalid params" // a2aserver's fixed message
	h := startHostile(t)
	h.taskOf(t, "alice")
	n := h.taskCount(t)
	logged := len(h.log.String())
	for name, msg := range map[string]string{
		"role user":  `{"messageId":"m1","role":"user","parts":[{"text":"x"}]}`,
		"role bogus": `{"messageId":"m1","role":"ROLE_BOGUS","parts":[{"text":"x"}]}`,
		"null part":  `{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"x"},null]}`,
	} {
		for _, method := range []string{"SendMessage", "SendStreamingMessage"} {
			rpc := h.postJSON(t, jsonrpcPath, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"message":`+msg+`}}`, "alice")
			if rpc != (answer{Code: "-32602", Message: invalidParams}) {
				t.Errorf("JSON-RPC %s, %s: %+v, want -32602 %q", method, name, rpc, invalidParams)
			}
		}
		for _, path := range []string{"/message:send", "/message:stream"} {
			if rest := h.postJSON(t, path, `{"message":`+msg+`}`, "alice"); rest.Code != "400" || rest.Message != invalidParams {
				t.Errorf("HTTP+JSON %s, %s: %+v, want 400 %q", path, name, rest, invalidParams)
			}
		}
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), strings.ToLower(callerHeader), "alice")
	pb := &a2apb.Message{MessageId: "m1", Role: a2apb.Role(7), Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "x"}}}}
	if _, err := h.pb.SendMessage(ctx, &a2apb.SendMessageRequest{Message: pb}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("gRPC SendMessage with role 7: %v, want INVALID_ARGUMENT", err)
	}
	if got := h.taskCount(t); got != n {
		t.Errorf("%d tasks stored with content gRPC clients cannot read", got-n)
	}
	for _, line := range strings.Split(h.log.String()[logged:], "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("a client's invalid message logged: %.300s", line)
		}
	}
	made := h.stillServing(t)
	if tasks := h.grpcTraversal(t, "alice", 1); tasks != n+made {
		t.Errorf("gRPC traversal read %d tasks, want %d", tasks, n+made)
	}
}

// TestHostileDeepCost (review by helper-38): a SendMessage of about 54 KB
// whose message metadata, or a data part, is nested 9,000 deep is
// answered -32602 before a2a-go deep-copies the task that would hold it.
// That copy (gob) costs the square of the depth: before ContentGuardLimits
// checked the store's limits, one such request allocated about 1.3 GB
// (held live, not garbage) and took seconds before the store refused it.
// The test counts what the server allocated during the request (the
// process's, the server being in it), not time.
func TestHostileDeepCost(t *testing.T) {
	h := startHostile(t)
	const depth = 9000
	for name, body := range map[string]string{
		"metadata":  `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"deep","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":` + nestedJSON(depth) + `}}}`,
		"data part": `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"deep","role":"ROLE_USER","parts":[{"data":` + nestedJSON(depth) + `}]}}}`,
		"request":   `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"deep","role":"ROLE_USER","parts":[{"text":"x"}]},"metadata":` + nestedJSON(depth) + `}}`,
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		a := h.postJSON(t, jsonrpcPath, body, "alice")
		runtime.ReadMemStats(&after)
		if a.Code != "-32602" {
			t.Errorf("%s %d deep: %+v, want -32602", name, depth, a)
		}
		if mb := (after.TotalAlloc - before.TotalAlloc) >> 20; mb > 64 {
			t.Errorf("%s %d deep (%d bytes): the server allocated %d MB to refuse it", name, depth, len(body), mb)
		}
	}
}

// TestGRPCDataPartNotObject (review by helper-38): over gRPC a data part
// whose value is not an object (a list, a number, a string) is refused
// with INVALID_ARGUMENT, as JSON-RPC and HTTP+JSON refuse it; a2a-go's
// conversion stored an empty object in its place, the client's data
// silently lost. An object passes.
func TestGRPCDataPartNotObject(t *testing.T) {
	ts := startServer(t, config{Backend: "mem"})
	list, err := structpb.NewList([]any{1.0, 2.0})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := structpb.NewStruct(map[string]any{"k": 1.0})
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]*structpb.Value{
		"list":   structpb.NewListValue(list),
		"number": structpb.NewNumberValue(5),
		"string": structpb.NewStringValue("important"),
		"object": structpb.NewStructValue(obj),
	} {
		_, err := ts.pb.SendMessage(t.Context(), &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m-" + name, Role: a2apb.Role_ROLE_USER,
			Parts: []*a2apb.Part{{Content: &a2apb.Part_Data{Data: v}}}}})
		if want := codes.InvalidArgument; name == "object" && err != nil || name != "object" && status.Code(err) != want {
			t.Errorf("gRPC SendMessage with a %s data part: %v", name, err)
		}
	}
}

// TestGRPCConversionErrorsReason (W10; review by helper-38): a gRPC
// request a2a-go's conversion refuses (a message without an ID, a part
// without content, ListTaskPushNotificationConfigs without a task) is
// INVALID_ARGUMENT with the A2A reason INVALID_PARAMS in an ErrorInfo; it
// carried none.
func TestGRPCConversionErrorsReason(t *testing.T) {
	ts := startServer(t, config{Backend: "mem", Push: pushOn})
	for name, call := range map[string]func() error{
		"message without an ID": func() error {
			_, err := ts.pb.SendMessage(t.Context(), &a2apb.SendMessageRequest{Message: &a2apb.Message{Role: a2apb.Role_ROLE_USER,
				Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "x"}}}}})
			return err
		},
		"part without content": func() error {
			_, err := ts.pb.SendMessage(t.Context(), &a2apb.SendMessageRequest{Message: &a2apb.Message{MessageId: "m", Role: a2apb.Role_ROLE_USER,
				Parts: []*a2apb.Part{{}}}})
			return err
		},
		"push configs without a task": func() error {
			_, err := ts.pb.ListTaskPushNotificationConfigs(t.Context(), &a2apb.ListTaskPushNotificationConfigsRequest{})
			return err
		},
	} {
		st := status.Convert(call())
		reason := ""
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
		if st.Code() != codes.InvalidArgument || reason != "INVALID_PARAMS" {
			t.Errorf("%s: %s, reason %q (%q), want INVALID_ARGUMENT, INVALID_PARAMS", name, st.Code(), reason, st.Message())
		}
	}
}

// rawCodec sends and receives gRPC messages as the bytes given: a client
// that writes the wire form itself, as an attacker would.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// allocated is what the process (the server in it) allocated during f.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// wideMessage is a SendMessageRequest (wire form) of about size bytes
// whose message holds nothing but parts, each repeated: part is the wire
// form of one Part (empty: a part without content, 2 bytes on the wire).
func wideMessage(part []byte, size int) []byte {
	var one []byte
	one = protowire.AppendTag(one, 5, protowire.BytesType) // Message.parts
	one = protowire.AppendBytes(one, part)
	var msg []byte
	msg = protowire.AppendTag(msg, 1, protowire.BytesType) // Message.message_id
	msg = protowire.AppendString(msg, "wide")
	msg = protowire.AppendTag(msg, 4, protowire.VarintType) // Message.role
	msg = protowire.AppendVarint(msg, uint64(a2apb.Role_ROLE_USER))
	msg = append(msg, bytes.Repeat(one, (size-64)/len(one))...)
	var req []byte
	req = protowire.AppendTag(req, 2, protowire.BytesType) // SendMessageRequest.message
	return protowire.AppendBytes(req, msg)
}

// TestHostileWideCost (review by helper-A of rev14): a SendMessage of
// nearly 4 MiB (the body limit) made of hundreds of thousands of tiny
// elements — empty parts, the zeros of a wide array in a data part — is
// refused (the store's size limit) without the server allocating much
// more than a2a-go's one decode of it costs: at most 64 times the
// request's bytes over JSON-RPC and HTTP+JSON, 16 times over gRPC.
// Before the fix, JSON-RPC decoded such params three times (a2a-go;
// JSONRPCParamsCompat looking for snake_case keys, since ROLE_USER holds
// an underscore; and again to check a2a-go's error answer): 455 MB for
// 4 MiB of empty parts (114x), 530 MB for a wide array (133x). Over gRPC
// 2 million parts without content (2 bytes each) decoded to 300 MB
// (75x), 233 MB of it live, before a2a-go's conversion refused the
// first.
func TestHostileWideCost(t *testing.T) {
	h := startHostile(t)
	const size = 4<<20 - 4096
	parts := `[` + strings.TrimSuffix(strings.Repeat(`{"text":""},`, (size-200)/12), ",") + `]`
	zeros := `[` + strings.TrimSuffix(strings.Repeat(`0,`, (size-200)/2), ",") + `]`
	for name, c := range map[string]struct{ path, body string }{
		"JSON-RPC empty parts":  {jsonrpcPath, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"wide","role":"ROLE_USER","parts":` + parts + `}}}`},
		"JSON-RPC wide array":   {jsonrpcPath, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"wide","role":"ROLE_USER","parts":[{"data":{"a":` + zeros + `}}]}}}`},
		"HTTP+JSON empty parts": {"/message:send", `{"message":{"messageId":"wide","role":"ROLE_USER","parts":` + parts + `}}`},
		"HTTP+JSON wide array":  {"/message:send", `{"message":{"messageId":"wide","role":"ROLE_USER","parts":[{"data":{"a":` + zeros + `}}]}}`},
	} {
		var a answer
		n := allocated(func() { a = h.postJSON(t, c.path, c.body, "alice") })
		if a.Code != "-32602" && a.Code != "400" {
			t.Errorf("%s: %+v, want invalid params", name, a)
		}
		t.Logf("%s (%d bytes): %+v, %d MB allocated", name, len(c.body), a, n>>20)
		if n > 64*uint64(len(c.body)) {
			t.Errorf("%s (%d bytes): the server allocated %d MB (%dx) to refuse it", name, len(c.body), n>>20, n/uint64(len(c.body)))
		}
	}
	conn, err := grpc.NewClient(h.grpcLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(t.Context(), strings.ToLower(callerHeader), "alice")
	emptyText := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "")
	for name, req := range map[string][]byte{
		"parts without content": wideMessage(nil, size),
		"empty text parts":      wideMessage(emptyText, size),
	} {
		var out []byte
		n := allocated(func() {
			err = conn.Invoke(ctx, a2apb.A2AService_SendMessage_FullMethodName, &req, &out, grpc.ForceCodec(rawCodec{}))
		})
		t.Logf("gRPC %s (%d bytes): %v, %d MB allocated", name, len(req), err, n>>20)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("gRPC %s: %v, want INVALID_ARGUMENT", name, err)
		}
		if n > 16*uint64(len(req)) {
			t.Errorf("gRPC %s (%d bytes): the server allocated %d MB (%dx) to refuse it", name, len(req), n>>20, n/uint64(len(req)))
		}
	}
	// The streaming call too: its handler's RecvMsg fails.
	req := wideMessage(nil, size)
	n := allocated(func() {
		var stream grpc.ClientStream
		stream, err = conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, a2apb.A2AService_SendStreamingMessage_FullMethodName, grpc.ForceCodec(rawCodec{}))
		if err == nil {
			if err = stream.SendMsg(&req); err == nil {
				_ = stream.CloseSend()
				var out []byte
				err = stream.RecvMsg(&out)
			}
		}
	})
	t.Logf("gRPC streaming, parts without content (%d bytes): %v, %d MB allocated", len(req), err, n>>20)
	if status.Code(err) != codes.InvalidArgument || n > 16*uint64(len(req)) {
		t.Errorf("gRPC SendStreamingMessage of parts without content (%d bytes): %v, %d MB allocated", len(req), err, n>>20)
	}
	h.stillServing(t)
}

// TestHostileStreamWideCost (review by helper-A of rev14; open): what
// TestHostileStreamWideCost (review by helper-A of rev14; open) checks
// what TestHostileWideCost checks over JSON-RPC on the two
// paths where JSONRPCParamsCompat still decodes the params besides
// a2a-go: SendStreamingMessage (decoded first to answer a decoding
// error before the stream, W7: 314 MB, 78x, for 4 MiB of empty parts)
// and params with snake_case keys (protojson decodes and re-encodes
// them: SendMessage 332 MB, 83x; SendStreamingMessage 471 MB, 117x).
// Not fixed: it fails; set A2ASTORE_OPEN_FINDINGS=1 to run it.
func TestHostileStreamWideCost(t *testing.T) {
	openfinding.Gate(t)
	h := startHostile(t)
	const size = 4<<20 - 4096
	parts := `[` + strings.TrimSuffix(strings.Repeat(`{"text":""},`, (size-200)/12), ",") + `]`
	for name, body := range map[string]string{
		"SendStreamingMessage":             `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"messageId":"wide","role":"ROLE_USER","parts":` + parts + `}}}`,
		"SendMessage, snake_case":          `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"message_id":"wide","role":"ROLE_USER","parts":` + parts + `}}}`,
		"SendStreamingMessage, snake_case": `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"message_id":"wide","role":"ROLE_USER","parts":` + parts + `}}}`,
	} {
		var a answer
		n := allocated(func() { a = h.postJSON(t, jsonrpcPath, body, "alice") })
		t.Logf("%s (%d bytes): %+v, %d MB allocated", name, len(body), a, n>>20)
		if a.Code != "-32602" {
			t.Errorf("%s: %+v, want -32602", name, a)
		}
		if n > 64*uint64(len(body)) {
			t.Errorf("%s (%d bytes): the server allocated %d MB (%dx) to refuse it", name, len(body), n>>20, n/uint64(len(body)))
		}
	}
}

// TestHostileAcceptedWideCost (review by helper-A of rev14; open): a
// SendMessage the store's limits take, made of many tiny elements — a
// data part holding 95,000 zeros (190 KB), 60,000 empty parts (720 KB)
// — allocates hundreds of times its size on a server with the default
// synthetic agent (-status-updates 2 -history-messages 1): about two
// thirds of it a2a-go's gob deep copy of the task (taskupdate.Manager,
// utils.DeepCopy) on each of the task's events (87% in a2a-go's
// taskupdate.Manager; the store's writes 9%). Measured at bcc5848: 98 MB
// (541x), 309 MB (450x), and over gRPC 40,000 empty text parts (240 KB)
// 288 MB (1261x). Not fixed (a bound on the elements of a message,
// in engine.Limits or ContentGuardLimits, would be one): it fails; set
// A2ASTORE_OPEN_FINDINGS=1 to run it.
func TestHostileAcceptedWideCost(t *testing.T) {
	openfinding.Gate(t)
	ts := startServer(t, config{Backend: "mem", Agent: agentConfig{StatusUpdates: 2, HistoryMessages: 1}})
	zeros := `[` + strings.TrimSuffix(strings.Repeat(`0,`, 95000), ",") + `]`
	parts := `[` + strings.TrimSuffix(strings.Repeat(`{"text":""},`, 60000), ",") + `]`
	for name, msg := range map[string]string{
		"95,000 zeros":       `{"messageId":"z","role":"ROLE_USER","parts":[{"data":{"a":` + zeros + `}}]}`,
		"60,000 empty parts": `{"messageId":"p","role":"ROLE_USER","parts":` + parts + `}`,
	} {
		body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":` + msg + `}}`
		var a answer
		n := allocated(func() { a = ts.httpAnswer(t, jsonrpcPath, body) })
		t.Logf("%s (%d bytes): %+v, %d MB allocated", name, len(body), a, n>>20)
		if a.Code != "ok" {
			t.Errorf("%s: %+v, want the task", name, a)
		}
		if n > 64*uint64(len(body)) {
			t.Errorf("%s (%d bytes): the server allocated %d MB (%dx) to serve it", name, len(body), n>>20, n/uint64(len(body)))
		}
	}
	// Over gRPC an empty text part is 4 bytes on the wire.
	emptyText := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "")
	req := wideMessage(emptyText, 40000*6)
	conn, err := grpc.NewClient(ts.grpcLn.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out []byte
	n := allocated(func() {
		err = conn.Invoke(t.Context(), a2apb.A2AService_SendMessage_FullMethodName, &req, &out, grpc.ForceCodec(rawCodec{}))
	})
	t.Logf("gRPC 40,000 empty text parts (%d bytes): %v, %d MB allocated", len(req), err, n>>20)
	if err != nil || n > 64*uint64(len(req)) {
		t.Errorf("gRPC 40,000 empty text parts (%d bytes): %v, the server allocated %d MB (%dx) to serve it", len(req), err, n>>20, n/uint64(len(req)))
	}
}

// httpAnswer posts body to path anonymously and returns the answer.
func (ts *testServer) httpAnswer(t *testing.T, path, body string) answer {
	t.Helper()
	return (&hostile{testServer: ts}).httpAnswer(t, t.Context(), http.MethodPost, ts.httpBase+path, []byte(body), nil)
}
