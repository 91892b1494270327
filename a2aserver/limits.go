package a2aserver

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// ServeLimits are the connection and request limits of the listeners of an
// A2A server, for hostile or broken clients: bodies too large to buffer,
// clients that send slowly, read slowly or hold connections open. The zero
// value is valid: every field left 0 takes its default.
//
// HTTP (JSON-RPC and HTTP+JSON) gets them from Handler and Server:
//
//	srv := a2aserver.ServeLimits{}.Server(mux)
//
// gRPC from GRPCServer (or GRPCServerOptions):
//
//	grpcSrv := a2aserver.ServeLimits{}.GRPCServer()
//
// and both listeners the connection cap from Listener.
//
// Server-Sent Event streams (SendStreamingMessage, SubscribeToTask) and
// long blocking calls are not cut by the timeouts: the read timeout ends
// when the request body has arrived, and the write timeout bounds each
// write, not the response. Over gRPC they end with their connection,
// after MaxConnectionAge and MaxConnectionAgeGrace.
type ServeLimits struct {
	// MaxBodyBytes bounds an HTTP request body and a gRPC request message.
	// An HTTP body declared larger is answered 413 before any of it is
	// read; a chunked body is read up to the limit, then answered 413. gRPC
	// answers RESOURCE_EXHAUSTED. Default DefaultMaxBodyBytes (4 MiB,
	// gRPC's own default).
	MaxBodyBytes int64
	// MaxRequestFields bounds the fields of a gRPC request message,
	// counted on the wire at every level of nesting (a part, a metadata
	// entry, a value in a list: each is one or more) before it is decoded:
	// decoding costs per field, up to 70 times the field's bytes, so a
	// request of small fields cost far more than its size. A request over
	// it is answered INVALID_ARGUMENT (reason INVALID_PARAMS) without
	// being decoded. Default MaxBodyBytes/8 (524,288 at 4 MiB): every
	// field of a message costs a store at least 8 bytes of
	// engine.Limits.MaxTaskBytes, so a message and request metadata the
	// store's default limits take have fewer. Negative: no limit.
	// HTTP requests are not counted (their JSON is decoded by a2a-go).
	MaxRequestFields int
	// MaxHeaderBytes bounds an HTTP request's header block and a gRPC
	// request's metadata. Default DefaultMaxHeaderBytes (64 KiB).
	MaxHeaderBytes int
	// ReadTimeout is how long a client may take to send an HTTP request's
	// headers, and then again its body (a slower client gets 408 and its
	// connection closed at once: the rest of its body is not read), to
	// complete a gRPC connection's handshake, and for a gRPC call to
	// deliver its request message, counted from the call's start
	// (GRPCServer: then the call is canceled and its connection closed,
	// unless another call on it runs its handler).
	// Default DefaultReadTimeout (10 s).
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of an HTTP response: a client that
	// stops reading is cut once a write has waited this long. Default
	// DefaultWriteTimeout (10 s).
	WriteTimeout time.Duration
	// IdleTimeout closes an HTTP keep-alive connection or a gRPC connection
	// after this long without a request. Default DefaultIdleTimeout (60 s).
	IdleTimeout time.Duration
	// MaxConcurrentStreams bounds the concurrent calls on one gRPC
	// connection. Default DefaultMaxConcurrentStreams (100).
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is the shortest interval between a gRPC client's
	// keepalive pings; a client pinging more often is disconnected
	// (GOAWAY "too_many_pings"). Default DefaultKeepaliveMinTime (30 s).
	KeepaliveMinTime time.Duration
	// MaxConnectionAge closes a gRPC connection after this long (grpc-go
	// adds ±10% jitter): the server sends GOAWAY, so clients open a new
	// connection for new calls, and calls still running after
	// MaxConnectionAgeGrace more are cut (UNAVAILABLE). It bounds what
	// nothing else does: a client that stops reading a server stream, a
	// SubscribeToTask of a task that never ends. Streams longer than both
	// must be resubscribed. Default DefaultMaxConnectionAge (30 min).
	MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace is how long calls may still run on a
	// connection past MaxConnectionAge. Default
	// DefaultMaxConnectionAgeGrace (5 min).
	MaxConnectionAgeGrace time.Duration
	// MaxConns bounds the connections open at once on one listener
	// wrapped by Listener: further connections wait, unanswered, in the
	// kernel's accept queue until one closes. It bounds the descriptors
	// and memory that clients holding connections open can take; the
	// timeouts above free the slots of slow, idle and stalled clients.
	// Default DefaultMaxConns (1024); negative: no limit.
	MaxConns int
}

// Defaults of ServeLimits.
const (
	DefaultMaxBodyBytes          = 4 << 20
	DefaultMaxHeaderBytes        = 64 << 10
	DefaultReadTimeout           = 10 * time.Second
	DefaultWriteTimeout          = 10 * time.Second
	DefaultIdleTimeout           = 60 * time.Second
	DefaultMaxConcurrentStreams  = 100
	DefaultKeepaliveMinTime      = 30 * time.Second
	DefaultMaxConns              = 1024
	DefaultMaxConnectionAge      = 30 * time.Minute
	DefaultMaxConnectionAgeGrace = 5 * time.Minute
)

// EnsureDefaults fills unset fields with their defaults.
func (l *ServeLimits) EnsureDefaults() {
	orDefault(&l.MaxBodyBytes, DefaultMaxBodyBytes)
	orDefault(&l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	orDefault(&l.MaxRequestFields, int(l.MaxBodyBytes/8))
	orDefault(&l.ReadTimeout, DefaultReadTimeout)
	orDefault(&l.WriteTimeout, DefaultWriteTimeout)
	orDefault(&l.IdleTimeout, DefaultIdleTimeout)
	orDefault(&l.MaxConcurrentStreams, DefaultMaxConcurrentStreams)
	orDefault(&l.KeepaliveMinTime, DefaultKeepaliveMinTime)
	orDefault(&l.MaxConns, DefaultMaxConns)
	orDefault(&l.MaxConnectionAge, DefaultMaxConnectionAge)
	orDefault(&l.MaxConnectionAgeGrace, DefaultMaxConnectionAgeGrace)
}

func orDefault[T int | int64 | uint32 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Listener returns ln with at most MaxConns connections open at once
// (golang.org/x/net/netutil.LimitListener): Accept waits for one to close.
// Wrap each listener an A2A server serves, HTTP and gRPC:
//
//	ln = limits.Listener(ln)
func (l ServeLimits) Listener(ln net.Listener) net.Listener {
	l.EnsureDefaults()
	if l.MaxConns < 0 {
		return ln
	}
	return netutil.LimitListener(ln, l.MaxConns)
}

// Server returns an http.Server serving h through Handler, with the header
// and idle timeouts and the header limit set. Set its Addr, or call Serve.
func (l ServeLimits) Server(h http.Handler) *http.Server {
	l.EnsureDefaults()
	return &http.Server{
		Handler:           l.Handler(h),
		ReadHeaderTimeout: l.ReadTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// Handler wraps h so that each request's body is bounded and must arrive
// within ReadTimeout, and each response write within WriteTimeout. The body
// is read whole before h runs (h sees it in memory, as a2a-go's bindings
// read it whole anyway); a body over MaxBodyBytes is never read past the
// limit. Use it with an http.Server whose ReadHeaderTimeout and
// IdleTimeout are set, as Server does.
func (l ServeLimits) Handler(h http.Handler) http.Handler {
	l.EnsureDefaults()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// A deadline left from the previous request on this connection
		// must not cut this one.
		_ = rc.SetWriteDeadline(time.Time{})
		if r.ContentLength > l.MaxBodyBytes {
			reject(w, rc, http.StatusRequestEntityTooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, status := l.readBody(w, r, rc)
			if status != 0 {
				reject(w, rc, status)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: l.WriteTimeout}
		h.ServeHTTP(dw, r)
		dw.arm() // for what net/http writes after h: the buffered rest, the last chunk
	})
}

// readBody reads r's body within the limits, or returns the status to
// answer instead. The buffer grows with the bytes that arrive, from 512
// bytes, and at most to the declared length (or MaxBodyBytes): a declared
// length is never allocated ahead of the body, so a client that sends
// only request heads, each declaring MaxBodyBytes, costs no body buffer.
// Growing by doubling allocates at most about twice what was received.
//
// On success the read deadline is cleared for the handler (a2a-go's
// streams outlive it); on failure it stays past (see reject).
func (l ServeLimits) readBody(w http.ResponseWriter, r *http.Request, rc *http.ResponseController) ([]byte, int) {
	_ = rc.SetReadDeadline(time.Now().Add(l.ReadTimeout))
	body := http.MaxBytesReader(w, r.Body, l.MaxBodyBytes)
	limit := l.MaxBodyBytes + 1
	if r.ContentLength >= 0 {
		// net/http ends the body after ContentLength bytes; no need for
		// room past it.
		limit = min(limit, r.ContentLength+1)
	}
	buf, err := readAll(body, limit)
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		_ = rc.SetReadDeadline(time.Time{})
		return buf, 0
	case errors.As(err, &tooLarge):
		return nil, http.StatusRequestEntityTooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, http.StatusRequestTimeout
	}
	return nil, http.StatusBadRequest // the client went away or sent a broken body
}

// readAll is io.ReadAll with the buffer's growth capped at max bytes, so a
// body cut at the limit costs no buffer larger than the limit.
func readAll(r io.Reader, max int64) ([]byte, error) {
	buf := make([]byte, 0, min(512, max))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= max {
				return nil, &http.MaxBytesError{Limit: max - 1}
			}
			buf = slices.Grow(buf, int(min(int64(cap(buf)), max-int64(len(buf)))))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// reject answers a request whose body was not (wholly) read and closes the
// connection, so the rest of the body is never read either: the read
// deadline is set in the past, because net/http, after the handler, reads
// up to 256 KiB of an unread body before closing — and without a deadline
// a client dribbling that body (one byte every few seconds) would keep the
// connection, and its slot of MaxConns, for as long as it likes after its
// 408.
func reject(w http.ResponseWriter, rc *http.ResponseController, status int) {
	_ = rc.SetReadDeadline(pastDeadline)
	w.Header().Set("Connection", "close")
	http.Error(w, http.StatusText(status), status)
}

// pastDeadline is a deadline that has passed: reads fail at once.
var pastDeadline = time.Unix(1, 0)

// deadlineWriter sets a write deadline before each write of the response,
// so a write that a client does not read is cut after the timeout while
// long streams that keep being read go on.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	armed   time.Time // when arm last set the deadline
}

// arm sets the write deadline to the timeout from now, unless it set it
// less than a sixteenth of the timeout ago: a write then has at least
// 15/16 of the timeout and never more than all of it, and a response
// written in quick succession (a body, then what net/http writes after
// the handler) sets the deadline once.
func (d *deadlineWriter) arm() {
	now := time.Now()
	if !d.armed.IsZero() && now.Sub(d.armed) < d.timeout/16 {
		return
	}
	d.armed = now
	_ = d.rc.SetWriteDeadline(now.Add(d.timeout))
}

func (d *deadlineWriter) WriteHeader(code int) {
	d.arm()
	d.ResponseWriter.WriteHeader(code)
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.arm()
	return d.ResponseWriter.Write(p)
}

// Flush implements http.Flusher (a2a-go's SSE writer requires it).
func (d *deadlineWriter) Flush() {
	d.arm()
	_ = d.rc.Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// GRPCServerOptions returns the gRPC server options that apply the limits:
// request message size, metadata size, concurrent streams per connection,
// connection handshake timeout, idle connections closed after IdleTimeout,
// every connection closed after MaxConnectionAge (and MaxConnectionAgeGrace
// for its calls to finish), keepalive pings enforced (no more often than
// KeepaliveMinTime), the server pinging a connection silent for
// IdleTimeout, closing it when the ping is not answered within ReadTimeout
// (a dead client holding a stream), and each call's request message due
// within ReadTimeout of the call's start (see GRPCServer, which also keeps
// GracefulStop from waiting for calls that have not delivered their
// request; prefer it).
func (l ServeLimits) GRPCServerOptions() []grpc.ServerOption {
	l.EnsureDefaults()
	return l.grpcOptions(newGRPCCalls(l.ReadTimeout))
}

func (l ServeLimits) grpcOptions(calls *grpcCalls) []grpc.ServerOption {
	return append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(int(l.MaxBodyBytes)),
		grpc.ForceServerCodecV2(newFieldsCodec(l.MaxRequestFields)),
		grpc.MaxHeaderListSize(uint32(l.MaxHeaderBytes)),
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.ConnectionTimeout(l.ReadTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     l.IdleTimeout,
			MaxConnectionAge:      l.MaxConnectionAge,
			MaxConnectionAgeGrace: l.MaxConnectionAgeGrace,
			Time:                  l.IdleTimeout,
			Timeout:               l.ReadTimeout,
		}),
	}, calls.options()...)
}
