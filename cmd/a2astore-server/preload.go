package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/bulkload"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// The benchmark lab's memory fixture (-mem-initial, results/capacity-check.sh):
// a memory store starts empty, and nothing outside the process can load
// it, so the capacity model's check of a memory deployment has the server
// fill its own store before it serves, through the bulk path
// (engine/bulkload), with internal/taskgen's realistic tasks: loadgen's
// data set shape (1,000 Zipf contexts, an owner per context).

// memInitialFlag registers -mem-initial.
func memInitialFlag(fs *flag.FlagSet, n *int) {
	fs.IntVar(n, "mem-initial", 0, "benchmark lab only: before serving, fill the memory store with this many generated realistic tasks (taskgen, 1,000 contexts, an owner per context); needs -backend mem")
}

// errMemInitialFlags is -mem-initial with a store it cannot fill.
var errMemInitialFlags = errors.New("-mem-initial (a generated data set, for measurement only) needs -backend mem, no -a2a-inmemory and a count ≥ 0")

// checkMemInitial refuses -mem-initial with another backend, a2a-go's
// store, or a negative count.
func checkMemInitial(cfg *config) error {
	if cfg.MemInitial == 0 {
		return nil
	}
	if cfg.MemInitial < 0 || (cfg.Backend != "" && cfg.Backend != "mem") || cfg.A2AInMemory {
		return errMemInitialFlags
	}
	return nil
}

// preload fills store with n generated tasks (-mem-initial).
func preload(ctx context.Context, store engine.Store, n int, clock engine.Clock, log *slog.Logger) error {
	if n == 0 {
		return nil
	}
	gen := taskgen.New(taskgen.Shape{})
	res, err := bulkload.Load(ctx, store, bulkload.Config{
		N: n,
		Task: func(i int) (*a2a.Task, string) {
			t := gen.Task(i)
			return t, "owner-" + t.ContextID
		},
		Clock: clock,
	})
	if err != nil {
		return fmt.Errorf("-mem-initial: %w", err)
	}
	log.Warn("filled the memory store with generated tasks: for measurement only", "tasks", res.Written, "seconds", res.Elapsed.Seconds())
	return nil
}
