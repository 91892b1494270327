package a2aserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// TestServeLimitsDeclaredTooLargeCloses: a request declaring a body over
// MaxBodyBytes gets 413 before its body is read, and its connection is
// closed at once although the client goes on dribbling the body. net/http
// reads up to 256 KiB of a body the handler left unread before it closes
// a connection, and no read deadline is set for a body that was never
// read: a limit below that (a -max-body-bytes of 1 KB here) would let the
// client keep the connection, and its slot, for as long as it dribbles.
// Checked by removing the past read deadline from reject (the connection
// stays open until the test's bound).
func TestServeLimitsDeclaredTooLargeCloses(t *testing.T) {
	limits := starveLimits
	limits.MaxBodyBytes = 1000
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := limits.Server(http.HandlerFunc(echoBodyLen))
	go func() { _ = srv.Serve(limits.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The bound: far past the read timeout, far short of the dribble.
	_ = c.SetReadDeadline(time.Now().Add(servedWithin))
	if _, err := fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go ticks(stop, func() error { _, err := c.Write([]byte(" ")); return err })

	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared 2000 bytes over a 1000-byte limit: %s", resp.Status)
	}
	switch _, err := br.ReadByte(); {
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("the connection of a 413 is still open after %v while its client dribbles the body", servedWithin)
	case err == nil:
		t.Fatal("more bytes after the 413")
	}
}
