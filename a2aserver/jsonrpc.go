package a2aserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
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
// The wrapper decodes the envelope and the params into the method's a2a
// request type before a2a-go does, so a valid request is decoded twice.
// Requests it cannot classify (not JSON, unknown method) pass through
// unchanged for a2a-go to answer. It reads the body whole: install it
// inside ServeLimits.Handler, which bounds the body first.
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
		if params == nil || len(env.Params) == 0 || json.Unmarshal(env.Params, params) == nil {
			h.ServeHTTP(w, r)
			return
		}
		writeInvalidParams(w, env.ID)
	})
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
	if !bytes.Contains(params, []byte("_")) {
		return nil, false
	}
	var v any
	if json.Unmarshal(params, &v) != nil || !hasUnderscoreKey(v) {
		return nil, false
	}
	_, msg := jsonrpcParams(method)
	if msg == nil || protojson.Unmarshal(params, msg) != nil {
		return nil, false
	}
	out, err := protojson.Marshal(msg)
	return out, err == nil
}

// hasUnderscoreKey reports whether a decoded JSON value holds an object
// with a key that contains an underscore.
func hasUnderscoreKey(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.Contains(k, "_") || hasUnderscoreKey(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasUnderscoreKey(e) {
				return true
			}
		}
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
