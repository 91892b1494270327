package a2aserver

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// GRPCServer is a grpc.Server with ServeLimits applied whose calls must
// deliver their request message within ReadTimeout, and whose
// GracefulStop does not wait for calls still waiting for it. Make one with
// ServeLimits.GRPCServer.
//
// Why: grpc-go bounds a connection's handshake (ConnectionTimeout) and
// closes connections without calls (MaxConnectionIdle), but a call whose
// request message never completes — headers sent, then part of the
// message, or all of it without the end of the stream — holds its stream,
// its handler goroutine and its connection for as long as the client
// answers keepalive pings, which any HTTP/2 client does; GracefulStop
// waits for it. No interceptor can see such a call (the request is read
// before the unary interceptors run). GRPCServer starts a timer when the
// stream opens (a tap.ServerInHandle, grpc.InTapHandle, which grpc-go
// marks experimental) and stops it when the request has been read whole:
// in a unary interceptor, which runs once grpc-go has the message and the
// end of the stream, and in a stream interceptor, when the handler's
// first RecvMsg returns. A call still waiting when the timer fires is
// canceled and, when no call on its connection runs its handler, the
// connection closed, as an HTTP connection is after a slow body's 408: a
// client that opened a call on it and dribbles its message would
// otherwise keep the connection, and its slot of MaxConns, by opening the
// next call (other calls on that connection still waiting for their
// request end too, UNAVAILABLE). A connection on which some call runs is
// kept: a proxy (Envoy, a service mesh) carries many clients' calls on
// one connection, and one client's stalled call must not end the others'
// (a client that keeps a call running on its own connection holds it
// anyway, until MaxConnectionAge). The connection is found by the call's
// peer addresses among the connections Serve accepted, so serve through
// GRPCServer.Serve.
// GracefulStop cancels every such call at once, refuses new ones
// (UNAVAILABLE) and then waits only for the calls whose handlers run.
//
// What it does not bound: a call that has its request and whose response
// the client reads slowly or never (a server stream blocks on HTTP/2 flow
// control) — MaxConnectionAge and MaxConnectionAgeGrace bound those, by
// closing every connection after that long; and a handler that never
// returns, which is the application's business.
type GRPCServer struct {
	*grpc.Server
	calls *grpcCalls
}

// GRPCServer returns a gRPC server with the limits applied
// (GRPCServerOptions, then opts) and the request deadline described at
// the type. Register services on its Server.
func (l ServeLimits) GRPCServer(opts ...grpc.ServerOption) *GRPCServer {
	l.EnsureDefaults()
	calls := newGRPCCalls(l.ReadTimeout)
	return &GRPCServer{Server: grpc.NewServer(append(l.grpcOptions(calls), opts...)...), calls: calls}
}

// Serve serves ln as grpc.Server.Serve does, keeping track of the
// connections it accepts so that a call whose request does not arrive
// in time can close its connection.
func (s *GRPCServer) Serve(ln net.Listener) error {
	return s.Server.Serve(&trackingListener{Listener: ln, calls: s.calls})
}

// GracefulStop cancels the calls still waiting for their request, refuses
// new ones, then stops the server as grpc.Server.GracefulStop does:
// it stops accepting and waits for the calls whose handlers run.
func (s *GRPCServer) GracefulStop() {
	s.calls.drain()
	s.Server.GracefulStop()
}

// Receiving returns the number of calls waiting for their request message.
func (s *GRPCServer) Receiving() int {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	return len(s.calls.mu.waiting)
}

// Causes of the cancellation of a call still waiting for its request.
var (
	errRequestTimeout = errors.New("a2aserver: gRPC request not received within the read timeout")
	errDraining       = errors.New("a2aserver: gRPC server stopping")
)

// grpcCalls tracks the calls of one server that wait for their request,
// and the connections Serve accepted.
type grpcCalls struct {
	timeout time.Duration
	mu      struct {
		sync.Mutex
		waiting  map[*waitingCall]struct{}
		draining bool
		conns    map[connAddrs]map[*trackedConn]struct{}
	}
}

// connAddrs identifies a connection by its two ends, as a call's peer
// (google.golang.org/grpc/peer) names them.
type connAddrs struct{ local, remote string }

func addrsOf(local, remote net.Addr) connAddrs {
	if local == nil || remote == nil {
		return connAddrs{} // shared by every such connection: never closed by address
	}
	return connAddrs{local.Network() + " " + local.String(), remote.Network() + " " + remote.String()}
}

// trackingListener records the connections it accepts in calls until
// they close.
type trackingListener struct {
	net.Listener
	calls *grpcCalls
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, calls: l.calls, addrs: addrsOf(c.LocalAddr(), c.RemoteAddr())}
	l.calls.mu.Lock()
	set := l.calls.mu.conns[tc.addrs]
	if set == nil {
		set = make(map[*trackedConn]struct{}, 1)
		l.calls.mu.conns[tc.addrs] = set
	}
	set[tc] = struct{}{}
	l.calls.mu.Unlock()
	return tc, nil
}

// trackedConn leaves the record when it closes.
type trackedConn struct {
	net.Conn
	calls *grpcCalls
	addrs connAddrs
	once  sync.Once
	// running counts the calls on the connection whose handlers run
	// (their request arrived). REQUIRES: calls.mu held.
	running int
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.calls.mu.Lock()
		set := c.calls.mu.conns[c.addrs]
		delete(set, c)
		if len(set) == 0 {
			delete(c.calls.mu.conns, c.addrs)
		}
		c.calls.mu.Unlock()
	})
	return c.Conn.Close()
}

// connOfLocked returns the connection of the call whose context is ctx,
// if Serve accepted it and no other open connection has the same
// addresses (Unix sockets, for one, leave the client's end unnamed);
// else nil. REQUIRES: c.mu held.
func (c *grpcCalls) connOfLocked(ctx context.Context) *trackedConn {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	if set := c.mu.conns[addrsOf(p.LocalAddr, p.Addr)]; len(set) == 1 {
		for tc := range set {
			return tc
		}
	}
	return nil
}

// timedOut closes the connection of w, a call whose request did not
// arrive in time, unless it is unknown or a call on it runs its handler.
func (c *grpcCalls) timedOut(w *waitingCall) {
	c.mu.Lock()
	conn := w.conn
	if conn != nil && conn.running > 0 {
		conn = nil
	}
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// running records that the handler of the call whose context is ctx runs
// until the returned func is called.
func (c *grpcCalls) running(ctx context.Context) (done func()) {
	w, ok := ctx.Value(waitingCallKey{}).(*waitingCall)
	if !ok || w.conn == nil {
		return func() {}
	}
	c.mu.Lock()
	w.conn.running++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		w.conn.running--
		c.mu.Unlock()
	}
}

// waitingCall is one call from its stream's opening until its request has
// been read (or it ended).
type waitingCall struct {
	cancel context.CancelCauseFunc
	timer  *time.Timer
	conn   *trackedConn // the call's connection; nil: unknown
}

type waitingCallKey struct{}

func newGRPCCalls(timeout time.Duration) *grpcCalls {
	c := &grpcCalls{timeout: timeout}
	c.mu.waiting = make(map[*waitingCall]struct{})
	c.mu.conns = make(map[connAddrs]map[*trackedConn]struct{})
	return c
}

// options are the server options that install the tracking.
func (c *grpcCalls) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(c.opened),
		grpc.ChainUnaryInterceptor(c.unary),
		grpc.ChainStreamInterceptor(c.stream),
	}
}

// opened runs in the connection's reader goroutine when a stream opens;
// the context it returns is the stream's.
func (c *grpcCalls) opened(ctx context.Context, _ *tap.Info) (context.Context, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.draining {
		return nil, status.Error(codes.Unavailable, "server stopping")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	w := &waitingCall{cancel: cancel, conn: c.connOfLocked(ctx)}
	w.timer = time.AfterFunc(c.timeout, func() {
		c.timedOut(w)
		cancel(errRequestTimeout)
	})
	c.mu.waiting[w] = struct{}{}
	// However the call ends, it waits no more.
	context.AfterFunc(ctx, func() { c.received(w) })
	return context.WithValue(ctx, waitingCallKey{}, w), nil
}

// received ends w's wait (again: no-op).
func (c *grpcCalls) received(w *waitingCall) {
	w.timer.Stop()
	c.mu.Lock()
	delete(c.mu.waiting, w)
	c.mu.Unlock()
}

func (c *grpcCalls) receivedIn(ctx context.Context) {
	if w, ok := ctx.Value(waitingCallKey{}).(*waitingCall); ok {
		c.received(w)
	}
}

// unary runs once grpc-go has read the request message and the end of the
// stream.
func (c *grpcCalls) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	defer c.running(ctx)() // first: the connection is busy before the call stops waiting
	c.receivedIn(ctx)
	if err := tooManyFields(req); err != nil {
		return nil, err
	}
	return next(ctx, req)
}

func (c *grpcCalls) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, next grpc.StreamHandler) error {
	rs := &receivingStream{ServerStream: ss, calls: c}
	defer func() {
		if rs.done != nil {
			rs.done()
		}
	}()
	return next(srv, rs)
}

// receivingStream ends the wait when the handler's RecvMsg returns: for
// the server-streaming methods of A2A (one request message), once the
// request and the end of the stream have arrived.
type receivingStream struct {
	grpc.ServerStream
	calls *grpcCalls
	done  func() // the handler runs (set by the first RecvMsg that returned)
}

func (s *receivingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if s.done == nil {
		s.done = s.calls.running(s.Context())
	}
	s.calls.receivedIn(s.Context())
	if err == nil {
		err = tooManyFields(m)
	}
	return err
}

// drain cancels every waiting call and refuses new ones.
func (c *grpcCalls) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.draining = true
	for w := range c.mu.waiting {
		w.cancel(errDraining)
	}
}
