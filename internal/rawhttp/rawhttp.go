// Package rawhttp drives HTTP/1.1 connections byte by byte, for tests of
// what a server does with clients no library would be: bodies larger than
// declared limits, bodies sent a byte at a time, connections left idle.
// Reads on its connections fail after a generous bound, so a server that
// never answers fails a test instead of hanging it.
package rawhttp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// bound is how long a read waits before the test fails.
const bound = 30 * time.Second

// Conn is one raw client connection.
type Conn struct {
	net.Conn
	br *bufio.Reader
}

// Dial connects to addr; the connection is closed at the test's end.
func Dial(t testing.TB, addr string) *Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(bound))
	return &Conn{Conn: c, br: bufio.NewReader(c)}
}

// Send writes a request head (lines joined by CRLF, ending the head) and
// then body.
func (c *Conn) Send(t testing.TB, head []string, body string) {
	t.Helper()
	var b []byte
	for _, l := range head {
		b = fmt.Appendf(b, "%s\r\n", l)
	}
	b = append(b, "\r\n"+body...)
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// Status reads one response and returns its status code.
func (c *Conn) Status(t testing.TB) int {
	t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Closed waits for the server to close the connection and reports whether
// it did (false: it sent data or the bound passed).
func (c *Conn) Closed() bool {
	_, err := c.br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// Dribble writes the body one byte per tick until the server answers,
// then returns the status code and how many bytes were sent. The test
// waits for the server's answer, not for a duration.
func (c *Conn) Dribble(t testing.TB, tick time.Duration) (status, sent int) {
	t.Helper()
	got := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case code := <-got:
			return code, sent
		case <-tk.C:
			if _, err := c.Write([]byte(" ")); err == nil { // an error: cut; the answer says how
				sent++
			}
		}
	}
}

// Flood writes a chunked body of n bytes in 64 KiB chunks from another
// goroutine, stopping at the first write error (the server cut it).
func (c *Conn) Flood(n int) {
	chunk := fmt.Appendf(nil, "%x\r\n%s\r\n", 64<<10, make([]byte, 64<<10))
	go func() {
		for sent := 0; sent < n; sent += 64 << 10 {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
}
