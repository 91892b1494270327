package a2aserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/errordetails"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// JSONRPCParamsCompat wraps a2a-go's JSON-RPC handler (a2asrv.NewJSONRPCHandler)
// so that params which are well-formed JSON but not a valid request — a
// statusTimestampAfter of "yesterday", a part with no content — are
// answered -32602 invalid params with a fixed message (W3). a2a-go v2.3.1
// answers them -32700 parse error and puts the decoder's error text, which
// quotes the client's value or keys, into the message.
//
// It also reads params as ProtoJSON parsers do (A2A v1.0 §5.5 adopts
// ProtoJSON): params that use proto field names (history_length,
// page_size, task_id — the official TCK's JSON-RPC client sends them) are
// parsed with protojson, which accepts both spellings at every level, and
// handed to a2a-go in the camelCase it reads. a2a-go
// v2.3.1 decodes params with encoding/json and silently ignores such
// fields (a GetTask historyLength sent as history_length returned the
// whole history).
//
// The wrapper reads the envelope (method, ID, params as raw JSON). The
// streaming methods' params it decodes into the method's a2a request type
// before a2a-go does, since their error must come before the stream (W7).
// The other methods' params only a2a-go decodes: the wrapper looks at the
// top-level members of a2a-go's answer, and only when that is an error
// does it decode the params itself and, if they do not decode, answer
// -32602 in a2a-go's stead — a valid request is decoded once. Requests it
// cannot classify (not JSON, unknown method) pass through unchanged for
// a2a-go to answer. It reads the body whole: install it inside
// ServeLimits.Handler, which bounds the body first.
func JSONRPCParamsCompat(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			h.ServeHTTP(w, r)
			return
		}
		var env struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(body, &env) != nil || !validJSONRPCID(env.ID) {
			h.ServeHTTP(w, r)
			return
		}
		if params, ok := camelCaseParams(env.Method, env.Params); ok {
			if body, ok = replaceParams(body, params); ok {
				env.Params = params
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
			}
		}
		params, _ := jsonrpcParams(env.Method)
		invalid := func() bool { return params != nil && len(env.Params) > 0 && json.Unmarshal(env.Params, params) != nil }
		switch {
		case env.Method == "SendStreamingMessage" || env.Method == "SubscribeToTask":
			if invalid() {
				writeInvalidParams(w, env.ID)
				return
			}
			h.ServeHTTP(w, r)
		case params == nil || len(env.Params) == 0:
			h.ServeHTTP(w, r)
		default:
			h.ServeHTTP(&paramsErrorWriter{ResponseWriter: w, invalid: invalid, id: env.ID}, r)
		}
	})
}

// paramsErrorWriter passes a2a-go's answer to a non-streaming JSON-RPC
// request through, unless it may be an error answer and the request's
// params do not decode (invalid): then it writes writeInvalidParams's
// answer instead. a2a-go writes each answer in one Write
// (json.Encoder.Encode).
type paramsErrorWriter struct {
	http.ResponseWriter
	invalid  func() bool
	id       json.RawMessage
	decided  bool // the first Write has been looked at
	replaced bool // and replaced: later writes are dropped
}

func (w *paramsErrorWriter) Write(p []byte) (int, error) {
	if !w.decided {
		w.decided = true
		if !isJSONRPCResult(p) && !isFixedError(p) && w.invalid() {
			w.replaced = true
			writeInvalidParams(w.ResponseWriter, w.id)
		}
	}
	if w.replaced {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *paramsErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isJSONRPCResult reports whether p starts a success answer as a2a-go
// v2.3.1 encodes it (jsonrpc.ServerResponse: jsonrpc, id, then result):
// {"jsonrpc":"2.0","id":<string, number or null>,"result":. Any other
// start — an error answer, or a layout it does not know — is false, and
// the caller decodes the params to decide: a false negative costs that
// decode, never a wrong answer.
func isJSONRPCResult(p []byte) bool {
	const head = `{"jsonrpc":"2.0","id":`
	if !bytes.HasPrefix(p, []byte(head)) {
		return false
	}
	p = p[len(head):]
	n := jsonScalarLen(p)
	return n > 0 && bytes.HasPrefix(p[n:], []byte(`,"result":`))
}

// isFixedError reports whether p is an error answer whose message is one
// of this package's fixed messages (an interceptor's or the TaskStore
// adapter's): a2a-go decoded the params before any of them ran, so they
// need no second decode. That decode costs about 35 times the params'
// bytes, which a client sending a large request refused by a limit
// (ContentGuardLimits) would otherwise double. An answer it does not
// recognize is false: the caller decodes, at worst for nothing.
func isFixedError(p []byte) bool {
	var resp struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(p, &resp) != nil || resp.Error == nil {
		return false
	}
	switch resp.Error.Message {
	case msgInvalidPageToken, msgInvalidParams, msgLimitExceeded, msgTaskNotFound, msgNotCancelable, msgInternal:
		return true
	}
	return false
}

// jsonScalarLen is the length of the JSON string, number or literal that
// starts p, as encoding/json writes them; 0 when p starts none.
func jsonScalarLen(p []byte) int {
	if len(p) == 0 {
		return 0
	}
	if p[0] != '"' {
		return max(bytes.IndexAny(p, ",}"), 0) // numbers and literals hold neither
	}
	for i := 1; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++ // the escaped byte
		case '"':
			return i + 1
		}
	}
	return 0
}

// jsonrpcParams returns new values of the params type of a JSON-RPC
// method: a2a-go's request type and the protobuf message (for ProtoJSON
// parsing); nils for a method a2a-go does not serve.
func jsonrpcParams(method string) (any, proto.Message) {
	switch method {
	case "SendMessage", "SendStreamingMessage":
		return new(a2a.SendMessageRequest), new(a2apb.SendMessageRequest)
	case "GetTask":
		return new(a2a.GetTaskRequest), new(a2apb.GetTaskRequest)
	case "ListTasks":
		return new(a2a.ListTasksRequest), new(a2apb.ListTasksRequest)
	case "CancelTask":
		return new(a2a.CancelTaskRequest), new(a2apb.CancelTaskRequest)
	case "SubscribeToTask":
		return new(a2a.SubscribeToTaskRequest), new(a2apb.SubscribeToTaskRequest)
	case "GetTaskPushNotificationConfig":
		return new(a2a.GetTaskPushConfigRequest), new(a2apb.GetTaskPushNotificationConfigRequest)
	case "CreateTaskPushNotificationConfig":
		return new(a2a.PushConfig), new(a2apb.TaskPushNotificationConfig)
	case "ListTaskPushNotificationConfigs":
		return new(a2a.ListTaskPushConfigRequest), new(a2apb.ListTaskPushNotificationConfigsRequest)
	case "DeleteTaskPushNotificationConfig":
		return new(a2a.DeleteTaskPushConfigRequest), new(a2apb.DeleteTaskPushNotificationConfigRequest)
	case "GetExtendedAgentCard":
		return new(a2a.GetExtendedAgentCardRequest), new(a2apb.GetExtendedAgentCardRequest)
	}
	return nil, nil
}

// camelCaseParams returns params re-encoded with camelCase field names when
// some key in params holds an underscore (a proto field name, or a key of
// a free-form value such as metadata) and params parses as the method's
// request with protojson; else false, and params goes to a2a-go as sent.
// Keys inside free-form values are kept as they are: protojson knows which
// values are google.protobuf.Struct.
func camelCaseParams(method string, params json.RawMessage) (json.RawMessage, bool) {
	if !hasUnderscoreKey(params) {
		return nil, false
	}
	_, msg := jsonrpcParams(method)
	if msg == nil || protojson.Unmarshal(params, msg) != nil {
		return nil, false
	}
	out, err := protojson.Marshal(msg)
	return out, err == nil
}

// hasUnderscoreKey reports whether the JSON text p holds an object key
// that contains an underscore. It scans the bytes without decoding and
// allocates nothing: every JSON-RPC request passes here, and a decode
// into any (what this was) cost about 35 times the request's bytes — a
// 4 MiB SendMessage of empty parts, whose role ROLE_USER holds an
// underscore, allocated 150 MB here alone. A string is a key when the
// next byte past it, after white space, is a colon; p that is not valid
// JSON may be misread, and then protojson refuses it.
func hasUnderscoreKey(p []byte) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '"' {
			continue
		}
		underscore := false
		j := i + 1
		for ; j < len(p) && p[j] != '"'; j++ {
			switch p[j] {
			case '\\':
				j++ // the escaped byte (an escaped underscore, \u005f, is not seen)
			case '_':
				underscore = true
			}
		}
		k := j + 1
		for k < len(p) && (p[k] == ' ' || p[k] == '\t' || p[k] == '\n' || p[k] == '\r') {
			k++
		}
		if underscore && k < len(p) && p[k] == ':' {
			return true
		}
		i = j
	}
	return false
}

// replaceParams returns the JSON-RPC request body with its params member
// replaced; false when body is not a JSON object.
func replaceParams(body []byte, params json.RawMessage) ([]byte, bool) {
	var env map[string]json.RawMessage
	if json.Unmarshal(body, &env) != nil {
		return nil, false
	}
	env["params"] = params
	out, err := json.Marshal(env)
	return out, err == nil
}

// validJSONRPCID reports whether id is a JSON-RPC request ID: absent, null,
// a string or a number.
func validJSONRPCID(id json.RawMessage) bool {
	if len(id) == 0 || string(id) == "null" {
		return true
	}
	c := id[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

type jsonrpcErrorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int                   `json:"code"`
		Message string                `json:"message"`
		Data    []*errordetails.Typed `json:"data,omitempty"`
	} `json:"error"`
}

// writeInvalidParams answers a JSON-RPC request with -32602 as a plain
// JSON-RPC error response (200, application/json), its data holding the
// google.rpc.ErrorInfo with reason INVALID_PARAMS that a2a-go attaches to
// its own errors (W10). The streaming methods get the same: the error is
// decided before any event (W7; see StreamErrorsCompat). The request's ID
// is echoed byte for byte.
func writeInvalidParams(w http.ResponseWriter, id json.RawMessage) {
	r := jsonrpcErrorResponse{JSONRPC: "2.0", ID: id}
	if len(id) == 0 {
		r.ID = json.RawMessage("null")
	}
	r.Error.Code, r.Error.Message = -32602, msgInvalidParams
	r.Error.Data = []*errordetails.Typed{errordetails.NewErrorInfo(a2a.ErrorReason(a2a.ErrInvalidParams), a2a.ProtocolDomain,
		map[string]string{"timestamp": time.Now().UTC().Format(time.RFC3339)})}
	resp, _ := json.Marshal(r)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(resp, '\n'))
}
