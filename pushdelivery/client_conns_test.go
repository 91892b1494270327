package pushdelivery

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SPEC N4: 200 distinct destinations, posted to at once, never have more
// than the client's MaxConns connections open (counted at the client's
// sockets: from their dial to their close), and leave at most that many
// open (counted by the receivers too: a connection open until they see
// it closed, a little late). Before, every destination kept an idle
// connection for 90 s.
func TestClientCapsOpenConnections(t *testing.T) {
	const dests, maxConns = 200, 16
	var conns, sockets connCount
	open, peak := &conns.open, &conns.peak
	urls := conns.receivers(t, dests)
	c := NewClient(ClientOptions{AllowPrivate: true, MaxConns: maxConns, wrapDial: sockets.wrap})
	var wg sync.WaitGroup
	errs := make(chan error, dests)
	for _, u := range urls {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u, strings.NewReader("{}"))
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("post: %v", err)
	}
	if !within(10*time.Second, func() bool { return open.Load() <= maxConns }) {
		t.Fatalf("%d connections still open after the posts, cap %d", open.Load(), maxConns)
	}
	if p := sockets.peak.Load(); p > maxConns {
		t.Fatalf("the client had %d connections open at once, cap %d", p, maxConns)
	}
	t.Logf("open after: %d, peak seen by the receivers: %d, at the client: %d (cap %d; a receiver sees a close late)",
		open.Load(), peak.Load(), sockets.peak.Load(), maxConns)
}

// SPEC N2, N4: a post the webhook answered is never failed by the cap's
// closing of idle connections, nor by the transport's. Many posts to more
// destinations than the cap, each answered 200 without a body, so every
// dial past the cap closes idle connections while other posts' answers
// are being handed over. Failures seen before:
//   - "connection broken: http: CloseIdleConnections called": the cap
//     called the transport's CloseIdleConnections, which closed a
//     connection the transport had pooled just before handing its request
//     the answer (CI, TestClientCapsOpenConnections);
//   - "connection broken: http: putIdleConn: too many idle connections":
//     the transport's MaxIdleConns (half the cap) closed its oldest idle
//     connection, which can be one whose answer its reader has pooled and
//     not yet handed over (CI, this test, 1 run; 3 of 5 runs at cap 2).
//
// Both would retry a delivery the webhook had taken. And no post waits on
// a slot held by a connection nobody uses: dialed for a post that got a
// pooled one instead, or idle when the first dial found the cap full. The
// setup window (DialTimeout) is longer than the test's deadline, so such a
// wait fails the test instead of lasting a window.
func TestClientCapKeepsAnsweredPosts(t *testing.T) {
	for _, tc := range []struct{ dests, maxConns, workers, posts int }{
		{64, 8, 64, 60},
		{64, 2, 32, 400},
	} {
		t.Run(fmt.Sprintf("cap=%d", tc.maxConns), func(t *testing.T) {
			var conns connCount
			urls := conns.receivers(t, tc.dests)
			c := NewClient(ClientOptions{AllowPrivate: true, MaxConns: tc.maxConns, DialTimeout: time.Hour, Timeout: time.Hour})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			var failed atomic.Int64
			errs := make(chan error, tc.workers)
			for w := range tc.workers {
				wg.Go(func() {
					for i := range tc.posts {
						u := urls[(w*tc.posts+i*7)%tc.dests]
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("{}"))
						resp, err := c.Do(req)
						if err != nil {
							if failed.Add(1) == 1 {
								errs <- err
							}
							continue
						}
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			close(errs)
			if n := failed.Load(); n > 0 {
				t.Fatalf("%d of %d posts failed; first: %v", n, tc.workers*tc.posts, <-errs)
			}
		})
	}
}

// The client's CloseIdleConnections closes its idle connections: its
// transport is wrapped (response bodies limited), and http.Client reaches
// only a RoundTripper that has the method. Before, nothing was closed
// until the idle timeout.
func TestClientClosesIdleConnections(t *testing.T) {
	var conns connCount
	urls := conns.receivers(t, 8)
	c := NewClient(ClientOptions{AllowPrivate: true})
	for _, u := range urls {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u, strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := conns.open.Load(); n == 0 {
		t.Fatal("no connection kept idle after the posts: nothing to close")
	}
	c.CloseIdleConnections()
	if !within(10*time.Second, func() bool { return conns.open.Load() == 0 }) {
		t.Fatalf("%d connections still open after CloseIdleConnections", conns.open.Load())
	}
}

// connCount counts open connections and the most at once: as its
// receivers see them (track; a close is seen a little late), or as a
// client's sockets (wrap).
type connCount struct{ open, peak atomic.Int64 }

func (c *connCount) opened() {
	n := c.open.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
}

func (c *connCount) track(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.opened()
	case http.StateClosed, http.StateHijacked:
		c.open.Add(-1)
	}
}

// wrap is a ClientOptions.wrapDial counting the client's sockets.
func (c *connCount) wrap(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c.opened()
		return &countedConn{Conn: conn, closed: func() { c.open.Add(-1) }}, nil
	}
}

// countedConn calls closed when first closed.
type countedConn struct {
	net.Conn
	once   sync.Once
	closed func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.closed)
	return err
}

// receivers starts n webhooks answering 200 whose connections c counts,
// closed at cleanup, and returns their URLs.
func (c *connCount) receivers(tb testing.TB, n int) []string {
	urls := make([]string, n)
	for i := range urls {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.Config.ConnState = c.track
		srv.Start()
		tb.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	return urls
}

// A connection the cap closes as unused takes no write from then on, even
// before its close completes: a request that takes it from the pool in
// that moment fails with nothing written (retried by the transport on
// another connection), rather than posting its event and then losing the
// webhook's answer to the close (a delivery posted twice).
func TestCappedConnRefusesWritesOnceClosing(t *testing.T) {
	under := &heldConn{closing: make(chan struct{}), release: make(chan struct{})}
	cp := newConnCap(1, 0, nil)
	cp.slots <- struct{}{}
	cc := &cappedConn{Conn: under, cap: cp}
	cp.conns[cc] = struct{}{}
	closed := make(chan struct{})
	go func() { cc.closeIfUnused(); close(closed) }()
	<-under.closing // the close has begun and not ended
	if n, err := cc.Write([]byte("POST / HTTP/1.1\r\n")); n != 0 || err == nil || under.wrote.Load() {
		t.Errorf("a write on a connection being closed as unused: %d bytes, %v; reached the socket: %v", n, err, under.wrote.Load())
	}
	close(under.release)
	<-closed
	if len(cp.slots) != 0 || len(cp.conns) != 0 {
		t.Errorf("after the close: %d slots held, %d connections tracked", len(cp.slots), len(cp.conns))
	}
	done := cc.use()
	done()
	done() // twice: counted once
	if cc.used != 0 {
		t.Errorf("used %d after a request's end, want 0", cc.used)
	}
}

// heldConn is a net.Conn whose Close signals closing and waits for
// release, and which records whether it was written to.
type heldConn struct {
	net.Conn
	closing, release chan struct{}
	wrote            atomic.Bool
}

func (c *heldConn) Write(p []byte) (int, error) { c.wrote.Store(true); return len(p), nil }
func (c *heldConn) Close() error {
	close(c.closing)
	<-c.release
	return nil
}

// A connection dialed for a post that got a pooled connection while it
// dialed is unused from the moment it is dialed: a dial waiting for the
// only slot gets it then, without waiting out the setup window (an hour
// here) or another post's end. Before, the waiting dial was told only
// when posts ended, and slots could stay held by such connections.
func TestCapFreesSlotOfUnwantedDial(t *testing.T) {
	release := make(chan struct{})
	var dials atomic.Int32
	cp := newConnCap(1, time.Hour, pipeDial(func(string) {
		if dials.Add(1) == 1 {
			<-release // the first dial is slow
		}
	}))
	first, second := &dialWant{}, &dialWant{}
	first.get()
	second.get()
	firstDone := make(chan error, 1)
	go func() {
		_, err := cp.DialContext(context.WithValue(context.Background(), dialWantKey{}, first), "tcp", "a")
		firstDone <- err
	}()
	if !within(10*time.Second, func() bool { return dials.Load() == 1 }) {
		t.Fatal("the first dial never started")
	}
	secondDone := make(chan error, 1)
	go func() {
		_, err := cp.DialContext(context.WithValue(context.Background(), dialWantKey{}, second), "tcp", "b")
		secondDone <- err
	}()
	if !within(10*time.Second, func() bool { return cp.waiting.Load() == 1 }) {
		t.Fatal("the second dial never waited for the slot")
	}
	cp.got(first) // its post took a pooled connection meanwhile
	if !within(10*time.Second, func() bool { return len(cp.changed) == 0 }) {
		t.Fatal("the waiting dial never looked again")
	} // it found nothing to close: the first dial's connection is not made yet
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	awaitDial(t, secondDone, "the second dial still waits for a slot held by a connection nobody wants")
}

// The transport has no limit of idle connections in all: past one it
// closes the oldest idle connection, which can be one whose answer its
// reader has pooled and not yet handed to the request (a post the webhook
// took, failed: "putIdleConn: too many idle connections", and retried).
// A limit at the cap is not enough: a connection the cap closes stays in
// the transport's idle list until its reader sees the close, while its
// slot already serves a new connection (a review reproduced the failure
// with the limit at the cap and a reader scheduled 20 ms late).
// TestClientCapKeepsAnsweredPosts met it 3 times in 5 at cap 2 with the
// limit at half the cap; with the cap's closing prompt it meets it too
// rarely to be the guard, so this checks the setting.
func TestClientTransportNeverEvictsIdle(t *testing.T) {
	for _, maxConns := range []int{1, 2, 8, DefaultMaxConns} {
		c := NewClient(ClientOptions{AllowPrivate: true, MaxConns: maxConns})
		tr := c.Transport.(*limitBody).next.(*http.Transport)
		if tr.MaxIdleConns != 0 {
			t.Errorf("cap %d: the transport's MaxIdleConns is %d: it evicts idle connections", maxConns, tr.MaxIdleConns)
		}
	}
}

// capWithConn returns a cap of one slot over pipes, whose dials it counts
// by address, and the connection dialed for a request that uses it.
func capWithConn(t *testing.T) (cp *connCap, dials *sync.Map, x *cappedConn, done func()) {
	t.Helper()
	dials = new(sync.Map)
	cp = newConnCap(1, time.Hour, pipeDial(func(addr string) {
		n, _ := dials.LoadOrStore(addr, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
	}))
	w := &dialWant{}
	w.get()
	conn, err := cp.DialContext(context.WithValue(context.Background(), dialWantKey{}, w), "tcp", "x")
	if err != nil {
		t.Fatal(err)
	}
	x = conn.(*cappedConn)
	done = x.use()
	cp.got(w)
	return cp, dials, x, done
}

// waitingDial starts a dial for a new request's first attempt on cp and
// waits until cp counts waiters dials waiting.
func waitingDial(t *testing.T, cp *connCap, addr string, waiters int32) (*dialWant, chan error) {
	t.Helper()
	w := &dialWant{}
	w.get()
	res := make(chan error, 1)
	go func() {
		_, err := cp.DialContext(context.WithValue(context.Background(), dialWantKey{}, w), "tcp", addr)
		res <- err
	}()
	if !within(10*time.Second, func() bool { return cp.waiting.Load() == waiters }) {
		t.Fatalf("the dial to %s never waited for a slot", addr)
	}
	return w, res
}

// Every waiting dial looks again when a connection falls idle: seven
// waiters whose posts have ended (unwoken) and one whose post waits; the
// only connection's request ends. Before, one waiter took the one wake,
// found its post over and left, and the last waited for the setup window
// (an hour here) with the slot held by an unused connection (a review).
func TestCapWakesEveryWaiter(t *testing.T) {
	cp, _, _, done := capWithConn(t)
	var ended []*dialWant
	for i := range 7 {
		w, _ := waitingDial(t, cp, fmt.Sprintf("b%d", i), int32(i+1))
		ended = append(ended, w)
	}
	_, a := waitingDial(t, cp, "a", 8)
	for _, w := range ended {
		endUnwoken(w)
	}
	done()
	awaitDial(t, a, "the waiting post's dial still waits, though the only connection is unused")
}

// A waiting dial whose post no longer wants it never dials, even when it
// wins a slot before it is woken: it gives the slot back. Before, it
// dialed for nobody (the transport's dial context outlives the request),
// holding the slot for up to DialTimeout while another post waited.
func TestCapUnwantedWaiterLeavesSlot(t *testing.T) {
	cp, dials, x, _ := capWithConn(t)
	b, bres := waitingDial(t, cp, "b", 1)
	_, ares := waitingDial(t, cp, "a", 2)
	endUnwoken(b) // its post is over; no wake yet
	x.Close()     // a slot: b or a wins it
	awaitDial(t, ares, "the waiting post never got the slot")
	cp.wake() // ended's wake, late: b, if still waiting, gives up
	if err := <-bres; err != errUnwanted {
		t.Errorf("the unwanted dial ended with %v, want errUnwanted", err)
	}
	if n, ok := dials.Load("b"); ok {
		t.Errorf("the unwanted dial dialed %d times", n.(*atomic.Int32).Load())
	}
}

// A dial the transport starts (or goes on with) after its post got a
// connection takes no slot and dials nothing, even with slots free.
func TestCapRefusesDialForServedPost(t *testing.T) {
	var dials atomic.Int32
	cp := newConnCap(4, time.Hour, pipeDial(func(string) { dials.Add(1) }))
	w := &dialWant{}
	w.get()
	cp.got(w) // a pooled connection served it
	if _, err := cp.DialContext(context.WithValue(context.Background(), dialWantKey{}, w), "tcp", "x"); err != errUnwanted {
		t.Errorf("a dial for a served post: %v, want errUnwanted", err)
	}
	if n := dials.Load(); n != 0 || len(cp.slots) != 0 {
		t.Errorf("it dialed %d times; %d slots taken", n, len(cp.slots))
	}
}

// pipeDial dials one end of a pipe whose other end is closed, after
// calling dialed with the address.
func pipeDial(dialed func(addr string)) dialFunc {
	return func(_ context.Context, _, addr string) (net.Conn, error) {
		dialed(addr)
		a, b := net.Pipe()
		go b.Close()
		return a, nil
	}
}

// endUnwoken marks w's post as ended, as connCap.ended does, without its
// wake.
func endUnwoken(w *dialWant) {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}

// awaitDial waits for a dial's result on res and fails the test with
// stuck if none comes within 10 s, or with the dial's error.
func awaitDial(t *testing.T, res <-chan error, stuck string) {
	t.Helper()
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(stuck)
	}
}
