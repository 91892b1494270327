package a2aserver

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/a2astore/a2astore/internal/rawhttp"
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

	c := rawhttp.Dial(t, ln.Addr().String())
	// The bound: far past the read timeout, far short of the dribble.
	_ = c.SetReadDeadline(time.Now().Add(servedWithin))
	c.Send(t, []string{"POST / HTTP/1.1", "Host: x", "Content-Length: 2000"}, "")
	stop := make(chan struct{})
	defer close(stop)
	go ticks(stop, func() error { _, err := c.Write([]byte(" ")); return err })

	if code := c.Status(t); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("declared 2000 bytes over a 1000-byte limit: %d", code)
	}
	if !c.Closed() {
		t.Fatalf("the connection of a 413 is not closed within %v while its client dribbles the body", servedWithin)
	}
}
