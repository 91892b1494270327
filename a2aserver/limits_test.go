package a2aserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/a2astore/a2astore/internal/rawhttp"
)

// testLimits are short enough for tests to run into, long enough for a
// loaded machine to serve a normal request within them.
var testLimits = ServeLimits{
	MaxBodyBytes: 1 << 20,
	ReadTimeout:  2 * time.Second,
	WriteTimeout: 300 * time.Millisecond,
	IdleTimeout:  300 * time.Millisecond,
}

// quickLimits time out fast, for tests whose bodies are a few bytes.
var quickLimits = ServeLimits{ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond}

// serveLimited serves h through testLimits.Server on loopback.
func serveLimited(t *testing.T, h http.Handler) string {
	return serveWith(t, testLimits, h)
}

func serveWith(t *testing.T, l ServeLimits, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.Server(h)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func echoBodyLen(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprint(w, n)
}

// TestServeLimitsBody: a body within the limit reaches the handler whole;
// one declared larger is answered 413 without being read (the client sent
// a few bytes of a 50 MB body); a chunked one is cut at the limit with
// 413, and the heap does not grow by its size.
func TestServeLimitsBody(t *testing.T) {
	addr := serveLimited(t, http.HandlerFunc(echoBodyLen))

	resp, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(strings.Repeat("x", 1000)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "1000" {
		t.Fatalf("body within the limit: %s %s", resp.Status, b)
	}

	c := rawhttp.Dial(t, addr)
	c.Send(t, []string{"POST / HTTP/1.1", "Host: x", fmt.Sprint("Content-Length: ", 50<<20)}, `{"jsonrpc"`)
	if code := c.Status(t); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared 50 MB body: %d, want 413", code)
	}
	if !c.Closed() {
		t.Fatal("the connection of a refused body stays open")
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c = rawhttp.Dial(t, addr)
	c.Send(t, []string{"POST / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked"}, "")
	c.Flood(50 << 20)
	if code := c.Status(t); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 50 MB body: %d, want 413", code)
	}
	_ = c.Close()
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 6<<20 {
		t.Errorf("serving a chunked 50 MB body allocated %d bytes; want it cut at the 1 MiB limit", grew)
	}
}

// TestServeLimitsSlowBody: a client that sends its headers, then its body
// a byte at a time, is answered 408 and cut once ReadTimeout passes — the
// test waits for the server's cut, not for a duration.
func TestServeLimitsSlowBody(t *testing.T) {
	addr := serveWith(t, quickLimits, http.HandlerFunc(echoBodyLen))
	c := rawhttp.Dial(t, addr)
	c.Send(t, []string{"POST / HTTP/1.1", "Host: x", "Content-Length: 1000"}, "")
	code, sent := c.Dribble(t, 20*time.Millisecond)
	if code != http.StatusRequestTimeout || sent >= 1000 {
		t.Fatalf("slow body answered %d after %d of 1000 bytes, want 408 before the end", code, sent)
	}
}

// TestServeLimitsIdle: a keep-alive connection idle for IdleTimeout, and a
// connection that never sends a request within ReadTimeout, are closed.
func TestServeLimitsIdle(t *testing.T) {
	addr := serveWith(t, quickLimits, http.HandlerFunc(echoBodyLen))
	c := rawhttp.Dial(t, addr)
	c.Send(t, []string{"GET / HTTP/1.1", "Host: x"}, "")
	if code := c.Status(t); code != 200 {
		t.Fatalf("GET: %d", code)
	}
	if !c.Closed() {
		t.Error("idle keep-alive connection not closed")
	}
	if !rawhttp.Dial(t, addr).Closed() {
		t.Error("a connection that never sends a request is not closed")
	}
}

// TestServeLimitsStreams: a response that streams for several times
// ReadTimeout and WriteTimeout (a stand-in for an SSE stream of a slow
// agent) is not cut, after a request body; a client that stops reading a
// large response is cut after WriteTimeout.
func TestServeLimitsStreams(t *testing.T) {
	writeErr := make(chan error, 1)
	addr := serveWith(t, quickLimits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/flood" {
			chunk := []byte(strings.Repeat("z", 64<<10))
			for {
				if _, err := w.Write(chunk); err != nil {
					writeErr <- err
					return
				}
			}
		}
		_, _ = io.Copy(io.Discard, r.Body)
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			// The agent's pace, on the server's side: longer than both
			// timeouts between events.
			<-time.After(2 * quickLimits.ReadTimeout)
		}
	}))
	resp, err := http.Post("http://"+addr+"/stream", "text/plain", strings.NewReader("request body"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "data: 0\n\ndata: 1\n\ndata: 2\n\n" {
		t.Fatalf("stream: %q, %v; want three events", b, err)
	}

	rawhttp.Dial(t, addr).Send(t, []string{"GET /flood HTTP/1.1", "Host: x"}, "")
	// Never read: the server's write must fail once WriteTimeout passes.
	if err := <-writeErr; errDeadline(err) == nil {
		t.Fatalf("write to a client that does not read: %v", err)
	}
}

// errDeadline returns err when it is a timeout, nil otherwise.
func errDeadline(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return nil
}

// goroutinesIn returns how many goroutines have fn in their stack.
func goroutinesIn(buf []byte, fn string) ([]byte, int) {
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf, bytes.Count(buf[:n], []byte(fn)) // no copy: the caller counts allocations
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestServeLimitsHeadsOnly (review of #14, finding 2): connections that
// send only a request head declaring the largest body allowed cost no body
// buffer: the server allocates as the body arrives, not as declared.
// Checked against the former readBody, which made a buffer of the declared
// length before reading: 64 heads allocated 64 MiB.
func TestServeLimitsHeadsOnly(t *testing.T) {
	l := testLimits
	l.ReadTimeout = time.Minute // the heads stay unanswered while the test looks
	addr := serveWith(t, l, http.HandlerFunc(echoBodyLen))
	const conns = 64
	stacks := make([]byte, 1<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range conns {
		c := rawhttp.Dial(t, addr)
		c.Send(t, []string{"POST / HTTP/1.1", "Host: x", fmt.Sprint("Content-Length: ", l.MaxBodyBytes)}, "{")
	}
	// Wait until every connection's handler is reading its body.
	for waiting := 0; waiting < conns; {
		stacks, waiting = goroutinesIn(stacks, "a2aserver.ServeLimits.readBody(")
		if waiting < conns {
			time.Sleep(5 * time.Millisecond) // a poll of the condition
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("%d request heads declaring %d bytes each made the server allocate %d MiB; want no buffer ahead of the body",
			conns, l.MaxBodyBytes, grew>>20)
	}
}

// TestServeLimitsMaxConns: a listener wrapped by Listener accepts MaxConns
// connections at once; the next is answered only once one of them closes.
func TestServeLimitsMaxConns(t *testing.T) {
	l := testLimits
	l.MaxConns, l.ReadTimeout = 2, time.Minute
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.Server(http.HandlerFunc(echoBodyLen))
	go func() { _ = srv.Serve(l.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	// Two connections take the slots; each has sent a request, so each is
	// surely accepted.
	var held []*rawhttp.Conn
	for range l.MaxConns {
		c := rawhttp.Dial(t, addr)
		c.Send(t, []string{"POST / HTTP/1.1", "Host: x", "Content-Length: 10"}, "{")
		held = append(held, c)
	}
	third := rawhttp.Dial(t, addr)
	third.Send(t, []string{"GET / HTTP/1.1", "Host: x"}, "")
	// Not answered while the slots are taken. (A loaded machine can only
	// make this pass wrongly, never fail wrongly.)
	_ = third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := third.Read(make([]byte, 1)); errDeadline(err) == nil {
		t.Fatalf("a third connection was served with MaxConns 2 taken: %v", err)
	}
	_ = third.SetReadDeadline(time.Now().Add(30 * time.Second))
	_ = held[0].Close()
	if code := third.Status(t); code != 200 {
		t.Errorf("third connection once a slot was free: %d", code)
	}
}
