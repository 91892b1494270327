package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/retention"
	loadgen "github.com/a2astore/a2astore/loadgen/load"
)

// BenchmarkRetainIsolation measures what a retention sweep costs a
// concurrent read-heavy load (the cost isolation): a store holds n
// finished tasks written two hours ago (the backlog) beside loadgen's own;
// loadgen runs its read-heavy mix open loop at a fixed rate for
// BENCH_ISOLATION_SECONDS (default 10), with the retention service (age 1h,
// default batch and pause) removing the backlog meanwhile (retain=on) or
// not (retain=off). Named
//
//	BenchmarkRetainIsolation/backend=B/n=N/retain=on|off
//
// with the p99 latency of get and list (ms) and the tasks removed as
// metrics. Run it with -benchtime 1x.
func BenchmarkRetainIsolation(b *testing.B) {
	seconds := 10
	if v, err := strconv.Atoi(os.Getenv("BENCH_ISOLATION_SECONDS")); err == nil && v > 0 {
		seconds = v
	}
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			e := be.setup(b)
			if e.pool != nil {
				b.Skip("pg has no injectable clock to write a backlog in the past")
			}
			for _, n := range sizes() {
				for _, on := range []bool{false, true} {
					b.Run(fmt.Sprintf("n=%d/retain=%s", n, map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
						for b.Loop() {
							benchIsolation(b, e, n, on, time.Duration(seconds)*time.Second)
						}
					})
				}
			}
		})
	}
}

func benchIsolation(b *testing.B, e *env, n int, on bool, d time.Duration) {
	b.StopTimer()
	// The backlog is written two hours in the past, then the clock is the
	// wall clock.
	var past atomic.Bool
	past.Store(true)
	clock := func() int64 {
		if past.Load() {
			return time.Now().Add(-2 * time.Hour).UnixMicro()
		}
		return time.Now().UnixMicro()
	}
	s, err := e.open(b, fmt.Sprintf("isolation_n%d_%v_%d", n, on, time.Now().UnixNano()), clock)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if c, ok := s.(io.Closer); ok {
			c.Close()
		}
	}()
	f := &retainFill{s: s, state: a2a.TaskStateCompleted}
	f.create(b, n)
	past.Store(false)
	var svc *retention.Service
	if on {
		if svc, err = retention.New(s, retention.Options{Age: time.Hour, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			b.Fatal(err)
		}
	}
	b.StartTimer()
	if svc != nil {
		svc.Start()
	}
	res, err := loadgen.Run(context.Background(), loadgen.Config{Store: s, Target: e.name, Workload: "read-heavy", Concurrency: 4,
		Rate: 2000, Duration: d, Seed: 1, Registry: prometheus.NewRegistry()})
	if svc != nil {
		svc.Close()
	}
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if err := res.Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.Ops[loadgen.OpGet].P99Ms, "get-p99-ms")
	b.ReportMetric(res.Ops[loadgen.OpList].P99Ms, "list-p99-ms")
	removed := 0
	for i := range n {
		if _, err := s.Get(context.Background(), lightTask(i).ID); errors.Is(err, engine.ErrNotFound) {
			removed++
		}
	}
	b.ReportMetric(float64(removed), "removed")
	b.StartTimer()
}
