package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/a2astore/a2astore/pgstore"
)

// Probe paths on the HTTP listener (SPEC H1).
const (
	livePath  = "/healthz" // liveness: the process serves
	readyPath = "/readyz"  // readiness: the backend answers, the schema fits, not draining
)

// livenessService is the grpc.health.v1 service name whose status is
// liveness; "" and the A2A service's name report readiness.
const livenessService = "liveness"

// DefaultReadyTimeout bounds one readiness check of the backend, and
// DefaultDrainDelay is how long readiness is false after SIGTERM before the
// listeners stop accepting.
const (
	DefaultReadyTimeout = 2 * time.Second
	DefaultDrainDelay   = 5 * time.Second
)

// readier is a backend that can tell whether it serves now without reading
// a task (pebblestore and pgstore: Ready). A backend without it (mem) is
// ready while the process is.
type readier interface {
	Ready(context.Context) error
}

// probes answers liveness and readiness (SPEC H1) on the HTTP listener and
// as grpc.health.v1.Health on the gRPC listener. Neither sits behind the
// caller identity or the authorization policy, and neither reads or
// returns task data: an answer is "ok" or "not ready: " and one of
// draining, backend unavailable, schema not ready. The backend's own error
// goes to the log only, once per change of state.
type probes struct {
	ready   func(context.Context) error // nil: always ready
	timeout time.Duration
	log     *slog.Logger

	draining  atomic.Bool
	watchStop chan struct{} // closed when the listeners stop: Watch streams end
	stopOnce  sync.Once
	// checks runs one readiness check at a time: the probes answer on the
	// public listener without an identity, and each check runs
	// statements on the store's pool; concurrent probes share the check
	// in flight.
	checks singleflight.Group

	// grpc holds the statuses Watch streams report; it is safe for
	// concurrent use, and written under mu so that its statuses follow
	// the order of the checks.
	grpc *health.Server
	mu   struct {
		sync.Mutex
		reason string // the last readiness answer's ("": ready)
	}
}

func newProbes(backend any, timeout time.Duration, log *slog.Logger) *probes {
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	p := &probes{timeout: timeout, log: log, watchStop: make(chan struct{})}
	if r, ok := backend.(readier); ok {
		p.ready = r.Ready
	}
	p.grpc = health.NewServer()
	for _, svc := range []string{"", a2aService, livenessService} {
		p.grpc.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	return p
}

// a2aService is the gRPC name of the A2A service.
var a2aService = a2apb.A2AService_ServiceDesc.ServiceName

// Readiness answers.
const (
	notReadyDraining = "draining"
	notReadyBackend  = "backend unavailable"
	notReadySchema   = "schema not ready"
)

// check runs the readiness check, or waits for the one in flight: ""
// when ready, else why not. The check does not end with the context of
// the probe that began it (others may wait for it); its timeout bounds it.
// A probe whose context ends stops waiting (answered not ready).
func (p *probes) check(ctx context.Context) string {
	ch := p.checks.DoChan("ready", func() (any, error) { return p.checkNow(context.WithoutCancel(ctx)), nil })
	var reason string
	select {
	case r := <-ch:
		reason = r.Val.(string)
	case <-ctx.Done():
		reason = notReadyBackend
	}
	if p.draining.Load() { // a check begun before the drain answered
		return notReadyDraining
	}
	return reason
}

// checkNow runs the readiness check.
func (p *probes) checkNow(ctx context.Context) string {
	reason := ""
	var err error
	switch {
	case p.draining.Load():
		reason = notReadyDraining
	case p.ready != nil:
		ctx, cancel := context.WithTimeout(ctx, p.timeout)
		err = p.ready(ctx)
		cancel()
		switch {
		case errors.Is(err, pgstore.ErrSchema):
			reason = notReadySchema
		case err != nil:
			reason = notReadyBackend
		}
	}
	p.record(reason, err)
	return reason
}

// record keeps reason as the readiness the gRPC Watch streams report, and
// logs a change. While draining nothing turns readiness back on.
// It takes p.mu.
func (p *probes) record(reason string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.draining.Load() {
		reason = notReadyDraining
	}
	if reason == p.mu.reason {
		return
	}
	p.mu.reason = reason
	st := healthpb.HealthCheckResponse_SERVING
	switch {
	case reason == "":
		p.log.Info("ready")
	case err != nil:
		st = healthpb.HealthCheckResponse_NOT_SERVING
		p.log.Warn("not ready", "reason", reason, "err", err)
	default:
		st = healthpb.HealthCheckResponse_NOT_SERVING
		p.log.Info("not ready", "reason", reason)
	}
	p.grpc.SetServingStatus("", st)
	p.grpc.SetServingStatus(a2aService, st)
}

// drain turns readiness false for good (SIGTERM); liveness stays true.
func (p *probes) drain() {
	p.draining.Store(true)
	p.record(notReadyDraining, nil)
}

// stop ends the gRPC Watch streams, which would otherwise hold the gRPC
// server's graceful stop until their clients leave.
func (p *probes) stop() { p.stopOnce.Do(func() { close(p.watchStop) }) }

// serveLive answers GET /healthz: 200 while the process serves.
func (p *probes) serveLive(w http.ResponseWriter, _ *http.Request) {
	writeProbe(w, http.StatusOK, "ok")
}

// serveReady answers GET /readyz: 200 when ready, else 503 and why.
func (p *probes) serveReady(w http.ResponseWriter, r *http.Request) {
	if reason := p.check(r.Context()); reason != "" {
		writeProbe(w, http.StatusServiceUnavailable, "not ready: "+reason)
		return
	}
	writeProbe(w, http.StatusOK, "ok")
}

func writeProbe(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body + "\n"))
}

// grpcHealth is grpc.health.v1.Health over the probes: Check of "" or the
// A2A service runs the readiness check, of livenessService answers
// SERVING; Watch reports the statuses the latest checks and the drain set.
type grpcHealth struct {
	healthpb.UnimplementedHealthServer
	p *probes
}

func (h grpcHealth) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	switch req.GetService() {
	case "", a2aService:
		st := healthpb.HealthCheckResponse_SERVING
		if h.p.check(ctx) != "" {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		return &healthpb.HealthCheckResponse{Status: st}, nil
	case livenessService:
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
	return nil, status.Error(codes.NotFound, "unknown service")
}

func (h grpcHealth) List(ctx context.Context, req *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	return h.p.grpc.List(ctx, req)
}

func (h grpcHealth) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.p.watchStop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return h.p.grpc.Watch(req, watchStream{stream, ctx})
}

// watchStream is a Watch stream whose context also ends when the probes
// stop.
type watchStream struct {
	healthpb.Health_WatchServer
	ctx context.Context
}

func (s watchStream) Context() context.Context { return s.ctx }

// registerHTTP serves the probes on mux.
func (p *probes) registerHTTP(mux *http.ServeMux) {
	mux.HandleFunc("GET "+livePath, p.serveLive)
	mux.HandleFunc("GET "+readyPath, p.serveReady)
}

// drain turns readiness false and waits d (or until ctx ends) before
// shutdown stops the listeners, so load balancers see the instance leave
// while it still serves what they send (SPEC H1).
func (s *server) drain(ctx context.Context, d time.Duration) {
	s.probes.drain()
	if d <= 0 {
		return
	}
	s.cfg.Logger.Info("draining: readiness is false; the listeners stop after the drain delay", "delay", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
