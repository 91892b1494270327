package a2aserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// JSONRPCParamsCompat wraps a2a-go's JSON-RPC handler (a2asrv.NewJSONRPCHandler)
// so that params which are well-formed JSON but not a valid request — a
// statusTimestampAfter of "yesterday", a part with no content — are
// answered -32602 invalid params with a fixed message (W3). a2a-go v2.3.1
// answers them -32700 parse error and puts the decoder's error text, which
// quotes the client's value or keys, into the message.
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
		params, streaming := jsonrpcParams(env.Method)
		if params == nil || len(env.Params) == 0 || json.Unmarshal(env.Params, params) == nil {
			h.ServeHTTP(w, r)
			return
		}
		writeInvalidParams(w, env.ID, streaming)
	})
}

// jsonrpcParams returns a new value of the params type of a JSON-RPC
// method, nil for a method a2a-go does not serve, and whether the method
// answers with a Server-Sent Event stream.
func jsonrpcParams(method string) (params any, streaming bool) {
	switch method {
	case "SendMessage":
		return new(a2a.SendMessageRequest), false
	case "SendStreamingMessage":
		return new(a2a.SendMessageRequest), true
	case "GetTask":
		return new(a2a.GetTaskRequest), false
	case "ListTasks":
		return new(a2a.ListTasksRequest), false
	case "CancelTask":
		return new(a2a.CancelTaskRequest), false
	case "SubscribeToTask":
		return new(a2a.SubscribeToTaskRequest), true
	case "GetTaskPushNotificationConfig":
		return new(a2a.GetTaskPushConfigRequest), false
	case "CreateTaskPushNotificationConfig":
		return new(a2a.PushConfig), false
	case "ListTaskPushNotificationConfigs":
		return new(a2a.ListTaskPushConfigRequest), false
	case "DeleteTaskPushNotificationConfig":
		return new(a2a.DeleteTaskPushConfigRequest), false
	case "GetExtendedAgentCard":
		return new(a2a.GetExtendedAgentCardRequest), false
	}
	return nil, false
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
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeInvalidParams answers a JSON-RPC request with -32602 as a plain
// JSON-RPC error response, also for the streaming methods: the error is
// decided before any event (W7). For those the HTTP status is 400, as
// StreamErrorsCompat answers (see there why not 200). The request's ID is
// echoed byte for byte.
func writeInvalidParams(w http.ResponseWriter, id json.RawMessage, streaming bool) {
	r := jsonrpcErrorResponse{JSONRPC: "2.0", ID: id}
	if len(id) == 0 {
		r.ID = json.RawMessage("null")
	}
	r.Error.Code, r.Error.Message = -32602, msgInvalidParams
	resp, _ := json.Marshal(r)
	w.Header().Set("Content-Type", "application/json")
	if streaming {
		w.WriteHeader(jsonrpcHTTPStatus(r.Error.Code))
	}
	_, _ = w.Write(append(resp, '\n'))
}
