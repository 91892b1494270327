// Command loadgen drives an a2astore task store with a named workload and
// checks the live-traversal guarantees while it runs. With no flags it loads
// 2,000 tasks into an in-memory store, runs 10,000 operations of the
// traversal-under-churn mix on 8 workers and prints the summary table:
//
//	go run ./loadgen
//	go run ./loadgen -target pebble -dir /tmp/lg -workload write-heavy -duration 30s
//	go run ./loadgen -target pg -dsn postgres://… -workload read-heavy
//	go run ./loadgen -target http://staging:8080 -transport grpc -duration 1m -metrics-addr :9100
//	go run ./loadgen -target http://staging:8080 -workload send-only -duration 5m -push-receiver 127.0.0.1:9200 -push-down 30s -push-every 2m
//
// The exit code is 0 for a clean run, 1 when a live-traversal guarantee was
// violated, a store returned an internal error or the push receiver saw an
// order violation, a malformed delivery or a loss, 2 when the run could not be
// done (bad flags, target unreachable).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/trace"
	"strings"
	"syscall"
	"time"

	"github.com/a2astore/a2astore/loadgen/load"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var cfg load.Config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Target, "target", "mem", "store to load: mem, pebble, pg, an a2astore server's base URL (http://host:port), or several comma-separated (a -cluster deployment: calls alternate between them)")
	fs.StringVar(&cfg.Dir, "dir", "", "pebble: data directory (default: a temporary directory, removed afterwards)")
	fs.BoolVar(&cfg.PebbleNoSync, "pebble-nosync", false, "pebble: acknowledge writes before fsync")
	fs.BoolVar(&cfg.Log, "log", false, "mem, pebble, pg: open the store with its task log on, the log a2astore-server keeps (the initial load writes each task's Create entry; loadgen trims none)")
	fs.StringVar(&cfg.DSN, "dsn", "", "pg: PostgreSQL connection string")
	fs.Func("pg-replica", "pg: connection string of a hot standby of -dsn's primary that the store's reads may run on (repeatable)", func(v string) error {
		cfg.Replicas = append(cfg.Replicas, v)
		return nil
	})
	fs.StringVar(&cfg.Transport, "transport", "jsonrpc", "remote target: jsonrpc, http (HTTP+JSON) or grpc")
	fs.StringVar(&cfg.Caller, "caller", "", "caller identity: sent in -caller-header to a remote server (one with -policy owner needs one); embedded, the store runs under the owner policy and the caller owns its tasks")
	fs.IntVar(&cfg.Callers, "callers", 0, "spread the load over this many callers, CALLER-1…CALLER-N (-caller default loadgen), one per context, each owning its context's tasks")
	fs.StringVar(&cfg.CallerHeader, "caller-header", "X-A2astore-Caller", "remote target: header carrying the caller identity")
	var workloads []string
	for _, n := range load.WorkloadNames() {
		workloads = append(workloads, fmt.Sprintf("%s (%s)", n, load.Workloads[n].Doc))
	}
	fs.StringVar(&cfg.Workload, "workload", "traversal-under-churn", "workload mix: "+strings.Join(workloads, "; "))
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "workers (closed loop unless -rate)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "target operations per second in total (open loop; 0 = closed loop)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop after this long (0 = use -ops)")
	fs.Int64Var(&cfg.Ops, "ops", 0, "stop after this many operations (default 10000 when -duration is 0)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "random seed for data and operations (0 = from the clock; printed)")
	fs.IntVar(&cfg.Initial, "initial", 0, "tasks written before the run (default 2000 embedded, 500 remote; -1 = none): embedded, through the store's bulk path (Pebble batches, PostgreSQL COPY), resuming a stopped load of the same -seed and shape on a -dir or -dsn; remote, by SendMessage")
	fs.IntVar(&cfg.Shape.Contexts, "contexts", 0, "distinct context IDs in the data set (default 1000)")
	fs.Float64Var(&cfg.Shape.Skew, "skew", 0, "Zipf exponent of the context distribution, > 1 (default 1.1)")
	fs.IntVar(&cfg.Shape.History, "history", 0, "history messages per task (default 3, -1 = none)")
	fs.IntVar(&cfg.Shape.Artifacts, "artifacts", 0, "artifacts per task (default 1, -1 = none)")
	fs.IntVar(&cfg.Shape.ArtifactBytes, "artifact-bytes", 0, "text bytes per artifact (default 256)")
	fs.IntVar(&cfg.PageSize, "page-size", 50, "page size of lists and traversals, 1..100 (list-deep uses 100)")
	fs.StringVar(&cfg.PushReceiver, "push-receiver", "", "remote target: run a webhook receiver at ADDR (loopback unless -push-receiver-public) that checks push deliveries: revision order per task, duplicates, and losses (terminal events not delivered within -push-grace after the run); tasks are created with its URL unless -push-url")
	fs.BoolVar(&cfg.PushReceiverPublic, "push-receiver-public", false, "let -push-receiver listen on a non-loopback address")
	fs.StringVar(&cfg.PushURL, "push-url", "", "remote target: create every task with a push notification config for this webhook URL (default: the -push-receiver's URL)")
	fs.DurationVar(&cfg.PushGrace, "push-grace", 30*time.Second, "how long the receiver waits after the run for terminal events still owed (negative: no wait)")
	fs.DurationVar(&cfg.PushDown, "push-down", 0, "the receiver refuses connections for this long at the end of every -push-every (0 = never)")
	fs.DurationVar(&cfg.PushEvery, "push-every", 5*time.Minute, "the period of -push-down windows")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve loadgen's Prometheus metrics (and an embedded store's) at http://ADDR/metrics")
	jsonFile := fs.String("json", "", "write the full result as JSON to this file")
	bench := fs.Bool("bench", false, "also print Go benchmark-format lines (for benchstat)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	traceFile := fs.String("trace", "", "write a Go execution trace of the run's end to this file (go tool trace): a flight recorder keeps about the last -duration, at most 1 GiB, so a longer initial load is left out")
	fs.DurationVar(&cfg.ProgressInterval, "progress-interval", time.Second, "time between progress lines, each covering its interval (with -rate, p50/p99 from each operation's send and how far the run is behind its schedule)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadgen: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if !*quiet {
		cfg.Progress = stderr
		cfg.ProgressTTY = isTerminal(stderr)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var fr *trace.FlightRecorder
	if *traceFile != "" {
		fr = trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: max(cfg.Duration, time.Minute) + 5*time.Second, MaxBytes: 1 << 30})
		if err := fr.Start(); err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return 2
		}
	}
	res, err := load.Run(ctx, cfg)
	if fr != nil {
		if werr := writeTrace(fr, *traceFile); werr != nil {
			fmt.Fprintln(stderr, "loadgen:", werr)
			return 2
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	_ = res.WriteTable(stdout)
	if *bench {
		_ = res.WriteBench(stdout)
	}
	if *jsonFile != "" {
		if err := res.WriteJSONFile(*jsonFile); err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return 2
		}
	}
	if err := res.Err(); err != nil {
		fmt.Fprintln(stderr, "loadgen: FAILED:", err)
		return 1
	}
	return 0
}

// writeTrace writes fr's window to path and stops it.
func writeTrace(fr *trace.FlightRecorder, path string) error {
	defer fr.Stop()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := fr.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
