// Command a2astore-server is a real A2A agent over an a2astore task store,
// suitable for staging and load tests.
//
// One HTTP listener serves the JSON-RPC binding at /jsonrpc, the HTTP+JSON
// binding at / (GET /tasks, POST /message:send, …) and the agent card at
// /.well-known/agent-card.json (listing all three interfaces); a second
// listener serves gRPC (lf.a2a.v1.A2AService); Prometheus metrics have a
// listener of their own (-metrics, loopback by default), since they
// describe every caller's traffic, and so have Go's profiles
// (/debug/pprof/ on the same listener). The agent is synthetic: every message
// becomes a task that goes through a configurable number of status
// updates, history messages and an artifact, so SendMessage writes to the
// store the way real agents do.
//
//	a2astore-server -http 127.0.0.1:8080 -grpc 127.0.0.1:9090 -backend mem
//
// The listeners apply a2aserver.ServeLimits (request size, timeouts, a
// connection cap per listener, gRPC streams, keepalive, connection age and
// a deadline on each gRPC call's request) and the store engine.Limits
// (task size and nesting), each settable by flag. With -policy owner each
// caller owns the tasks it creates and sees only those (authz.OwnerPolicy:
// the store records the owner and pages and counts by it, so a caller's
// ListTasks costs the same whatever others hold; the backend must record
// owners, or the server refuses to start). Callers are identified by a
// request header trusted as sent (-caller-header): staging only, or behind
// a proxy that authenticates and overwrites it.
//
// The HTTP listener serves the probes (SPEC H1): GET /healthz (liveness:
// the process serves) and GET /readyz (readiness: the backend answers
// within -ready-timeout, the PostgreSQL schema is the one this build
// expects, the server is not draining); the gRPC listener serves the same
// as grpc.health.v1.Health ("" and lf.a2a.v1.A2AService: readiness;
// "liveness"). Neither needs a caller identity.
//
// SIGINT or SIGTERM first turns readiness false for -drain-delay while
// everything still serves (load balancers see the instance leave), then
// stops accepting, waits up to -shutdown-timeout for
// in-flight requests and running agent executions, fails the tasks of the
// executions it cannot wait for (with a status message saying why), then
// closes the store. On start, tasks a previous run left submitted or
// working (it was killed) are failed the same way (-finish-abandoned).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "a2astore-server:", err)
		}
		os.Exit(exitCode(err))
	}
}

// usageError is a command line the server refuses (an unknown flag, a
// bad value): it exits 2, as the flag package's commands do, before
// opening anything.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// exitCode is the process's exit status after run returned err: 0 for
// none or -h, 2 for a usage error, 1 for any other failure.
func exitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		return 2
	}
	return 1
}

func parseFlags(args []string) (config, time.Duration, error) {
	var cfg config
	fs := flag.NewFlagSet("a2astore-server", flag.ContinueOnError)
	fs.StringVar(&cfg.Backend, "backend", "mem", "task store: mem, pebble (needs -pebble-dir) or pg (needs -pg-dsn)")
	fs.StringVar(&cfg.PebbleDir, "pebble-dir", "", "Pebble data directory")
	fs.StringVar(&cfg.PGDSN, "pg-dsn", "", "PostgreSQL connection string")
	fs.Func("pg-replica", "PostgreSQL connection string of a hot standby of -pg-dsn's primary that GetTask and ListTasks may read from, keeping every guarantee (repeatable)", func(v string) error {
		cfg.PGReplicas = append(cfg.PGReplicas, v)
		return nil
	})
	fs.StringVar(&cfg.Policy, "policy", "none", "authorization policy: none, or owner (each caller owns the tasks it creates and sees only those; the backend must record owners)")
	fs.StringVar(&cfg.CallerHeader, "caller-header", "X-A2astore-Caller", "request header (gRPC metadata key) trusted as the caller identity for -policy owner; staging only")
	fs.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:8080", "listen address for JSON-RPC (/jsonrpc), HTTP+JSON (/) and the agent card")
	fs.StringVar(&cfg.GRPCAddr, "grpc", "127.0.0.1:9090", "listen address for gRPC")
	fs.StringVar(&cfg.MetricsAddr, "metrics", "127.0.0.1:9464", "listen address for Prometheus /metrics and Go's profiles (/debug/pprof/), apart from the A2A listeners (operators only); empty = none")
	fs.Int64Var(&cfg.Serve.MaxBodyBytes, "max-body-bytes", a2aserver.DefaultMaxBodyBytes, "largest HTTP request body and gRPC request message")
	fs.IntVar(&cfg.Serve.MaxHeaderBytes, "max-header-bytes", a2aserver.DefaultMaxHeaderBytes, "largest HTTP header block and gRPC metadata")
	fs.DurationVar(&cfg.Serve.ReadTimeout, "read-timeout", a2aserver.DefaultReadTimeout, "time a client has to send a request's headers, then its body; gRPC handshake timeout, and time a gRPC call has to deliver its request")
	fs.DurationVar(&cfg.Serve.WriteTimeout, "write-timeout", a2aserver.DefaultWriteTimeout, "time one response write may wait for a client that does not read (streams are not cut)")
	fs.DurationVar(&cfg.Serve.IdleTimeout, "idle-timeout", a2aserver.DefaultIdleTimeout, "close HTTP keep-alive and gRPC connections idle this long")
	var streams uint
	fs.UintVar(&streams, "grpc-max-streams", a2aserver.DefaultMaxConcurrentStreams, "concurrent calls per gRPC connection")
	fs.DurationVar(&cfg.Serve.KeepaliveMinTime, "grpc-keepalive-min", a2aserver.DefaultKeepaliveMinTime, "shortest gRPC client keepalive ping interval allowed")
	fs.DurationVar(&cfg.Serve.MaxConnectionAge, "grpc-max-conn-age", a2aserver.DefaultMaxConnectionAge, "close gRPC connections after this long (GOAWAY; bounds streams and slow readers)")
	fs.DurationVar(&cfg.Serve.MaxConnectionAgeGrace, "grpc-max-conn-age-grace", a2aserver.DefaultMaxConnectionAgeGrace, "time calls still have on a gRPC connection past -grpc-max-conn-age")
	fs.IntVar(&cfg.Serve.MaxConns, "max-conns", a2aserver.DefaultMaxConns, "connections open at once on each A2A listener (HTTP, gRPC); more wait to be accepted; -1 = no limit")
	fs.IntVar(&cfg.Limits.MaxTaskBytes, "max-task-bytes", engine.DefaultMaxTaskBytes, "largest task the store accepts (bytes, as engine.TaskShape measures); -1 = no limit")
	fs.IntVar(&cfg.Limits.MaxDepth, "max-depth", engine.DefaultMaxDepth, "deepest nesting of task metadata and data parts the store accepts; -1 = no limit")
	fs.BoolVar(&cfg.FinishAbandoned, "finish-abandoned", true, "on start, fail the tasks a previous run left submitted or working (assumes no other server runs agents on this store)")
	fs.StringVar(&cfg.PublicHost, "public-host", "", "host name written in the agent card (default: the listen host)")
	fs.StringVar(&cfg.AgentName, "agent", agentSynthetic, "agent behind the server: synthetic (staging and load: configurable updates, history, artifacts) or tck (the official A2A TCK's scenarios, chosen by message ID prefix)")
	fs.IntVar(&cfg.Agent.StatusUpdates, "status-updates", 2, "synthetic agent: working status updates per task")
	fs.IntVar(&cfg.Agent.HistoryMessages, "history-messages", 1, "synthetic agent: status updates that carry an agent message (kept in history)")
	fs.IntVar(&cfg.Agent.ArtifactBytes, "artifact-bytes", 256, "synthetic agent: size of the artifact per task (0 = none)")
	fs.DurationVar(&cfg.Agent.ThinkTime, "think-time", 0, "synthetic agent: wait before each update")
	addClusterFlags(fs, &cfg.Cluster)
	addPushFlags(fs, &cfg.Push)
	addTracingFlags(fs, &cfg.Tracing)
	retainFlags(fs, &cfg.Retain)
	a2aInMemoryFlag(fs, &cfg.A2AInMemory)
	memInitialFlag(fs, &cfg.MemInitial)
	fs.StringVar(&cfg.BackupDir, "backup-dir", "", "pebble: directory under which POST /backup on the metrics listener takes consistent checkpoints while the server runs (a2astore-admin backup -server); empty = none")
	fs.DurationVar(&cfg.ReadyTimeout, "ready-timeout", DefaultReadyTimeout, "deadline of the backend's readiness check (GET /readyz, grpc.health.v1)")
	fs.DurationVar(&cfg.DrainDelay, "drain-delay", DefaultDrainDelay, "on SIGTERM or SIGINT, how long readiness is false before the listeners stop accepting (load balancers see the instance leave); a second signal ends it early")
	grace := fs.Duration("shutdown-timeout", 30*time.Second, "how long shutdown waits for in-flight requests and running agents before failing their tasks")
	if err := fs.Parse(args); err != nil {
		return config{}, 0, err
	}
	if streams > math.MaxUint32 {
		return config{}, 0, fmt.Errorf("-grpc-max-streams %d is too large", streams)
	}
	cfg.Serve.MaxConcurrentStreams = uint32(streams)
	if cfg.AgentName != agentSynthetic && cfg.AgentName != agentTCK {
		return config{}, 0, fmt.Errorf("-agent %q: want %s or %s", cfg.AgentName, agentSynthetic, agentTCK)
	}
	if fs.NArg() > 0 {
		return config{}, 0, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := cfg.Push.validate(); err != nil {
		return config{}, 0, err
	}
	return cfg, *grace, nil
}

func run(args []string) error {
	cfg, grace, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Retain.Once {
		return retainOnce(ctx, cfg)
	}

	s, err := newServer(ctx, cfg)
	if err != nil {
		return err
	}
	s.serve()
	metrics := "off"
	if s.metricsLn != nil {
		metrics = "http://" + s.metricsLn.Addr().String() + metricsPath
	}
	s.cfg.Logger.Info("serving",
		"backend", cfg.Backend, "policy", cfg.Policy,
		"http", s.httpLn.Addr().String(), "grpc", s.grpcLn.Addr().String(), "metrics", metrics,
		"card", "http://"+s.publicAddr(s.httpLn.Addr())+"/.well-known/agent-card.json")

	var serveErr error
	select {
	case <-ctx.Done():
		stop()
		// A second signal ends the drain early.
		dctx, dstop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		s.drain(dctx, cfg.DrainDelay)
		dstop()
		s.cfg.Logger.Info("shutting down", "timeout", grace)
	case serveErr = <-s.serveErr:
		s.cfg.Logger.Error("listener stopped", "err", serveErr)
	}
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return serveErr
}
