package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/fakeclock"
	"github.com/a2astore/a2astore/pebblestore"
)

func total(t *testing.T, s engine.Store) int {
	t.Helper()
	resp, err := s.List(context.Background(), &engine.ListRequest{IncludeTotalSize: true, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return resp.TotalSize
}

// -retain: the server sweeps at its interval, removes the finished tasks
// older than the age (and no others), and exports the retention metrics.
func TestServerRetention(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ts := startServer(t, config{Backend: "mem", Clock: clock.Micros, FinishAbandoned: true,
		Retain: retainConfig{Age: time.Hour, Batch: 2, Pause: -1, clock: clock}})
	interval := time.Minute // a tenth of an hour is more than the most
	clock.WaitFor(interval) // the first sweep found nothing
	ctx := context.Background()
	for i := range 5 {
		st := a2a.TaskStateCompleted
		if i == 0 {
			st = a2a.TaskStateInputRequired
		}
		if _, err := ts.server.backend.Create(ctx, &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("r%d", i)), ContextID: "c", Status: a2a.TaskStatus{State: st}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 61 { // an hour and a minute of sweeps
		clock.Advance(interval)
		clock.WaitFor(interval)
	}
	if n := total(t, ts.server.backend); n != 1 {
		t.Errorf("%d tasks left, want the one waiting for input", n)
	}
	resp, err := http.Get("http://" + ts.server.metricsLn.Addr().String() + metricsPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"a2astore_retention_removed_tasks_total 4",
		`a2astore_retention_sweeps_total{result="ok"}`,
		"a2astore_retention_last_sweep_timestamp_seconds",
		"a2astore_retention_oldest_terminal_age_seconds 0",
		`a2astore_store_operation_duration_seconds_count{backend="mem",operation="remove_expired",outcome="ok"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// -retain-once sweeps the backend once and exits: here a Pebble database
// whose tasks were written two hours ago.
func TestRetainOnce(t *testing.T) {
	dir := t.TempDir()
	past := time.Now().Add(-2 * time.Hour).UnixMicro()
	s, err := pebblestore.Open(dir, pebblestore.Options{Clock: func() int64 { return past }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, st := range []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected} {
		if _, err := s.Create(ctx, &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("p%d", i)), Status: a2a.TaskStatus{State: st}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseFlags([]string{"-backend", "pebble", "-pebble-dir", dir, "-retain", "1h", "-retain-once", "-retain-batch", "2"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	if err := retainOnce(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s, err = pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := total(t, s); n != 1 {
		t.Errorf("%d tasks left, want the working one", n)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

// Bad retention flags stop the server before it serves.
func TestRetainFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-retain-stuck", "1h"},
		{"-retain", "1h", "-retain-stuck", "1m"},
		{"-retain", "-1h"},
		{"-retain", "1h", "-retain-batch", "0"},
		{"-retain", "1h", "-retain-batch", "100000"},
	} {
		cfg, _, err := parseFlags(append(args, "-http", "127.0.0.1:0", "-grpc", "127.0.0.1:0", "-metrics", ""))
		if err == nil {
			cfg.Logger = slog.New(slog.DiscardHandler)
			var s *server
			if s, err = newServer(context.Background(), cfg); err == nil {
				_ = s.shutdown(context.Background())
			}
		}
		if err == nil {
			t.Errorf("%v: the server starts", args)
		}
	}
	if err := retainOnce(context.Background(), config{Retain: retainConfig{Once: true}}); err == nil {
		t.Error("-retain-once without -retain runs")
	}
}
