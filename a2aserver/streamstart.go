package a2aserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// StreamErrorsCompat wraps a2a-go's JSON-RPC and HTTP+JSON handlers
// (a2asrv.NewJSONRPCHandler, a2asrv.NewRESTHandler) so that a streaming
// call — SendStreamingMessage and SubscribeToTask, HTTP+JSON
// `POST /message:stream` and `POST /tasks/{id}:subscribe` — whose outcome
// is an error decided before its first event answers that error as a
// plain response (W7): on HTTP+JSON the error's HTTP status (401, 404,
// 400 …) with the A2A error body a2a-go gives the non-streaming methods;
// on JSON-RPC the JSON-RPC error response with status 200 and
// Content-Type application/json, as a2a-go answers the other methods'
// errors (and the JavaScript and Python SDKs' servers answer a streaming
// call's early error). An error after the first event keeps the binding's
// in-stream form: the stream has started.
//
// Why it is needed: a2a-go v2.3.1 writes the event stream's headers
// (200, text/event-stream) before it asks the handler for the first event,
// so an unauthenticated caller, a missing or inaccessible task, a task in
// a terminal state (W6) or invalid params are all answered 200 with one
// `data:` line holding the error. Clients that take an event stream for a
// started call report that as success: the official TCK's JSON-RPC client
// (SubscribeToTask of a finished task "succeeded"), the JavaScript SDK's
// HTTP+JSON client (it reads in-stream errors only from `event: error`
// lines and sees an empty stream that ended cleanly), and the JavaScript
// SDK's JSON-RPC client throws a plain Error with the A2A error only as its
// cause.
//
// How each official client reads the plain answers (measured with a2a-go
// v2.3.1, @a2a-js/sdk 1.3.0 and the TCK; the Python SDK's from its source):
// the HTTP+JSON error status with its body is the A2A error for all of
// them. The JSON-RPC 200 application/json error is the A2A error for the
// JavaScript SDK, the Python SDK (which turns any other status into a
// generic HTTP error without the A2A error) and the TCK; a2a-go's JSON-RPC
// client reads any 200 answer to a streaming call as an event stream
// whatever its Content-Type, so it sees an empty stream — no form serves
// it and the TCK both (the TCK needs a body that is JSON, a2a-go one that
// is `data:` lines). Go programs fix that on their side with
// clientcompat.JSONRPCStreamErrors.
//
// How: the wrapper holds the headers of an event stream (a 200 response
// whose Content-Type is text/event-stream) and its bytes until the first
// flush, which a2a-go does after each event. When that first event is an
// error (a JSON object with an "error" member: a2a-go's HTTP+JSON error
// body or a JSON-RPC error response), the held headers are dropped and the
// error is answered plainly; otherwise headers and event go out as they
// were written, and the rest of the stream passes through unchanged.
// Other responses pass through untouched. The cost is one buffered copy
// of the first event of each stream. A stream's headers reach the client
// with its first event (for SubscribeToTask, the task's snapshot, sent at
// once; for SendStreamingMessage, the agent's first event, which an agent
// that works before it — say on a message continuing a task — delays as
// long) or, if the transport sends SSE keep-alives
// (a2asrv.WithTransportKeepAlive), with the first one: the keep-alive
// interval bounds how long headers are held.
func StreamErrorsCompat(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &streamStart{ResponseWriter: w}
		h.ServeHTTP(s, r)
		s.release()
	})
}

// streamStart is the response writer of StreamErrorsCompat.
type streamStart struct {
	http.ResponseWriter
	held     bool // an event stream's header and first bytes are held in buf
	started  bool // the response's header went out (or was answered plainly)
	answered bool // the stream was answered plainly: drop what follows
	buf      bytes.Buffer
}

// errAnsweredPlainly is what writes after a plain answer return.
var errAnsweredPlainly = errors.New("a2aserver: stream answered with a plain error response")

func (s *streamStart) WriteHeader(code int) {
	switch {
	case s.held:
		// A superfluous call: the held header is the first.
	case s.started:
		s.ResponseWriter.WriteHeader(code) // net/http reports the superfluous call
	case code == http.StatusOK && strings.HasPrefix(s.Header().Get("Content-Type"), "text/event-stream"):
		s.held = true
	default:
		s.started = true
		s.ResponseWriter.WriteHeader(code)
	}
}

func (s *streamStart) Write(p []byte) (int, error) {
	switch {
	case s.answered:
		return 0, errAnsweredPlainly
	case s.held:
		return s.buf.Write(p)
	}
	s.started = true
	return s.ResponseWriter.Write(p)
}

// Flush implements http.Flusher (a2a-go's SSE writer requires it): the
// first flush of a held stream decides how it is answered.
func (s *streamStart) Flush() {
	if s.answered {
		return
	}
	s.release()
	s.started = true // a flush sends the header, held or not
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *streamStart) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// release sends what is held: a plain error response when the held bytes
// are one error event, else the stream's header and bytes.
func (s *streamStart) release() {
	if !s.held {
		return
	}
	s.held, s.started = false, true
	if status, body, ok := firstEventError(s.buf.Bytes()); ok {
		s.answered = true
		hd := s.Header()
		for _, k := range []string{"Cache-Control", "Connection", "X-Accel-Buffering"} {
			hd.Del(k)
		}
		hd.Set("Content-Type", "application/json")
		s.ResponseWriter.WriteHeader(status)
		_, _ = s.ResponseWriter.Write(append(body, '\n'))
		return
	}
	s.ResponseWriter.WriteHeader(http.StatusOK)
	_, _ = s.ResponseWriter.Write(s.buf.Bytes())
	s.buf = bytes.Buffer{}
}

// firstEventError reports whether the Server-Sent Events in b begin with
// an error event, and returns the status and body of the plain response
// for it: an HTTP+JSON error body with the HTTP status it carries in
// error.code (500 when that is not one), a JSON-RPC error response with
// 200.
func firstEventError(b []byte) (status int, body []byte, ok bool) {
	var data []byte
	for line := range bytes.Lines(b) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if data != nil {
				break // end of the first event
			}
			continue
		}
		if d, found := bytes.CutPrefix(line, []byte("data:")); found {
			if data != nil {
				data = append(data, '\n') // SSE joins an event's data lines
			}
			data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
		}
	}
	var ev struct {
		JSONRPC string `json:"jsonrpc"`
		Error   *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if data == nil || json.Unmarshal(data, &ev) != nil || ev.Error == nil {
		return 0, nil, false
	}
	switch {
	case ev.JSONRPC != "":
		return http.StatusOK, data, true
	case ev.Error.Code >= 400 && ev.Error.Code <= 599:
		return ev.Error.Code, data, true
	}
	return http.StatusInternalServerError, data, true
}
