package pushdelivery

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPublic: the address policy, IPv4-mapped and embedded forms included.
func TestPublic(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1", false}, {"127.8.9.10", false}, {"::1", false},
		{"10.0.0.1", false}, {"172.16.5.4", false}, {"192.168.1.1", false}, {"fc00::1", false}, {"fd12::1", false},
		{"169.254.169.254", false}, {"169.254.0.1", false}, {"fe80::1", false}, {"fe80::1%eth0", false}, {"fec0::1", false},
		{"0.0.0.0", false}, {"::", false}, {"0.1.2.3", false}, {"100.64.0.1", false}, {"100.127.255.254", false},
		{"224.0.0.1", false}, {"ff02::1", false}, {"ff01::1", false}, {"255.255.255.255", false}, {"240.0.0.1", false},
		{"::ffff:127.0.0.1", false}, {"::ffff:100.64.0.1", false}, {"::ffff:0.1.2.3", false}, {"::ffff:255.255.255.255", false}, {"::ffff:169.254.169.254", false}, {"::ffff:10.0.0.1", false},
		{"::127.0.0.1", false}, {"64:ff9b::a9fe:a9fe", false}, {"64:ff9b:1::a00:1", false}, {"2002:7f00:1::", false},
		{"2002:c0a8:101::1", false},
		// Every IPv4-embedding form of IANA's registry, and its blocks
		// that are not globally reachable.
		{"::ffff:0:7f00:1", false}, {"::ffff:0:a9fe:a9fe", false}, {"::ffff:0:a00:1", false}, // SIIT
		{"64:ff9b:1:a00:0:100::", false}, {"64:ff9b:1::808:808", false}, // local-use NAT64, any prefix length
		{"2001:0:808:808:0:0:f5ff:fffe", false}, // Teredo, client 10.0.0.1
		{"2001:0:a00:1:0:0:f7f7:f7f7", false},   // Teredo, server 10.0.0.1
		{"2001:0:808:808:0:0:f7f7:f7f7", true},  // Teredo, both 8.8.8.8
		{"100::1", false}, {"100:0:0:1::1", false}, {"2001:2::1", false}, {"2001:10::1", false},
		{"2001:db8::1", false}, {"3fff::1", false}, {"5f00::1", false},
		{"::ffff:0:808:808", true}, {"2001:4860:4860::8888", true},
		{"93.184.216.34", true}, {"8.8.8.8", true}, {"100.128.0.1", true}, {"::ffff:8.8.8.8", true},
		{"2606:4700:4700::1111", true}, {"64:ff9b::808:808", true}, {"2002:808:808::1", true},
	} {
		if got := public(netip.MustParseAddr(c.addr)); got != c.ok {
			t.Errorf("public(%s) = %v, want %v", c.addr, got, c.ok)
		}
	}
}

// TestSSRFRefused: the client refuses to connect to loopback, link-local,
// metadata and private addresses, by address or by a name resolving to
// one, unless AllowPrivate.
func TestSSRFRefused(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	targets := []string{srv.URL, "http://localhost:" + port, "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://[::ffff:127.0.0.1]:" + port}
	if l, err := net.Listen("tcp", "[::1]:0"); err == nil { // an IPv6 loopback server when the host has one
		s6 := httptest.NewUnstartedServer(srv.Config.Handler)
		s6.Listener = l
		s6.Start()
		defer s6.Close()
		targets = append(targets, s6.URL)
	} else {
		targets = append(targets, "http://[::1]:"+port)
	}
	// Unguarded, 169.254.169.254 and 10.0.0.1 time out rather than fail
	// as blocked: the dial timeout keeps that failure short.
	c := NewClient(ClientOptions{DialTimeout: 2 * time.Second})
	for _, u := range targets {
		resp, err := c.Post(u, ContentType, strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		if !errors.Is(err, ErrBlocked) || classify(0, err) != ReasonBlocked {
			t.Errorf("POST %s: %v, want ErrBlocked", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server got %d requests", n)
	}
	allowed := NewClient(ClientOptions{AllowPrivate: true})
	for _, u := range []string{srv.URL, "http://localhost:" + port} {
		resp, err := allowed.Post(u, ContentType, strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("AllowPrivate: POST %s: %v", u, err)
		}
		resp.Body.Close()
	}
}

// TestRedirectNotFollowed: a 3xx is the answer, whether its target is
// blocked (loopback) or allowed: the client never follows it. Without
// CheckRedirect the first case fails with ErrBlocked instead of the 302,
// and the second posts to the target.
func TestRedirectNotFollowed(t *testing.T) {
	var targetHits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { targetHits.Add(1) }))
	defer target.Close()
	redirector := httptest.NewServer(http.RedirectHandler(target.URL+"/x", http.StatusFound))
	defer redirector.Close()
	redirAddr := netip.MustParseAddrPort(redirector.Listener.Addr().String())
	// The redirector stands for a public host: the check lets it through.
	onlyRedirector := func(ap netip.AddrPort) error {
		if ap == redirAddr {
			return nil
		}
		return checkAddr(ap)
	}
	for name, c := range map[string]*http.Client{
		"target-blocked": newClient(ClientOptions{}, onlyRedirector),
		"target-allowed": NewClient(ClientOptions{AllowPrivate: true}),
	} {
		resp, err := c.Post(redirector.URL, ContentType, strings.NewReader("{}"))
		if err != nil {
			t.Fatalf("%s: %v, want the 302 itself", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || classify(resp.StatusCode, nil) != Reason3xx {
			t.Fatalf("%s: status %d, want 302", name, resp.StatusCode)
		}
	}
	if n := targetHits.Load(); n != 0 {
		t.Fatalf("the redirect target got %d requests", n)
	}
}

// TestNoProxy: the client uses no proxy, not even HTTP_PROXY's (a proxy
// would connect to the destination unchecked). Checked on the transport:
// net/http bypasses proxies for loopback, so a request to a test server
// would not show it.
func TestNoProxy(t *testing.T) {
	tr := NewClient(ClientOptions{}).Transport.(*limitBody).next.(*http.Transport)
	if tr.Proxy != nil {
		t.Fatal("the client's transport has a proxy function")
	}
}

// endless streams a body until the client goes away.
func endless(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	chunk := []byte(strings.Repeat("x", 1024))
	for r.Context().Err() == nil {
		if _, err := w.Write(chunk); err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}

// TestBodyLimit: the client reads at most MaxBody of an endless body (its
// whole-request timeout is an hour here: only the limit ends the read).
func TestBodyLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(endless))
	defer srv.Close()
	c := NewClient(ClientOptions{AllowPrivate: true, Timeout: time.Hour, MaxBody: 10 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // fails, rather than hangs, without the limit
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || n != 10<<10 {
		t.Fatalf("read %d bytes (%v), want 10 KiB", n, err)
	}
}

// TestEndlessBodyDelivers: a receiver answering 200 with an endless body
// does not hold the worker: the delivery completes.
func TestEndlessBodyDelivers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(endless))
	defer srv.Close()
	h := newHarness(t, func(o *Options) { o.Client = NewClient(ClientOptions{AllowPrivate: true, Timeout: time.Hour}) })
	h.config("t1", "c", srv.URL)
	h.create("t1")
	h.settle()
	if r := h.outbox.rec("t1", "c"); r.Delivered != 1 {
		t.Fatalf("record %+v", r)
	}
}

// TestTimeout: a receiver that never answers fails the attempt as a
// timeout after the client's Timeout.
func TestTimeout(t *testing.T) {
	b := newBlocking() // never released: each request ends with its context
	rc := newReceiver(t, b.answer)
	h := newHarness(t, func(o *Options) {
		o.Client = NewClient(ClientOptions{AllowPrivate: true, Timeout: 100 * time.Millisecond})
	})
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	h.settle()
	r := h.outbox.rec("t1", "c")
	if r.Delivered != 0 || r.LastError != ReasonTimeout || h.counter(h.metrics.failures.WithLabelValues(ReasonTimeout)) != 1 {
		t.Fatalf("record %+v, timeouts %v", r, h.counter(h.metrics.failures.WithLabelValues(ReasonTimeout)))
	}
}

// TestRefusedAndBlockedReasons: a closed port fails as refused; the safe
// client's refusal as blocked, through the worker.
func TestRefusedAndBlockedReasons(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	open := newReceiver(t, nil)
	h := newHarness(t, nil)
	h.config("t1", "c", closed.URL)
	h.create("t1")
	h.settle()
	if r := h.outbox.rec("t1", "c"); r.LastError != ReasonRefused {
		t.Fatalf("closed port: LastError %q, want refused", r.LastError)
	}

	h = newHarness(t, func(o *Options) { o.Client = NewClient(ClientOptions{}) })
	h.config("t1", "c", open.srv.URL)
	h.create("t1")
	h.settle()
	if r := h.outbox.rec("t1", "c"); r.LastError != ReasonBlocked || len(open.hits()) != 0 {
		t.Fatalf("loopback: LastError %q, %d hits; want blocked, none", r.LastError, len(open.hits()))
	}
}

// TestHeaderLimit: a response whose headers are larger than
// maxResponseHeader fails rather than being read into memory (net/http's
// default allows 10 MiB per response, per delivery in flight: a receiver
// answering with huge headers held that much of the server's memory while
// MaxBody bounded only the body).
func TestHeaderLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 1<<20))
	}))
	defer srv.Close()
	resp, err := NewClient(ClientOptions{AllowPrivate: true}).Post(srv.URL, ContentType, strings.NewReader("{}"))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a response with 1 MiB of headers was read: %s", resp.Status)
	}
	if classify(0, err) != ReasonOther {
		t.Fatalf("reason %s (%v), want %s", classify(0, err), err, ReasonOther)
	}
}

// TestPublicRefusesCloudMetadata (SPEC N3, review D): every cloud
// metadata address is refused by default, not only those in a special
// range: Azure's WireServer, 168.63.129.16, reachable from every Azure VM
// (its platform metadata and extension configuration; IMDS is
// 169.254.169.254), is public address space.
func TestPublicRefusesCloudMetadata(t *testing.T) {
	for _, a := range []string{
		"169.254.169.254", // AWS, GCP, Azure IMDS, OpenStack, DigitalOcean
		"fd00:ec2::254",   // AWS IMDS over IPv6
		"100.100.100.200", // Alibaba Cloud
		"192.0.0.192",     // Oracle Cloud
		"168.63.129.16",   // Azure WireServer
		"::ffff:168.63.129.16",
	} {
		if public(netip.MustParseAddr(a)) {
			t.Errorf("public(%s) = true: a metadata address", a)
		}
	}
}
