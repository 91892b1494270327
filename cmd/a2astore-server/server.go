package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/storemetrics"
)

// Paths served on the HTTP listener.
const (
	jsonrpcPath = "/jsonrpc" // JSON-RPC binding (POST)
	metricsPath = "/metrics" // Prometheus exposition
	// Everything else under "/" is the HTTP+JSON binding (GET /tasks, …);
	// the agent card is at a2asrv.WellKnownAgentCardPath.
)

// config is everything the server needs; main fills it from flags.
type config struct {
	Backend   string // mem | pebble | pg
	PebbleDir string // pebble: data directory
	PGDSN     string // pg: connection string
	Policy    string // none | owner
	// CallerHeader names the request header (or gRPC metadata key) that
	// carries the caller's identity for the owner policy. It is trusted as
	// sent: staging only, or behind an authenticating proxy. "" = none.
	CallerHeader string

	HTTPAddr string // JSON-RPC, HTTP+JSON, agent card, /metrics
	GRPCAddr string // gRPC
	// PublicHost replaces the listeners' host in the agent card's URLs.
	// Default: the listener's host, or "localhost" when it listens on all
	// interfaces.
	PublicHost string

	Agent agentConfig

	// Clock is the store clock (tests inject one). nil = wall clock.
	Clock  engine.Clock
	Logger *slog.Logger
}

// server is a running a2astore server: one HTTP listener (JSON-RPC,
// HTTP+JSON, agent card, metrics) and one gRPC listener over one store.
type server struct {
	cfg      config
	store    *storemetrics.Store // what the handler uses: metrics(policy(backend)); closing it closes the backend
	registry *prometheus.Registry
	card     *a2a.AgentCard

	httpLn, grpcLn net.Listener
	httpSrv        *http.Server
	grpcSrv        *grpc.Server

	serveErr chan error // one value per listener when it stops
	stopOnce sync.Once
	stopErr  error
}

// newServer opens the store and binds both listeners; call serve to start.
func newServer(ctx context.Context, cfg config) (_ *server, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b, err := openBackend(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = b.Store.Close()
		}
	}()
	scoped, err := applyPolicy(&cfg, b.Store)
	if err != nil {
		return nil, err
	}
	backendName := cfg.Backend
	if backendName == "" {
		backendName = "mem"
	}
	metered := storemetrics.New(scoped, storemetrics.Options{Backend: backendName})

	reg := prometheus.NewRegistry()
	reg.MustRegister(metered, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range b.Collectors {
		reg.MustRegister(c)
	}

	s := &server{cfg: cfg, store: metered, registry: reg, serveErr: make(chan error, 2)}
	if s.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("listen http: %w", err)
	}
	if s.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		_ = s.httpLn.Close()
		return nil, fmt.Errorf("listen grpc: %w", err)
	}
	s.card = s.agentCard()

	opts := []a2asrv.RequestHandlerOption{
		a2asrv.WithTaskStore(a2aserver.TaskStore(metered)),
		a2asrv.WithLogger(cfg.Logger),
	}
	if cfg.CallerHeader != "" {
		opts = append(opts, a2asrv.WithCallInterceptors(a2aserver.HeaderIdentity{Header: cfg.CallerHeader}))
	}
	handler := a2asrv.NewHandler(newSyntheticAgent(cfg.Agent), opts...)

	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(s.card))
	mux.Handle(metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle(jsonrpcPath, a2asrv.NewJSONRPCHandler(handler))
	mux.Handle("/", a2aserver.RESTQueryCompat(a2asrv.NewRESTHandler(handler)))
	s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	s.grpcSrv = grpc.NewServer(grpc.UnaryInterceptor(a2aserver.GRPCListTasksValidator))
	a2agrpc.NewHandler(handler).RegisterWith(s.grpcSrv)
	return s, nil
}

// agentCard lists the three interfaces at the listeners' addresses.
func (s *server) agentCard() *a2a.AgentCard {
	httpBase := "http://" + s.publicAddr(s.httpLn.Addr())
	return &a2a.AgentCard{
		Name:        "a2astore synthetic agent",
		Description: "Staging agent over an a2astore task store: every message becomes a task that goes through configurable status updates, history and artifacts.",
		Version:     "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(httpBase+jsonrpcPath, a2a.TransportProtocolJSONRPC),
			a2a.NewAgentInterface(httpBase, a2a.TransportProtocolHTTPJSON),
			a2a.NewAgentInterface(s.publicAddr(s.grpcLn.Addr()), a2a.TransportProtocolGRPC),
		},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Capabilities:       a2a.AgentCapabilities{Streaming: true},
		Skills: []a2a.AgentSkill{{
			ID:          "synthetic",
			Name:        "Synthetic task",
			Description: "Turns any message into a task with synthetic progress.",
			Tags:        []string{"staging", "load"},
		}},
	}
}

func (s *server) publicAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	switch {
	case s.cfg.PublicHost != "":
		host = s.cfg.PublicHost
	case net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified():
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// serve starts both listeners in the background.
func (s *server) serve() {
	go func() { s.serveErr <- ignoreClosed(s.httpSrv.Serve(s.httpLn)) }()
	go func() { s.serveErr <- ignoreClosed(s.grpcSrv.Serve(s.grpcLn)) }()
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// shutdown drains both listeners (in-flight requests finish; a blocking
// SendMessage returns only after its task's writes are stored), then closes
// the store. When ctx ends first, remaining connections are cut. Safe to
// call more than once.
func (s *server) shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		grpcDone := make(chan struct{})
		go func() { s.grpcSrv.GracefulStop(); close(grpcDone) }()
		httpErr := s.httpSrv.Shutdown(ctx)
		select {
		case <-grpcDone:
		case <-ctx.Done():
			s.grpcSrv.Stop()
			<-grpcDone
		}
		s.stopErr = errors.Join(httpErr, s.store.Close())
	})
	return s.stopErr
}
