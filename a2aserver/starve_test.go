package a2aserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// starveLimits: few connection slots, a short read timeout.
var starveLimits = ServeLimits{
	MaxConns:     4,
	ReadTimeout:  200 * time.Millisecond,
	WriteTimeout: 200 * time.Millisecond,
	IdleTimeout:  time.Second,
}

// attackers is how many dribbling clients run at once: twice the slots.
const attackers = 2 * 4

// servedWithin is how long a well-behaved client may wait for its answer
// while the attack runs. Served in 0.2-0.45 s on 2 cores at load 10 under
// -race (two rounds of the read timeout); never without the guards.
const servedWithin = 3 * time.Second

// dribbleTick is how often an attacker sends one more byte.
const dribbleTick = 20 * time.Millisecond

// attack runs n attackers until the test ends: each connects, runs
// dribble on its connection until the server closes it, and connects
// again. accepted receives a value each time a connection's first reply
// arrives or it is closed (the server has taken it, so it held a slot).
func attack(t *testing.T, addr string, n int, dribble func(c net.Conn, closed <-chan struct{})) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				closed := make(chan struct{})
				go func() {
					defer close(closed)
					_, _ = io.Copy(io.Discard, c) // until the server closes (or the attacker does)
				}()
				done := make(chan struct{})
				go func() {
					defer close(done)
					dribble(c, closed)
				}()
				select {
				case <-closed:
				case <-stop:
				}
				_ = c.Close()
				<-done
			}
		})
	}
}

// ticks calls send every dribbleTick until closed or send fails.
func ticks(closed <-chan struct{}, send func() error) {
	tk := time.NewTicker(dribbleTick)
	defer tk.Stop()
	for {
		select {
		case <-closed:
			return
		case <-tk.C:
			if send() != nil {
				return
			}
		}
	}
}

// TestServeLimitsSlowBodiesDoNotStarve: twice as many clients as the
// listener has connection slots each send a request head declaring a
// 100 kB body, then dribble it a byte every 20 ms — and reconnect when
// cut. A well-behaved client is still served within a second: a slow
// body's connection is closed with its 408, so slots free up every read
// timeout. Checked by resetting the read deadline after a timed-out body
// read (the pre-fix code): net/http then reads the rest of the body after
// the 408, the attackers keep every slot and the client is not served.
func TestServeLimitsSlowBodiesDoNotStarve(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := starveLimits.Server(http.HandlerFunc(echoBodyLen))
	go func() { _ = srv.Serve(starveLimits.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	attack(t, addr, attackers, func(c net.Conn, closed <-chan struct{}) {
		if _, err := fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"); err != nil {
			return
		}
		ticks(closed, func() error { _, err := c.Write([]byte(" ")); return err })
	})

	// Let the attack take every slot: the first 408s mean the server has
	// been busy with attackers for a whole read timeout.
	probe := rawDribbler(t, addr)
	<-probe

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: servedWithin}
	start := time.Now()
	resp, err := client.Post("http://"+addr+"/", "application/json", bytes.NewReader([]byte(`{}`)))
	if err != nil {
		t.Fatalf("a well-behaved client during the attack: %v after %v", err, time.Since(start).Round(time.Millisecond))
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "2" {
		t.Fatalf("a well-behaved client during the attack: %s %q", resp.Status, body)
	}
	t.Logf("served in %v", time.Since(start).Round(time.Millisecond))
}

// rawDribbler is one more slow-body client; the channel is closed when it
// got its answer (the server has run a whole read timeout on it).
func rawDribbler(t *testing.T, addr string) <-chan struct{} {
	t.Helper()
	got := make(chan struct{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(got)
		var b [1]byte
		_, _ = c.Read(b[:])
	}()
	go ticks(got, func() error { _, err := c.Write([]byte(" ")); return err })
	return got
}

// TestGRPCSlowRequestsDoNotStarve: twice as many clients as the gRPC
// listener has connection slots each open a call, send its headers and
// the start of a 100 kB request message, then dribble the message a byte
// every 20 ms; when the server ends the call they open another on the
// same connection, and when it closes the connection they reconnect. A
// well-behaved client is still served within a second: a call whose
// request does not arrive within the read timeout closes its connection.
// Checked by not closing it (the call alone is canceled, the attackers'
// connections live on with new calls and keep every slot).
func TestGRPCSlowRequestsDoNotStarve(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := starveLimits.GRPCServer()
	healthpb.RegisterHealthServer(srv.Server, health.NewServer())
	go func() { _ = srv.Serve(starveLimits.Listener(ln)) }()
	t.Cleanup(srv.Stop)
	addr := ln.Addr().String()

	attack(t, addr, attackers, dribbleGRPC)

	// Wait until the attack has held the slots for a read timeout: a
	// call of one more attacker has been ended by the server.
	probe := make(chan struct{})
	pc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	_ = pc.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		defer close(probe)
		dribbleGRPCUntilEnd(pc)
	}()
	<-probe

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), servedWithin)
	defer cancel()
	start := time.Now()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("a well-behaved client during the attack: %v after %v", err, time.Since(start).Round(time.Millisecond))
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v", resp.GetStatus())
	}
	t.Logf("served in %v", time.Since(start).Round(time.Millisecond))
}

// grpcAttacker is one HTTP/2 client connection that opens calls and
// dribbles their request messages.
type grpcAttacker struct {
	c     net.Conn
	fr    *http2.Framer
	mu    sync.Mutex // guards writes on fr
	ended chan uint32
}

func newGRPCAttacker(c net.Conn) (*grpcAttacker, error) {
	a := &grpcAttacker{c: c, fr: http2.NewFramer(c, c), ended: make(chan uint32, 16)}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	return a, a.fr.WriteSettings()
}

// read answers pings and settings and reports ended calls until the
// connection fails.
func (a *grpcAttacker) read(closed chan<- struct{}) {
	defer close(closed)
	for {
		f, err := a.fr.ReadFrame()
		if err != nil {
			return
		}
		a.mu.Lock()
		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = a.fr.WritePing(true, f.Data)
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = a.fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			a.callEnded(f.StreamID)
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				a.callEnded(f.StreamID)
			}
		}
		a.mu.Unlock()
	}
}

func (a *grpcAttacker) callEnded(id uint32) {
	select {
	case a.ended <- id:
	default:
	}
}

// open starts a Health/Check call whose message declares 100 kB.
func (a *grpcAttacker) open(id uint32) error {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"},
		{":authority", "x"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(
		a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}),
		a.fr.WriteData(id, false, []byte{0, 0, 1, 0x86, 0xa0})) // 100000 bytes to come
}

func (a *grpcAttacker) dribble(id uint32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fr.WriteData(id, false, []byte{0})
}

// dribbleGRPC is an attacker's connection: calls dribbled one after the
// other until the connection closes.
func dribbleGRPC(c net.Conn, closed <-chan struct{}) {
	a, err := newGRPCAttacker(c)
	if err != nil {
		return
	}
	conClosed := make(chan struct{})
	go a.read(conClosed)
	for id := uint32(1); ; id += 2 {
		if a.open(id) != nil {
			return
		}
		callEnded := make(chan struct{})
		go func() {
			for {
				select {
				case got := <-a.ended:
					if got == id {
						close(callEnded)
						return
					}
				case <-conClosed:
					return
				}
			}
		}()
		stop := make(chan struct{})
		go func() {
			select {
			case <-callEnded:
			case <-conClosed:
			case <-closed:
			}
			close(stop)
		}()
		ticks(stop, func() error { return a.dribble(id) })
		select {
		case <-conClosed:
			return
		case <-closed:
			return
		default:
		}
	}
}

// dribbleGRPCUntilEnd dribbles one call on c until the server ends it or
// closes the connection.
func dribbleGRPCUntilEnd(c net.Conn) {
	a, err := newGRPCAttacker(c)
	if err != nil {
		return
	}
	conClosed := make(chan struct{})
	go a.read(conClosed)
	if a.open(1) != nil {
		return
	}
	stop := make(chan struct{})
	go func() {
		select {
		case <-a.ended:
		case <-conClosed:
		}
		close(stop)
	}()
	ticks(stop, func() error { return a.dribble(1) })
}

// TestGRPCStalledCallSharedAddress: on a Unix socket every client's end
// is unnamed, so a call's peer addresses do not tell its connection from
// the others. A stalled call there is canceled, and no connection is
// closed: a well-behaved client that connected after the attacker keeps
// its stream. Checked by closing a connection with the call's addresses
// even when several have them (the client's stream fails in 7 runs of 8).
func TestGRPCStalledCallSharedAddress(t *testing.T) {
	path := t.TempDir() + "/grpc.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHealth(t, ln)

	// The attacker connects first and opens a call it never completes.
	ac, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ac.Close() })
	_ = ac.SetDeadline(time.Now().Add(10 * time.Second))
	a, err := newGRPCAttacker(ac)
	if err != nil {
		t.Fatal(err)
	}
	aClosed := make(chan struct{})
	go a.read(aClosed)
	if err := a.open(1); err != nil {
		t.Fatal(err)
	}

	// Then the well-behaved client, with a stream open.
	_, watch := openWatch(t, "unix://"+path)

	// The attacker's call ends at the read timeout.
	select {
	case <-a.ended:
	case <-aClosed:
	}
	// The client's stream lives on: it sees the next status change.
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	got, err := watch.Recv()
	if err != nil {
		t.Fatalf("the well-behaved client's stream after another connection's stalled call: %v", err)
	}
	if got.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch: %v", got.GetStatus())
	}
}

// TestGRPCStalledCallOnBusyConnection: a proxy (Envoy, a service mesh)
// carries the calls of many clients on one connection. One client's call
// whose request stalls behind it is canceled at the read timeout, but the
// connection is not closed while another call on it runs its handler:
// the other client's stream lives on. Checked by closing the connection
// whatever runs on it (the stalled call and the stream fail, UNAVAILABLE,
// in 10 runs of 10; the pre-fix code, which closed it after the cancel,
// in 15 of 20).
func TestGRPCStalledCallOnBusyConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHealth(t, ln)

	// One connection, as a proxy's: a well-behaved client's stream ...
	conn, watch := openWatch(t, ln.Addr().String())
	// ... and another client's call whose request never comes.
	stalled, err := conn.NewStream(watch.Context(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/grpc.health.v1.Health/Check")
	if err != nil {
		t.Fatal(err)
	}
	err = stalled.RecvMsg(&healthpb.HealthCheckResponse{})
	if status.Code(err) != codes.Canceled {
		t.Fatalf("the stalled call: %v, want CANCELLED (the call alone ends)", err)
	}
	// The stream lives on: it sees the next status changes.
	for _, want := range []healthpb.HealthCheckResponse_ServingStatus{healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_NOT_SERVING} {
		hs.SetServingStatus("", want)
		got, err := watch.Recv()
		if err != nil {
			t.Fatalf("a stream on the connection of a stalled call: %v", err)
		}
		if got.GetStatus() != want {
			t.Fatalf("watch: %v, want %v", got.GetStatus(), want)
		}
	}
}

// openWatch connects to target and opens a Health/Watch stream, its first
// answer read; both end with the test.
func openWatch(t *testing.T, target string) (*grpc.ClientConn, healthpb.Health_WatchClient) {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	watch, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	return conn, watch
}

// serveHealth serves the health service on ln with starveLimits until the
// test ends.
func serveHealth(t *testing.T, ln net.Listener) *health.Server {
	srv := starveLimits.GRPCServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv.Server, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return hs
}
