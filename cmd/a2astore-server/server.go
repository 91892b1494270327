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
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/retention"
	"github.com/a2astore/a2astore/engine/storemetrics"
	"github.com/a2astore/a2astore/engine/tasklog"
	"github.com/a2astore/a2astore/pgcluster"
	"github.com/a2astore/a2astore/pgstore/pgtrace"
	"github.com/a2astore/a2astore/pushdelivery"
)

// Paths served on the HTTP listener.
const (
	jsonrpcPath = "/jsonrpc" // JSON-RPC binding (POST)
	// Everything else under "/" is the HTTP+JSON binding (GET /tasks, …);
	// the agent card is at a2asrv.WellKnownAgentCardPath.
)

// metricsPath is where the metrics listener serves Prometheus exposition.
const metricsPath = "/metrics"

// config is everything the server needs; main fills it from flags.
type config struct {
	Backend   string // mem | pebble | pg
	PebbleDir string // pebble: data directory
	PGDSN     string // pg: connection string
	// PGReplicas are DSNs of hot standbys of PGDSN's primary that Get and
	// List may run on (pgstore.Options.Replicas).
	PGReplicas []string
	Policy     string // none | owner
	// CallerHeader names the request header (or gRPC metadata key) that
	// carries the caller's identity for the owner policy. It is trusted as
	// sent: staging only, or behind an authenticating proxy. "" = none.
	CallerHeader string

	HTTPAddr string // JSON-RPC, HTTP+JSON, agent card
	GRPCAddr string // gRPC
	// MetricsAddr is the listener of /metrics, apart from the A2A
	// listeners: metrics describe every caller's traffic, so they are for
	// operators only. "" = no metrics listener.
	MetricsAddr string
	// PublicHost replaces the listeners' host in the agent card's URLs.
	// Default: the listener's host, or "localhost" when it listens on all
	// interfaces.
	PublicHost string

	// AgentName selects the agent: agentSynthetic ("" too) or agentTCK.
	AgentName string
	Agent     agentConfig
	// TCKLongTask is the TCK agent's long-running task time (0 = default).
	TCKLongTask time.Duration

	// Serve limits the listeners (body size, timeouts, gRPC streams);
	// zero fields take a2aserver's defaults.
	Serve a2aserver.ServeLimits
	// Limits bound the tasks the store accepts; zero fields take the
	// engine's defaults.
	Limits engine.Limits
	// FinishAbandoned, when set, finishes on start every task the store
	// holds as submitted or working: tasks a previous run of this server
	// was executing when it died. It assumes no other server runs agents
	// on the same store.
	FinishAbandoned bool
	// Cluster is cluster mode (-cluster, cluster.go); it turns
	// FinishAbandoned off: other servers may be running those tasks.
	Cluster clusterConfig
	Push    pushConfig
	// Tracing is where spans go (-otel-traces, tracing.go; H2).
	Tracing tracingConfig
	// pgTracer is the PostgreSQL connections' tracer: set by newServer
	// when tracing is on.
	pgTracer pgx.QueryTracer
	// Retain is the retention policy (-retain, retain.go).
	Retain retainConfig
	// A2AInMemory serves from a2a-go's taskstore.InMemory instead of the
	// backend: the benchmark lab's peer, for measurement only (inmemory.go).
	A2AInMemory bool
	// MemInitial is -mem-initial: generated tasks the memory store is
	// filled with before serving (benchmark lab only).
	MemInitial int

	// BackupDir, pebble, is where the metrics listener takes checkpoints
	// (backup.go). "" = no backups through the server.
	BackupDir string
	// ReadyTimeout bounds one readiness check of the backend (health.go).
	// Zero: DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// DrainDelay is how long readiness is false after SIGTERM before the
	// listeners stop accepting (run; SPEC H1).
	DrainDelay time.Duration

	// Clock is the store clock (tests inject one). nil = wall clock.
	Clock  engine.Clock
	Logger *slog.Logger
}

// server is a running a2astore server: one HTTP listener (JSON-RPC,
// HTTP+JSON, agent card) and one gRPC listener over one store, and a
// metrics listener apart.
type server struct {
	cfg      config
	store    *storemetrics.Store // what the handler uses: metrics(policy(backend)); closing it closes the backend
	backend  engine.Store        // the backend under the decorators, for tests that read every task
	registry *prometheus.Registry
	card     *a2a.AgentCard
	execs    *a2aserver.Executions // the agent's running executions
	cluster  *pgcluster.Cluster    // cluster mode only
	retain   *retention.Service    // nil without -retain
	probes   *probes               // liveness and readiness (health.go)
	trimmer  *tasklog.Trimmer      // the task log's retention
	tracer   trace.TracerProvider  // spans of calls and store operations (H2)
	// stopTracing flushes and stops the tracer provider.
	stopTracing func(context.Context) error

	// Push delivery (-push): nil when off.
	pushConfigs          *pushdelivery.ConfigStore
	pusher               *pushdelivery.Worker
	closeOutbox          func() error
	checkpointOutbox     func(dir string) error // pebble: the outbox's Checkpoint (backup.go)
	sweepStop, sweepDone chan struct{}

	httpLn, grpcLn, metricsLn net.Listener // metricsLn nil without MetricsAddr
	httpSrv, metricsSrv       *http.Server
	grpcSrv                   *a2aserver.GRPCServer // GracefulStop does not wait for calls still receiving their request

	serveErr chan error // one value per listener when it stops
	stopOnce sync.Once
	stopErr  error
}

// newServer opens the store, finishes the tasks a previous run abandoned
// (FinishAbandoned) and binds the listeners; call serve to start.
func newServer(ctx context.Context, cfg config) (_ *server, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// Log lines carry client-chosen IDs and error texts: keep them short,
	// and client mistakes out of the error log.
	cfg.Logger = slog.New(a2aserver.LogHandler(cfg.Logger.Handler(), 0))
	switch cfg.AgentName {
	case "", agentSynthetic, agentTCK:
	default:
		return nil, fmt.Errorf("unknown agent %q: want %s or %s", cfg.AgentName, agentSynthetic, agentTCK)
	}
	tp, stopTracing, err := cfg.Tracing.tracerProvider(ctx)
	if err != nil {
		return nil, err
	}
	_, untraced := tp.(noop.TracerProvider)
	tracing := !untraced
	if tracing {
		cfg.pgTracer = pgtrace.New(tp) // a span per PostgreSQL statement of a traced call
	}
	b, err := openBackend(ctx, &cfg)
	if err != nil {
		_ = stopTracing(ctx)
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = b.Store.Close()
			_ = stopTracing(context.WithoutCancel(ctx))
		}
	}()
	if err := checkBackupDir(&cfg, b.Store); err != nil {
		return nil, err
	}
	if cfg.FinishAbandoned && !cfg.Cluster.Enabled {
		n, err := finishAbandoned(ctx, b.Store, abandonedReason, cfg.Logger)
		if err != nil {
			return nil, fmt.Errorf("finish abandoned tasks: %w", err)
		}
		if n > 0 {
			cfg.Logger.Warn("finished tasks a previous run left unfinished", "tasks", n, "state", a2a.TaskStateFailed)
		}
	}
	scoped, err := applyPolicy(&cfg, b.Store)
	if err != nil {
		return nil, err
	}
	if err := preload(ctx, b.Store, cfg.MemInitial, cfg.Clock, cfg.Logger); err != nil {
		return nil, err
	}
	backendName := cfg.Backend
	if backendName == "" {
		backendName = "mem"
	}
	var storeTracer trace.Tracer // nil when tracing is off: no span work per store call
	if tracing {
		storeTracer = tp.Tracer("github.com/a2astore/a2astore/engine/storemetrics")
	}
	metered := storemetrics.New(scoped, storemetrics.Options{Backend: backendName, Tracer: storeTracer})

	reg := prometheus.NewRegistry()
	reg.MustRegister(metered, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range b.Collectors {
		reg.MustRegister(c)
	}

	s := &server{cfg: cfg, store: metered, backend: b.Store, registry: reg, execs: a2aserver.NewExecutions(), serveErr: make(chan error, 3),
		tracer: tp, stopTracing: stopTracing, probes: newProbes(b.Store, cfg.ReadyTimeout, cfg.Logger)}
	if s.retain, err = newRetention(&cfg, metered, b.Store, reg); err != nil {
		return nil, err
	}
	if err := s.listen(); err != nil {
		return nil, err
	}
	s.card = s.agentCard()
	cardHandler, err := a2aserver.AgentCardHandler(s.card, a2aserver.AgentCardOptions{})
	if err != nil {
		s.closeListeners()
		return nil, err
	}

	logs, ok := b.Store.(engine.LogStore)
	if !ok {
		s.closeListeners()
		return nil, fmt.Errorf("backend %q keeps no task log", backendName)
	}
	ts := s.handlerTaskStore(metered)
	handlerOpts := []a2asrv.RequestHandlerOption{a2asrv.WithTaskStore(ts), a2asrv.WithLogger(cfg.Logger)}
	if opt, err := s.startPush(ctx, b, logs); err != nil {
		return nil, s.abort(err)
	} else if opt != nil {
		handlerOpts = append(handlerOpts, opt)
	}
	handlerOpts = append(handlerOpts, a2asrv.WithCallInterceptors(s.interceptors(ts)...))
	if cfg.Cluster.Enabled {
		opt, err := s.startCluster(ctx, b, ts)
		if err != nil {
			return nil, s.abort(err)
		}
		handlerOpts = append(handlerOpts, opt)
	}
	var agent a2asrv.AgentExecutor = newSyntheticAgent(cfg.Agent)
	if cfg.AgentName == agentTCK {
		agent = tckAgent{longTask: cfg.TCKLongTask}
	}
	// Subscriptions read the task log (W9): any non-terminal task, on
	// any instance.
	handler, err := s.subscriptions(a2asrv.NewHandler(s.execs.Wrap(agent), handlerOpts...), ts, logs)
	if err != nil {
		return nil, s.abort(err)
	}
	s.trimmer = tasklog.NewTrimmer(logs, cfg.Retain.LogAge, storeNow(cfg.Clock), cfg.Logger)

	s.serveOn(handler, cardHandler)
	s.startRetention()
	s.trimmer.Start()
	return s, nil
}

// interceptors are the server's call interceptors over ts, the handler's
// task store. The version first: a call in a version the server does not
// speak is not interpreted; then the capabilities the card declares
// (§3.3.4), before anything reads the named task.
func (s *server) interceptors(ts taskstore.Store) []a2asrv.CallInterceptor {
	cfg := &s.cfg
	versions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "a2astore_protocol_version_calls_total",
		Help: "A2A calls by the protocol version they named (A2A-Version): the version served, none, or unsupported (refused).",
	}, []string{"version"})
	s.registry.MustRegister(versions)
	// The counters of every label the guard can report, looked up once:
	// the served versions, none, and unsupported (never the client's
	// value).
	counters := map[string]prometheus.Counter{}
	for _, v := range []string{string(a2a.Version), "none", "unsupported"} {
		counters[v] = versions.WithLabelValues(v)
	}
	interceptors := []a2asrv.CallInterceptor{
		a2aserver.TraceMethod{},
		a2aserver.VersionGuard{Observe: func(v string, ok bool) {
			switch {
			case !ok:
				v = "unsupported"
			case v == "":
				v = "none"
			}
			if c, found := counters[v]; found {
				c.Inc()
				return
			}
			versions.WithLabelValues(v).Inc()
		}},
		a2aserver.CapabilityGuard(s.card.Capabilities),
	}
	if cfg.CallerHeader != "" {
		restrictive := cfg.Policy != "" && cfg.Policy != "none"
		interceptors = append(interceptors, a2aserver.HeaderIdentity{Header: cfg.CallerHeader, Required: restrictive})
		if restrictive {
			cfg.Logger.Warn("caller identity is taken from a request header and trusted as sent: any client that reaches the listeners can claim any identity; serve behind a proxy that authenticates callers and overwrites the header",
				"header", cfg.CallerHeader, "policy", cfg.Policy)
		}
	}
	interceptors = append(interceptors, a2aserver.ContentGuardLimits(cfg.Limits), a2aserver.TaskGuard(ts), a2aserver.HistoryLength())
	return append(interceptors, s.pushInterceptors()...)
}

// serveOn builds the listeners' servers for handler: the agent card,
// JSON-RPC and HTTP+JSON on the HTTP listener, gRPC, and the metrics
// listener's.
func (s *server) serveOn(handler a2asrv.RequestHandler, cardHandler http.Handler) {
	cfg := &s.cfg
	reg := s.registry
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, cardHandler)
	// StreamErrorsCompat: a stream whose first event is an error answers
	// it plainly (SPEC W7). JSON-RPC is served at the URL the card gives
	// and with a trailing slash, where clients that take the URL for a base
	// (the official TCK's) post.
	jsonrpc := a2aserver.VersionParam(a2aserver.StreamErrorsCompat(a2aserver.JSONRPCParamsCompat(a2asrv.NewJSONRPCHandler(handler))))
	mux.Handle(jsonrpcPath, jsonrpc)
	mux.Handle(jsonrpcPath+"/{$}", jsonrpc)
	mux.Handle("/", a2aserver.VersionParam(a2aserver.StreamErrorsCompat(a2aserver.RESTQueryCompat(a2asrv.NewRESTHandler(handler)))))
	// The probes apart from the A2A handlers and their interceptors: no
	// identity, policy or version check applies to them, and they make no
	// spans.
	top := http.NewServeMux()
	s.probes.registerHTTP(top)
	_, untraced := s.tracer.(noop.TracerProvider) // tracing off: no middleware per request
	if untraced {
		top.Handle("/", mux)
	} else {
		top.Handle("/", a2aserver.TraceHTTP(mux, s.tracer))
	}
	s.httpSrv = cfg.Serve.Server(top)

	grpcOpts := a2aserver.GRPCErrorCodes()
	if !untraced {
		grpcOpts = append(a2aserver.TraceGRPC(s.tracer), grpcOpts...)
	}
	s.grpcSrv = cfg.Serve.GRPCServer(append(grpcOpts, grpc.ChainUnaryInterceptor(a2aserver.GRPCRequestValidator, a2aserver.GRPCPushConfigPages), grpc.ChainStreamInterceptor(a2aserver.GRPCStreamRequestValidator))...)
	a2agrpc.NewHandler(handler).RegisterWith(s.grpcSrv.Server)
	healthpb.RegisterHealthServer(s.grpcSrv.Server, grpcHealth{p: s.probes})

	if s.metricsLn != nil {
		mm := http.NewServeMux()
		mm.Handle(metricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		handlePprof(mm)
		s.handleBackup(mm)
		s.metricsSrv = cfg.Serve.Server(mm)
	}
}

// storeNow is the time of the store's clock (nil: the wall clock).
func storeNow(clock engine.Clock) func() time.Time {
	if clock == nil {
		return time.Now
	}
	return func() time.Time { return time.UnixMicro(clock()) }
}

// listen binds the configured listeners, the A2A ones capped at
// Serve.MaxConns connections each.
func (s *server) listen() (err error) {
	defer func() {
		if err != nil {
			for _, ln := range []net.Listener{s.httpLn, s.grpcLn, s.metricsLn} {
				if ln != nil {
					_ = ln.Close()
				}
			}
		}
	}()
	if s.httpLn, err = net.Listen("tcp", s.cfg.HTTPAddr); err != nil {
		return fmt.Errorf("listen http: %w", err)
	}
	s.httpLn = s.cfg.Serve.Listener(s.httpLn)
	if s.grpcLn, err = net.Listen("tcp", s.cfg.GRPCAddr); err != nil {
		return fmt.Errorf("listen grpc: %w", err)
	}
	s.grpcLn = s.cfg.Serve.Listener(s.grpcLn)
	if s.cfg.MetricsAddr != "" {
		if s.metricsLn, err = net.Listen("tcp", s.cfg.MetricsAddr); err != nil {
			return fmt.Errorf("listen metrics: %w", err)
		}
	}
	return nil
}

// agentCard lists the three interfaces at the listeners' addresses.
func (s *server) agentCard() *a2a.AgentCard {
	httpBase := "http://" + s.publicAddr(s.httpLn.Addr())
	card := &a2a.AgentCard{
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
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: s.cfg.Push.Enabled && !s.cfg.A2AInMemory},
		Skills: []a2a.AgentSkill{{
			ID:          "synthetic",
			Name:        "Synthetic task",
			Description: "Turns any message into a task with synthetic progress.",
			Tags:        []string{"staging", "load"},
		}},
	}
	if s.cfg.AgentName == agentTCK {
		card.Name = "a2astore TCK scenario agent"
		card.Description = "The official A2A TCK's scenarios over an a2astore task store: the message ID's prefix selects what the agent does (artifacts, a message reply, input required, a long task to cancel, ...)."
		card.Skills = []a2a.AgentSkill{{
			ID:          "tck",
			Name:        "TCK scenarios",
			Description: "Answers each message as the TCK scenario named by its message ID prefix.",
			Tags:        []string{"tck", "conformance"},
		}}
	}
	return card
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

// serve starts the listeners in the background.
func (s *server) serve() {
	go func() { s.serveErr <- ignoreClosed(s.httpSrv.Serve(s.httpLn)) }()
	go func() { s.serveErr <- ignoreClosed(s.grpcSrv.Serve(s.grpcLn)) }()
	if s.metricsSrv != nil {
		go func() { s.serveErr <- ignoreClosed(s.metricsSrv.Serve(s.metricsLn)) }()
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown messages.
const (
	// shutdownReason is the status message of a task whose agent was
	// stopped because shutdown could not wait for it any longer.
	shutdownReason = "a2astore-server shut down before the agent finished; send the message again to retry"
	// abandonedReason is the status message of a task found unfinished on
	// start: the previous run died while its agent was working.
	abandonedReason = "a2astore-server restarted after the agent was interrupted; send the message again to retry"
)

// finishTimeout bounds how long shutdown waits, after ctx ended, for
// stopped agents to write their final status and for the last responses.
const finishTimeout = 5 * time.Second

// shutdown stops accepting (the listeners close at once), waits until ctx
// ends for in-flight requests and for the agent executions a2a-go runs
// detached from them (a SendMessage with returnImmediately answers long
// before its agent is done), then closes the store. When ctx ends first,
// the executions still running are stopped and their tasks finished as
// failed with shutdownReason — in cluster mode they are handed over to
// the other servers instead (handOver) —; connections still open are then
// cut. Safe to
// call more than once. It fails only when the store does not close
// cleanly.
func (s *server) shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		log := s.cfg.Logger
		s.probes.drain() // not ready from here on (drain did it already after a signal)
		s.probes.stop()
		if s.cluster != nil {
			s.cluster.StopWork() // claim nothing more; deliver events until the calls drained
		}
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			var wg sync.WaitGroup
			wg.Go(s.grpcSrv.GracefulStop)
			wg.Go(func() { _ = s.httpSrv.Shutdown(context.Background()) })
			if s.metricsSrv != nil {
				wg.Go(func() { _ = s.metricsSrv.Close() })
			}
			wg.Wait()
		}()
		// Requests first: an execution starts inside a request, so once
		// no request is in flight every execution is counted.
		var timedOut bool
		select {
		case <-drained:
			timedOut = s.execs.Wait(ctx) != nil
		case <-ctx.Done():
			timedOut = true
		}
		fctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
		defer cancel()
		switch {
		case timedOut && s.cluster != nil:
			s.handOver(fctx)
		case timedOut:
			log.Warn("shutdown timeout: stopping the agent executions still running", "running", s.execs.Running())
			s.execs.Abort(shutdownReason)
			if err := s.execs.Wait(fctx); err != nil {
				log.Error("agent executions did not stop; their tasks are finished on the next start", "running", s.execs.Running())
			}
		}
		if timedOut {
			select {
			case <-drained:
			case <-fctx.Done():
				log.Warn("cutting connections still open")
				_ = s.httpSrv.Close()
				s.grpcSrv.Stop()
				<-drained
			}
		}
		if s.retain != nil {
			_ = s.retain.Close()
		}
		_ = s.trimmer.Close()
		s.stopPush(fctx) // before the store and pool it reads
		if s.cluster != nil {
			if err := s.cluster.Settle(fctx); err != nil {
				log.Warn("cluster work items not settled; other servers take them over when their leases expire", "error", err)
			}
			_ = s.cluster.Close() // before the pool it runs on
		}
		s.stopErr = s.store.Close()
		_ = s.stopTracing(fctx)
	})
	return s.stopErr
}
