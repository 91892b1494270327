package clientcompat

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// maxErrorBytes bounds the plain answer JSONRPCStreamErrors reads; a larger
// one is passed on as it came.
const maxErrorBytes = 1 << 20

// JSONRPCStreamErrors returns a RoundTripper over next (nil:
// http.DefaultTransport) that turns the plain answer to a JSON-RPC
// streaming request (one that accepts text/event-stream, as a2a-go's
// streaming calls do) — status 200 with a Content-Type other than
// text/event-stream and a JSON body — into an event stream of one event
// holding that body. Every other response passes through untouched, and
// so does a plain answer that is not JSON or is larger than 1 MiB.
func JSONRPCStreamErrors(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper{next: next}
}

type roundTripper struct{ next http.RoundTripper }

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK ||
		!strings.Contains(req.Header.Get("Accept"), "text/event-stream") ||
		strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes+1))
	_ = resp.Body.Close()
	if readErr != nil {
		return nil, readErr
	}
	var event bytes.Buffer
	if len(body) > maxErrorBytes || !json.Valid(body) {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	event.WriteString("data: ")
	_ = json.Compact(&event, body) // valid JSON: an SSE data line holds no newline
	event.WriteString("\n\n")
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Body = io.NopCloser(&event)
	return resp, nil
}
