package main

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// TestMemInitial: with -mem-initial the server serves a memory store that
// holds that many generated tasks before its first request, valid
// (CheckInvariants) and listed over every transport.
func TestMemInitial(t *testing.T) {
	const n = 300
	ts := startServer(t, config{Backend: "mem", MemInitial: n})
	for _, tr := range transports {
		list, err := ts.clients[tr].ListTasks(t.Context(), &a2a.ListTasksRequest{PageSize: 10})
		if err != nil {
			t.Fatalf("%s ListTasks: %v", tr, err)
		}
		if len(list.Tasks) != 10 || list.TotalSize != n {
			t.Fatalf("%s ListTasks: %d tasks of %d (%v); want a page of the %d loaded", tr, len(list.Tasks), list.TotalSize, err, n)
		}
	}
	c, ok := ts.backend.(engine.Checker)
	if !ok {
		t.Fatalf("backend %T has no CheckInvariants", ts.backend)
	}
	if err := c.CheckInvariants(); err != nil {
		t.Errorf("the filled store: %v", err)
	}
}

// TestMemInitialRefused: -mem-initial with a store it cannot fill, or a
// negative count, is refused at start.
func TestMemInitialRefused(t *testing.T) {
	for _, cfg := range []config{
		{Backend: "pebble", PebbleDir: t.TempDir(), MemInitial: 10},
		{Backend: "mem", A2AInMemory: true, MemInitial: 10},
		{Backend: "mem", MemInitial: -1},
	} {
		cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
		if s, err := newServer(t.Context(), cfg); !errors.Is(err, errMemInitialFlags) {
			if s != nil {
				_ = s.shutdown(t.Context())
			}
			t.Errorf("%+v: %v, want %v", cfg, err, errMemInitialFlags)
		}
	}
}
