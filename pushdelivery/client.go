package pushdelivery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ClientOptions configure NewClient. The zero value is the safe default.
type ClientOptions struct {
	// AllowPrivate lets the client connect to loopback, private, link-local
	// and other non-public addresses (staging and tests). Default false.
	AllowPrivate bool
	// DialTimeout bounds a connection's setup. Default 5s.
	DialTimeout time.Duration
	// Timeout bounds a whole request, the response body included. Default 10s.
	Timeout time.Duration
	// MaxBody is how much of a response body is read before it is closed.
	// Default 4 KiB.
	MaxBody int64
	// MaxConns bounds the client's open connections, to every
	// destination together (SPEC N4: destinations are chosen by clients):
	// a dial past it first closes the idle connections, then waits for
	// one to close. At most 2 per destination stay idle, for
	// IdleTimeout. Default DefaultMaxConns.
	MaxConns int
	// IdleTimeout is how long an idle connection is kept. Default 30s.
	IdleTimeout time.Duration

	// wrapDial, for tests, wraps the dialer beneath the connection cap:
	// the connections it returns are the client's sockets.
	wrapDial func(dialFunc) dialFunc
}

type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// DefaultMaxConns is ClientOptions.MaxConns's default.
const DefaultMaxConns = 64

// maxH2Buffer bounds an HTTP/2 connection's and stream's receive
// buffers and its header tables (a webhook's answer is its status).
const maxH2Buffer = 64 << 10

// ErrBlocked is the error of a request to an address the client refuses
// (ClientOptions.AllowPrivate unset): it is wrapped in the request's error.
var ErrBlocked = errors.New("pushdelivery: destination address not allowed")

// maxResponseHeader bounds the headers of a response (net/http's default
// is 10 MiB): a webhook's answer is its status, its headers say nothing
// delivery reads.
const maxResponseHeader = 16 << 10

// NewClient returns the HTTP client push delivery posts with, safe against
// server-side request forgery (A2A §13): it checks the address it actually
// connects to, after name resolution (so a name cannot rebind between the
// check and the connection), and refuses loopback, private (RFC 1918,
// unique-local), link-local (the 169.254.169.254 metadata service,
// fe80::/10), unspecified, multicast, shared (100.64.0.0/10), 0.0.0.0/8,
// reserved and broadcast addresses, Azure's metadata address in public
// space (168.63.129.16), and every IPv6 form that embeds one
// (IPv4-mapped and -compatible, SIIT, NAT64, 6to4, Teredo), the local-use
// NAT64 prefix and the IPv6 blocks IANA's special-purpose registry lists
// as not globally reachable (SPEC N3), unless o.AllowPrivate. It uses no proxy, follows no redirect (the
// 3xx is the answer), reads at most o.MaxBody of a body and 16 KiB of
// headers, and times out.
func NewClient(o ClientOptions) *http.Client {
	check := checkAddr
	if o.AllowPrivate {
		check = nil
	}
	return newClient(o, check)
}

// newClient is NewClient with the address check given (nil: none).
func newClient(o ClientOptions, check func(netip.AddrPort) error) *http.Client {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 10
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 30 * time.Second
	}
	d := &net.Dialer{Timeout: o.DialTimeout}
	if check != nil {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrBlocked, err)
			}
			return check(ap)
		}
	}
	tr := &http.Transport{
		Proxy:                  nil,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    o.DialTimeout,
		MaxIdleConns:           0, // no limit: it would evict (see connCap); the cap bounds them
		MaxIdleConnsPerHost:    2,
		MaxConnsPerHost:        min(4, o.MaxConns),
		IdleConnTimeout:        o.IdleTimeout,
		ResponseHeaderTimeout:  o.Timeout,
		MaxResponseHeaderBytes: maxResponseHeader,
		HTTP2: &http.HTTP2Config{
			MaxDecoderHeaderTableSize:     maxH2Buffer,
			MaxEncoderHeaderTableSize:     maxH2Buffer,
			MaxReceiveBufferPerConnection: maxH2Buffer,
			MaxReceiveBufferPerStream:     maxH2Buffer,
		},
	}
	dial := d.DialContext
	if o.wrapDial != nil {
		dial = o.wrapDial(dial)
	}
	conns := newConnCap(o.MaxConns, o.DialTimeout, dial)
	tr.DialContext = conns.DialContext
	return &http.Client{
		Transport:     &limitBody{next: tr, max: o.MaxBody, conns: conns},
		Timeout:       o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// checkAddr refuses the addresses NewClient does not connect to.
func checkAddr(ap netip.AddrPort) error {
	if !public(ap.Addr()) {
		return ErrBlocked
	}
	return nil
}

// Special IPv4 ranges that netip's predicates do not name.
var blocked4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // this network
	netip.MustParsePrefix("100.64.0.0/10"), // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, broadcast
	// Metadata in public address space: Azure's WireServer (platform
	// metadata, extension configuration), reachable from every Azure VM.
	netip.MustParsePrefix("168.63.129.16/32"),
}

// IPv6 prefixes that carry an IPv4 address, and where it sits: refused
// when that address is (IANA's IPv6 special-purpose registry and RFC 6052).
var embedded6 = []struct {
	p   netip.Prefix
	off int // byte offset of the IPv4 address
}{
	{netip.MustParsePrefix("::/96"), 12},           // IPv4-compatible (deprecated)
	{netip.MustParsePrefix("::ffff:0:0:0/96"), 12}, // SIIT IPv4-translated (RFC 2765)
	{netip.MustParsePrefix("64:ff9b::/96"), 12},    // NAT64 well-known prefix
	{netip.MustParsePrefix("2002::/16"), 2},        // 6to4
}

// teredo is 2001::/32: the server's IPv4 address in bytes 4 to 7, the
// client's, each bit inverted, in bytes 12 to 15 (RFC 4380).
var teredo = netip.MustParsePrefix("2001::/32")

// IPv6 ranges refused whole: not globally reachable in IANA's
// special-purpose registry, and not named by netip's predicates.
var blocked6 = []netip.Prefix{
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215): the IPv4 address sits where the operator's prefix length puts it
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("100:0:0:1::/64"), // dummy prefix
	netip.MustParsePrefix("2001:2::/48"),    // benchmarking
	netip.MustParsePrefix("2001:10::/28"),   // ORCHID (deprecated)
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("3fff::/20"),      // documentation
	netip.MustParsePrefix("5f00::/16"),      // SRv6 SIDs
}

// public reports whether a is an address push delivery may connect to.
func public(a netip.Addr) bool {
	a = a.Unmap().WithZone("") // ::ffff:a.b.c.d is a.b.c.d
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() ||
		a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() {
		return false
	}
	if a.Is4() {
		return !inAny(blocked4, a)
	}
	if inAny(blocked6, a) {
		return false
	}
	b := a.As16()
	if teredo.Contains(a) {
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return public(netip.AddrFrom4([4]byte(b[4:8]))) && public(netip.AddrFrom4(client))
	}
	for _, e := range embedded6 {
		if e.p.Contains(a) {
			return public(netip.AddrFrom4([4]byte(b[e.off : e.off+4])))
		}
	}
	return true
}

// inAny reports whether a is in one of ps.
func inAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// limitBody is a RoundTripper whose response bodies end after max bytes
// (a receiver streaming an endless body holds nobody).
type limitBody struct {
	next  http.RoundTripper
	max   int64
	conns *connCap
}

// RoundTrip counts the request on the connection it gets (connCap's
// closeIdle leaves that connection open) until it fails or its response
// body is closed. Once it has a connection, or has failed, a dial made
// for it is no longer wanted (see dialWant).
func (l *limitBody) RoundTrip(r *http.Request) (*http.Response, error) {
	want := &dialWant{}
	defer l.conns.ended(want)
	var mu sync.Mutex
	var dones []func()
	done := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range dones {
			d()
		}
	}
	trace := &httptrace.ClientTrace{GetConn: func(string) { want.get() }, GotConn: func(info httptrace.GotConnInfo) {
		if cc := cappedOf(info.Conn); cc != nil {
			mu.Lock()
			dones = append(dones, cc.use()) // a retried request gets another
			mu.Unlock()
		}
		l.conns.got(want)
	}}
	ctx := context.WithValue(httptrace.WithClientTrace(r.Context(), trace), dialWantKey{}, want)
	resp, err := l.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &limitedBody{r: io.LimitReader(resp.Body, l.max), c: resp.Body, done: done}
	return resp, nil
}

// CloseIdleConnections closes the transport's idle connections, so the
// client's CloseIdleConnections reaches them (http.Client calls it only on
// a RoundTripper that has it).
func (l *limitBody) CloseIdleConnections() {
	if c, ok := l.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type limitedBody struct {
	r    io.Reader
	c    io.Closer
	done func() // the request no longer uses its connection
}

func (b *limitedBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *limitedBody) Close() error {
	err := b.c.Close()
	b.done()
	return err
}

// Reasons of a delivery attempt's outcome (the reason label of
// a2astore_push_failures_total).
const (
	ReasonDelivered = "delivered"
	Reason3xx       = "status_3xx"
	Reason4xx       = "status_4xx"
	Reason5xx       = "status_5xx"
	ReasonTimeout   = "timeout"
	ReasonRefused   = "refused"
	ReasonBlocked   = "blocked"
	ReasonOther     = "other"
	// ReasonExpired: no attempt failed; the entry was older than the
	// deadline when its turn came (Worker.entryFate).
	ReasonExpired = "expired"
)

// failureReasons are the reasons a failed attempt can have.
var failureReasons = []string{Reason3xx, Reason4xx, Reason5xx, ReasonTimeout, ReasonRefused, ReasonBlocked, ReasonOther, ReasonExpired}

// classify names the outcome of a POST: its status class, or the kind of
// its transport error. It never says more than the reason: no URL, no
// credentials.
func classify(status int, err error) string {
	var ne net.Error
	switch {
	case err == nil && status >= 200 && status < 300:
		return ReasonDelivered
	case err == nil && status >= 300 && status < 400:
		return Reason3xx
	case err == nil && status >= 400 && status < 500:
		return Reason4xx
	case err == nil && status >= 500 && status < 600:
		return Reason5xx
	case err == nil:
		return ReasonOther
	case errors.Is(err, ErrBlocked):
		return ReasonBlocked
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, errPostBy), errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonRefused
	}
	return ReasonOther
}

// connCap bounds the open connections of a transport: each holds a slot
// from its dial until it is closed. A dial past the cap closes the
// connections no request is using (see closeIdle), then waits for a slot.
//
// The transport has no limit of idle connections in all (MaxIdleConns 0):
// past one it closes the oldest, which may be one whose answer its reader
// has pooled and not yet handed to the request — the request then fails,
// "putIdleConn: too many idle connections", though the webhook answered.
// A limit at the cap is not enough: a connection closed here leaves the
// transport's idle list only when its reader sees the close, after its
// slot has gone to a new connection, which the transport may pool.
type connCap struct {
	slots chan struct{}
	dial  dialFunc
	setup time.Duration // a connection's dial to its first use at most (the TLS handshake's timeout)

	waiting atomic.Int32 // dials waiting for a slot

	wakeMu  sync.Mutex
	changed chan struct{} // closed (and replaced) when a connection may have become unused or a dial unwanted

	mu    sync.Mutex
	conns map[*cappedConn]struct{} // open
}

func newConnCap(max int, setup time.Duration, dial dialFunc) *connCap {
	return &connCap{slots: make(chan struct{}, max), dial: dial, setup: setup, changed: make(chan struct{}), conns: map[*cappedConn]struct{}{}}
}

func (c *connCap) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	want, _ := ctx.Value(dialWantKey{}).(*dialWant)
	attempt := want.attempt()
	if want.over(attempt) {
		return nil, errUnwanted // the transport dials on after its request is served
	}
	if err := c.slot(ctx, want, attempt); err != nil {
		return nil, err
	}
	conn, err := c.dial(ctx, network, addr)
	if err != nil {
		<-c.slots
		return nil, err
	}
	cc := &cappedConn{Conn: conn, cap: c, want: want, attempt: attempt, setup: time.Now().Add(c.setup)}
	c.mu.Lock()
	c.conns[cc] = struct{}{}
	c.mu.Unlock()
	if want.over(attempt) {
		c.wake() // its request was served while it dialed: unused already
	}
	return cc, nil
}

// errUnwanted fails a dial whose request no longer waits for it.
var errUnwanted = errors.New("pushdelivery: dial no longer wanted")

// dialWant is a request's want of a connection, as the dials the
// transport makes for it see it (a dial keeps its request's context
// values, not its cancellation). Once the request has a connection for
// the attempt a dial was made for — the dial's or another, pooled one —
// or has ended, the dial is not wanted: one waiting for a slot gives up,
// and a connection dialed for it is unused from then on, not being set
// up. (The transport retries a request on a new connection: a new
// attempt.)
type dialWant struct {
	mu       sync.Mutex
	attempts int // connections the request asked for (GetConn)
	got      int // attempts given one (GotConn)
	ended    bool
}

type dialWantKey struct{}

func (w *dialWant) get() {
	w.mu.Lock()
	w.attempts++
	w.mu.Unlock()
}

// attempt is the request's attempt a dial starting now is made for.
func (w *dialWant) attempt() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.attempts
}

// over reports whether a dial for attempt is no longer wanted.
func (w *dialWant) over(attempt int) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended || w.got >= attempt
}

// got marks w's request's current attempt as given a connection.
func (c *connCap) got(w *dialWant) {
	w.mu.Lock()
	w.got = w.attempts
	w.mu.Unlock()
	c.wake()
}

// ended marks w's request as ended.
func (c *connCap) ended(w *dialWant) {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	c.wake()
}

// wake tells every dial waiting for a slot that a connection may have
// become unused, or a dial unwanted: each looks again (one wake for one
// waiter would be lost on a waiter that gives up).
func (c *connCap) wake() {
	if c.waiting.Load() == 0 {
		return
	}
	c.wakeMu.Lock()
	close(c.changed)
	c.changed = make(chan struct{})
	c.wakeMu.Unlock()
}

// wakes returns the channel the next wake closes.
func (c *connCap) wakes() <-chan struct{} {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	return c.changed
}

// slot takes a slot for a dial. At the cap it closes the connections no
// request is using (their slots come back as they close), and again each
// time one may have become unused, or a setup window lapsed; it gives up
// once its request no longer wants the dial.
func (c *connCap) slot(ctx context.Context, want *dialWant, attempt int) error {
	select {
	case c.slots <- struct{}{}:
		return nil
	default:
	}
	c.waiting.Add(1)
	defer c.waiting.Add(-1)
	recheck := time.NewTicker(max(c.setup, time.Millisecond))
	defer recheck.Stop()
	for {
		woken := c.wakes() // before looking: a change after it wakes this wait
		if want.over(attempt) {
			return errUnwanted
		}
		c.closeIdle()
		select {
		case c.slots <- struct{}{}:
			if want.over(attempt) { // unwanted while it waited, unwoken
				<-c.slots
				return errUnwanted
			}
			return nil
		case <-woken:
		case <-recheck.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// closeIdle closes the connections no request is using. It does not call
// the transport's CloseIdleConnections: that closes a connection the
// transport has put back in its pool just before handing its request the
// response (a response without a body), and the request then fails,
// "connection broken: http: CloseIdleConnections called", though the
// webhook answered — its delivery would be retried and posted twice. A
// connection counts as used from its dial until its first request's
// GotConn, for at most the TLS handshake's timeout, and only while the
// request it was dialed for waits (the transport may give that request
// another connection and pool this one), and
// from each request's GotConn until its response body is closed (or the
// request fails). One closed here just before a request takes it from
// the pool fails that request's first write with nothing written (Write
// refuses once it is closing), which the transport retries on another
// connection.
func (c *connCap) closeIdle() {
	c.mu.Lock()
	conns := make([]*cappedConn, 0, len(c.conns))
	for cc := range c.conns {
		conns = append(conns, cc)
	}
	c.mu.Unlock()
	for _, cc := range conns {
		cc.closeIfUnused()
	}
}

// cappedConn is a connection under a connCap: it gives its slot back when
// first closed, and counts the requests using it.
type cappedConn struct {
	net.Conn
	cap     *connCap
	want    *dialWant // of the request it was dialed for,
	attempt int       // for this attempt
	once    sync.Once

	mu      sync.Mutex
	used    int       // requests between their GotConn and their end (HTTP/2: several)
	setup   time.Time // until then, if no request has used it yet, it is being set up for one
	closing bool      // closed as unused: no request may write on it
}

// use counts a request on c until the returned function is called.
func (c *cappedConn) use() (done func()) {
	c.mu.Lock()
	c.used++
	c.setup = time.Time{}
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.used--
			unused := c.used == 0
			c.mu.Unlock()
			if unused {
				c.cap.wake()
			}
		})
	}
}

func (c *cappedConn) closeIfUnused() {
	c.mu.Lock()
	unused := c.used == 0 && !c.closing && (time.Now().After(c.setup) || c.want.over(c.attempt))
	c.closing = c.closing || unused
	c.mu.Unlock()
	if unused {
		_ = c.Close()
	}
}

func (c *cappedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.cap.mu.Lock()
		delete(c.cap.conns, c)
		c.cap.mu.Unlock()
		<-c.cap.slots
	})
	return err
}

// cappedOf returns the cappedConn beneath conn (a TLS connection's
// underlying one), or nil.
func cappedOf(conn net.Conn) *cappedConn {
	for conn != nil {
		if cc, ok := conn.(*cappedConn); ok {
			return cc
		}
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		conn = u.NetConn()
	}
	return nil
}
