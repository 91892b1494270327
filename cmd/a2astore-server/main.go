// Command a2astore-server is a real A2A agent over an a2astore task store,
// suitable for staging and load tests.
//
// One HTTP listener serves the JSON-RPC binding at /jsonrpc, the HTTP+JSON
// binding at / (GET /tasks, POST /message:send, …), the agent card at
// /.well-known/agent-card.json (listing all three interfaces) and Prometheus
// metrics at /metrics; a second listener serves gRPC
// (lf.a2a.v1.A2AService). The agent is synthetic: every message becomes a
// task that goes through a configurable number of status updates, history
// messages and an artifact, so SendMessage writes to the store the way real
// agents do.
//
//	a2astore-server -http 127.0.0.1:8080 -grpc 127.0.0.1:9090 -backend mem
//
// SIGINT or SIGTERM drains in-flight requests, then closes the store.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "a2astore-server:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, time.Duration, error) {
	var cfg config
	fs := flag.NewFlagSet("a2astore-server", flag.ContinueOnError)
	fs.StringVar(&cfg.Backend, "backend", "mem", "task store: mem, pebble (needs -pebble-dir) or pg (needs -pg-dsn)")
	fs.StringVar(&cfg.PebbleDir, "pebble-dir", "", "Pebble data directory")
	fs.StringVar(&cfg.PGDSN, "pg-dsn", "", "PostgreSQL connection string")
	fs.StringVar(&cfg.Policy, "policy", "none", "authorization policy: none or owner")
	fs.StringVar(&cfg.CallerHeader, "caller-header", "X-A2astore-Caller", "request header (gRPC metadata key) trusted as the caller identity for -policy owner; staging only")
	fs.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:8080", "listen address for JSON-RPC (/jsonrpc), HTTP+JSON (/), the agent card and /metrics")
	fs.StringVar(&cfg.GRPCAddr, "grpc", "127.0.0.1:9090", "listen address for gRPC")
	fs.StringVar(&cfg.PublicHost, "public-host", "", "host name written in the agent card (default: the listen host)")
	fs.IntVar(&cfg.Agent.StatusUpdates, "status-updates", 2, "synthetic agent: working status updates per task")
	fs.IntVar(&cfg.Agent.HistoryMessages, "history-messages", 1, "synthetic agent: status updates that carry an agent message (kept in history)")
	fs.IntVar(&cfg.Agent.ArtifactBytes, "artifact-bytes", 256, "synthetic agent: size of the artifact per task (0 = none)")
	fs.DurationVar(&cfg.Agent.ThinkTime, "think-time", 0, "synthetic agent: wait before each update")
	grace := fs.Duration("shutdown-timeout", 30*time.Second, "how long shutdown waits for in-flight requests")
	if err := fs.Parse(args); err != nil {
		return config{}, 0, err
	}
	if fs.NArg() > 0 {
		return config{}, 0, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return cfg, *grace, nil
}

func run(args []string) error {
	cfg, grace, err := parseFlags(args)
	if err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	s, err := newServer(ctx, cfg)
	if err != nil {
		return err
	}
	s.serve()
	cfg.Logger.Info("serving",
		"backend", cfg.Backend, "policy", cfg.Policy,
		"http", s.httpLn.Addr().String(), "grpc", s.grpcLn.Addr().String(),
		"card", "http://"+s.publicAddr(s.httpLn.Addr())+"/.well-known/agent-card.json")

	var serveErr error
	select {
	case <-ctx.Done():
		cfg.Logger.Info("shutting down")
	case serveErr = <-s.serveErr:
		cfg.Logger.Error("listener stopped", "err", serveErr)
	}
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return serveErr
}
