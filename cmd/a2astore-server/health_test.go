package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/a2astore/a2astore/internal/pgtest"
)

// probe GETs path on base and returns the status code and body ("" and
// code 0 when the request fails: connection refused, reset).
func probe(base, path string) (int, string) {
	resp, err := http.Get(base + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// healthClient dials addr's gRPC health service.
func healthClient(t testing.TB, addr string) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// wantHealth checks the gRPC health of "", the A2A service and liveness.
func wantHealth(t testing.TB, hc healthpb.HealthClient, ready, live healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	for svc, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{"": ready, a2aService: ready, livenessService: live} {
		resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != want {
			t.Errorf("gRPC health of %q: %v, %v; want %v", svc, resp.GetStatus(), err, want)
		}
	}
}

// wantProbe checks an HTTP probe's answer exactly: nothing else is said.
func wantProbe(t testing.TB, base, path string, code int, body string) {
	t.Helper()
	if gotCode, got := probe(base, path); gotCode != code || got != body {
		t.Errorf("GET %s: %d %q; want %d %q", path, gotCode, got, code, body)
	}
}

// TestProbes (H1): on the HTTP and gRPC listeners, with -policy owner and
// its required caller header, the probes answer without the header (A2A
// calls without it are refused), say only "ok" or why not, and follow the
// drain: readiness false, liveness true. Watch streams see the drain and
// end when the server stops, without holding its graceful stop. Checked
// by registering the probes behind the policy's header (the probes fail),
// and by dropping probes.stop from shutdown (shutdown waits out its
// timeout for the Watch stream).
func TestProbes(t *testing.T) {
	logs := &syncBuffer{}
	ts := startServer(t, config{Backend: "mem", Policy: "owner", CallerHeader: "X-Caller",
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if _, err := ts.clients[a2a.TransportProtocolJSONRPC].ListTasks(t.Context(), &a2a.ListTasksRequest{}); err == nil {
		t.Fatal("an A2A call without the caller header was served; the test needs a policy that refuses it")
	}
	wantProbe(t, ts.httpBase, livePath, http.StatusOK, "ok\n")
	wantProbe(t, ts.httpBase, readyPath, http.StatusOK, "ok\n")
	hc := healthClient(t, ts.grpcLn.Addr().String())
	wantHealth(t, hc, healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_SERVING)
	if _, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Errorf("gRPC health of an unknown service: %v; want NotFound", err)
	}
	watch, err := hc.Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := watch.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch first: %v, %v", m, err)
	}

	ts.probes.drain()
	wantProbe(t, ts.httpBase, livePath, http.StatusOK, "ok\n")
	wantProbe(t, ts.httpBase, readyPath, http.StatusServiceUnavailable, "not ready: draining\n")
	wantHealth(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING)
	if m, err := watch.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after the drain: %v, %v", m, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := ts.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "shutdown timeout") || strings.Contains(logs.String(), "cutting connections") {
		t.Errorf("shutdown waited for the Watch stream:\n%s", logs.String())
	}
	if _, err := watch.Recv(); err == nil {
		t.Error("the Watch stream is still open after shutdown")
	}
}

// TestReadyzStoppedPostgres (H1): readiness follows the database — false
// while PostgreSQL is stopped (within -ready-timeout, saying only
// "backend unavailable"), true again once it is back — and the schema:
// false while an ordering index is missing. Liveness stays true
// throughout. Checked by making the pg store no readier (the probes stay
// ready with the database down).
func TestReadyzStoppedPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	ts := startServer(t, config{Backend: "pg", PGDSN: dsn, ReadyTimeout: 2 * time.Second})
	hc := healthClient(t, ts.grpcLn.Addr().String())
	wantProbe(t, ts.httpBase, readyPath, http.StatusOK, "ok\n")
	wantHealth(t, hc, healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_SERVING)

	start := pgtest.Halt(t)
	wantProbe(t, ts.httpBase, readyPath, http.StatusServiceUnavailable, "not ready: backend unavailable\n")
	wantProbe(t, ts.httpBase, livePath, http.StatusOK, "ok\n")
	wantHealth(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING)
	start()
	waitUntil(t, "readiness after PostgreSQL is back", func() bool {
		code, _ := probe(ts.httpBase, readyPath)
		return code == http.StatusOK
	})
	wantHealth(t, hc, healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_SERVING)

	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `DROP INDEX idx_a2a_tasks_updated`); err != nil {
		t.Fatal(err)
	}
	wantProbe(t, ts.httpBase, readyPath, http.StatusServiceUnavailable, "not ready: schema not ready\n")
	wantHealth(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING)
}

// TestDrainOnSIGTERM (H1): a real server gets SIGTERM while clients send
// messages. Readiness turns false while the listeners still accept (an
// HTTP 503, not a refused connection; gRPC NOT_SERVING), liveness stays
// true, and the clients, which stop sending once readiness says so (as a
// load balancer does), see no failed request — nor do requests sent after
// readiness turned false, during the drain. Checked with -drain-delay 0:
// the listeners close before any probe sees readiness false.
func TestDrainOnSIGTERM(t *testing.T) {
	srv := startChild(t, "-backend", "pebble", "-pebble-dir", t.TempDir(), "-http", "127.0.0.1:0", "-grpc", "127.0.0.1:0",
		"-metrics", "", "-status-updates", "1", "-drain-delay", "3s")
	card := fetchAgentCard(t, srv.base)
	c, err := a2aclient.NewFromCard(t.Context(), card,
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	var grpcAddr string
	for _, iface := range card.SupportedInterfaces {
		if iface.ProtocolBinding == a2a.TransportProtocolGRPC {
			grpcAddr = iface.URL
		}
	}
	hc := healthClient(t, grpcAddr)
	wantHealth(t, hc, healthpb.HealthCheckResponse_SERVING, healthpb.HealthCheckResponse_SERVING)

	send := func() error {
		_, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{
			Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work"))})
		return err
	}
	notReady := make(chan struct{}) // closed once a probe saw readiness false
	var wg sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-notReady:
					return
				default:
				}
				if err := send(); err != nil {
					t.Errorf("SendMessage before readiness turned false: %v", err)
					return
				}
				mu.Lock()
				sent++
				mu.Unlock()
			}
		})
	}
	waitUntil(t, "a request answered", func() bool { mu.Lock(); defer mu.Unlock(); return sent > 0 })
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		code, body := probe(srv.base, readyPath)
		if code == http.StatusServiceUnavailable {
			if body != "not ready: draining\n" {
				t.Errorf("readiness while draining says %q", body)
			}
			break
		}
		if code != http.StatusOK {
			close(notReady)
			wg.Wait()
			t.Fatalf("readiness answered %d before it turned false (0: the connection failed)", code)
		}
	}
	close(notReady)
	wg.Wait()
	// Still serving through the drain: probes and A2A calls.
	wantProbe(t, srv.base, livePath, http.StatusOK, "ok\n")
	wantHealth(t, hc, healthpb.HealthCheckResponse_NOT_SERVING, healthpb.HealthCheckResponse_SERVING)
	for range 3 {
		if err := send(); err != nil {
			t.Errorf("SendMessage during the drain: %v", err)
		}
	}
	if err := <-srv.done; err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, srv.logs())
	}
	t.Logf("%d messages answered before the drain", sent)
}

// blockingReadier is a backend whose readiness check counts its calls and
// waits for release.
type blockingReadier struct {
	calls   atomic.Int64
	release chan struct{}
}

func (r *blockingReadier) Ready(context.Context) error {
	r.calls.Add(1)
	<-r.release
	return nil
}

// Concurrent readiness probes share the check in flight (review by
// helper-38): the probes answer anyone on the public listener, and each
// check runs statements on the store's pool, so 64 probes at once ran 64
// checks at once. 64 probes, started while a check is held in flight,
// run far fewer (without the sharing: 64).
func TestReadyChecksShared(t *testing.T) {
	r := &blockingReadier{release: make(chan struct{})}
	p := newProbes(r, time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)))
	const probes = 64
	var started, done sync.WaitGroup
	started.Add(probes)
	for range probes {
		done.Go(func() {
			started.Done()
			if reason := p.check(t.Context()); reason != "" {
				t.Errorf("not ready: %s", reason)
			}
		})
	}
	started.Wait()
	for r.calls.Load() == 0 { // until a check is in flight
		runtime.Gosched()
	}
	close(r.release)
	done.Wait()
	if n := r.calls.Load(); n > probes/2 {
		t.Errorf("%d probes at once ran %d readiness checks", probes, n)
	}
}
