package main

import (
	"strings"
	"testing"

	"github.com/a2astore/a2astore/pushdelivery"
)

// TestPushFlagsRefused: a push limit the worker would silently change, or
// that breaks the fairness bound (SPEC N4), is a usage error naming its
// flag (exit 2), before the server opens anything.
func TestPushFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"-push-workers", "0"}, "-push-workers"},
		{[]string{"-push-per-dest", "0"}, "-push-per-dest"},
		{[]string{"-push-deadline", "0s"}, "-push-deadline"},
		{[]string{"-push-per-owner", "-1"}, "-push-per-owner"},
		{[]string{"-push-per-owner", "4"}, "-push-per-owner"},                        // = -push-workers (4)
		{[]string{"-push-workers", "8", "-push-per-owner", "8"}, "-push-per-owner"},  // = -push-workers
		{[]string{"-push-workers", "1", "-push-per-owner", "2"}, "-push-per-owner"},  // above the one worker
		{[]string{"-push-max-conns", "0"}, "-push-max-conns"},                        // below -push-workers (4)
		{[]string{"-push-workers", "16", "-push-max-conns", "8"}, "-push-max-conns"}, // below -push-workers
		{[]string{"-push-workers", "x"}, "-push-workers"},                            // not a number
	} {
		_, _, err := parseFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.flag)
			continue
		}
		// run refuses it before it opens anything (checked only when
		// parseFlags refused it: otherwise run would serve).
		if got := exitCode(run(tc.args)); got != 2 {
			t.Errorf("%v: exit status %d, want 2", tc.args, got)
		}
	}
}

// TestPushFlagsReachWorker: -push-per-owner and -push-max-conns are the
// worker's per-owner limit and its client's connection cap; their zero
// values are pushdelivery's defaults.
func TestPushFlagsReachWorker(t *testing.T) {
	cfg, _, err := parseFlags([]string{"-push-workers", "8", "-push-per-owner", "3", "-push-max-conns", "16", "-push-per-dest", "5"})
	if err != nil {
		t.Fatal(err)
	}
	o, co := cfg.Push.workerOptions()
	if o.Workers != 8 || o.PerOwner != 3 || o.PerDest != 5 || co.MaxConns != 16 {
		t.Fatalf("worker %+v, client %+v: want 8 workers, 3 per owner, 5 per destination, 16 connections", o, co)
	}
	cfg, _, err = parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, co := cfg.Push.workerOptions(); o.PerOwner != 0 || co.MaxConns != pushdelivery.DefaultMaxConns || o.Workers != 4 {
		t.Fatalf("defaults: worker %+v, client %+v", o, co)
	}
	for _, args := range [][]string{{"-push-workers", "1", "-push-per-owner", "1", "-push-max-conns", "1"}, {"-push-per-owner", "3"}} {
		if _, _, err := parseFlags(args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	if got := exitCode(run([]string{"-h"})); got != 0 {
		t.Errorf("-h: exit status %d, want 0", got)
	}
}
