package clientcompat_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/a2astore/a2astore/clientcompat"
)

// plainError answers every streaming JSON-RPC call as a2astore-server (and
// the JavaScript and Python SDKs' servers) answer one that fails before its
// first event: 200, application/json, the JSON-RPC error response.
const plainError = `{"jsonrpc":"2.0","id":"1","error":{"code":-32001,"message":"task not found","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`

// events reads a SubscribeToTask through a2a-go's JSON-RPC client with the
// given HTTP client: the number of events and the error that ended it.
func events(t *testing.T, url string, hc *http.Client) (int, error) {
	t.Helper()
	tr := a2aclient.NewJSONRPCTransport(url, hc)
	n := 0
	for _, err := range tr.SubscribeToTask(context.Background(), a2aclient.ServiceParams{}, &a2a.SubscribeToTaskRequest{ID: "t-1"}) {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// TestJSONRPCStreamErrors: a2a-go's JSON-RPC client reads the plain error
// answer to a streaming call as an empty stream that ended cleanly; through
// JSONRPCStreamErrors it reports the error, classified. A real event
// stream and an answer that is not JSON pass through as they came.
func TestJSONRPCStreamErrors(t *testing.T) {
	body := plainError
	contentType := "application/json"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	fixed := &http.Client{Transport: clientcompat.JSONRPCStreamErrors(nil)}

	// The gap: a2a-go alone sees nothing. (If a2a-go ever reads the plain
	// answer itself, this fails and the package can go.)
	if n, err := events(t, srv.URL, http.DefaultClient); n != 0 || err != nil {
		t.Fatalf("a2a-go alone: %d events, error %v; the gap this package closes is gone", n, err)
	}
	if n, err := events(t, srv.URL, fixed); n != 0 || !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("through JSONRPCStreamErrors: %d events, error %v; want ErrTaskNotFound", n, err)
	}

	// A stream stays a stream (its error event too).
	contentType = "text/event-stream"
	body = "data: " + plainError + "\n\n"
	if n, err := events(t, srv.URL, fixed); n != 0 || !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("an event stream holding the error: %d events, error %v; want ErrTaskNotFound", n, err)
	}
	// Not JSON: passed on as it came (a2a-go sees no event in it).
	contentType, body = "text/plain", "upstream proxy error"
	if n, err := events(t, srv.URL, fixed); n != 0 || err != nil {
		t.Errorf("a plain answer that is not JSON: %d events, error %v; want it passed on", n, err)
	}
}

// TestJSONRPCStreamErrorsOnlyStreams: a non-streaming call (no Accept:
// text/event-stream) gets the response untouched.
func TestJSONRPCStreamErrorsOnlyStreams(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, plainError)
	}))
	defer srv.Close()
	tr := a2aclient.NewJSONRPCTransport(srv.URL, &http.Client{Transport: clientcompat.JSONRPCStreamErrors(nil)})
	if _, err := tr.GetTask(context.Background(), a2aclient.ServiceParams{}, &a2a.GetTaskRequest{ID: "t-1"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("GetTask: %v, want ErrTaskNotFound", err)
	}
}
