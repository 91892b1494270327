package a2aserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
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

// dial opens a raw connection; every read fails after a generous bound so
// a broken server fails the test instead of hanging it.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	return c
}

// readStatus reads one response's status code from c.
func readStatus(t *testing.T, br *bufio.Reader) int {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// expectClosed waits for the server to close c (not for the test's bound).
func expectClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	_, err := br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server did not close the connection")
	}
	if err == nil {
		t.Fatal("the server sent more data; want the connection closed")
	}
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

	c := dial(t, addr)
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"jsonrpc\"", 50<<20)
	br := bufio.NewReader(c)
	if code := readStatus(t, br); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared 50 MB body: %d, want 413", code)
	}
	expectClosed(t, br)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c = dial(t, addr)
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	wrote := make(chan int64, 1)
	go func() {
		chunk := fmt.Appendf(nil, "%x\r\n%s\r\n", 64<<10, strings.Repeat("y", 64<<10))
		var n int64
		for n < 50<<20 {
			if _, err := c.Write(chunk); err != nil {
				break
			}
			n += 64 << 10
		}
		wrote <- n
	}()
	br = bufio.NewReader(c)
	if code := readStatus(t, br); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked 50 MB body: %d, want 413", code)
	}
	_ = c.Close()
	n := <-wrote
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 6<<20 {
		t.Errorf("serving a %d-byte chunked body allocated %d bytes; want it cut at the 1 MiB limit", n, grew)
	}
}

// TestServeLimitsSlowBody: a client that sends its headers, then its body
// a byte at a time, is answered 408 and cut once ReadTimeout passes — the
// test waits for the server's cut, not for a duration.
func TestServeLimitsSlowBody(t *testing.T) {
	addr := serveWith(t, quickLimits, http.HandlerFunc(echoBodyLen))
	c := dial(t, addr)
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	status := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			status <- 0
			return
		}
		status <- resp.StatusCode
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; ; sent++ {
		select {
		case code := <-status:
			if code != http.StatusRequestTimeout {
				t.Fatalf("slow body answered %d, want 408", code)
			}
			if sent >= 1000 {
				t.Fatal("the whole body was sent before the server cut it")
			}
			return
		case <-tick.C:
			_, _ = c.Write([]byte("x")) // a write error means the server cut us: the status says how
		}
	}
}

// TestServeLimitsIdle: a keep-alive connection idle for IdleTimeout, and a
// connection that never sends a request within ReadTimeout, are closed.
func TestServeLimitsIdle(t *testing.T) {
	addr := serveWith(t, quickLimits, http.HandlerFunc(echoBodyLen))
	c := dial(t, addr)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	if code := readStatus(t, br); code != 200 {
		t.Fatalf("GET: %d", code)
	}
	expectClosed(t, br)

	silent := dial(t, addr)
	expectClosed(t, bufio.NewReader(silent))
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

	c := dial(t, addr)
	fmt.Fprintf(c, "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n")
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
