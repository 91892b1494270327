package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/internal/backends"
	"github.com/a2astore/a2astore/pgcluster"
)

// openBackend opens the configured store, with its task log (K7: the
// server's subscriptions and cluster mode read it), and its health
// collectors. In cluster mode the store notifies the cluster's channel.
// -a2a-inmemory with a backend or feature it cannot serve is refused here.
func openBackend(ctx context.Context, cfg *config) (*backends.Backend, error) {
	if err := checkA2AInMemory(cfg); err != nil {
		return nil, err
	}
	if err := checkMemInitial(cfg); err != nil {
		return nil, err
	}
	bc := backends.Config{
		Name: cfg.Backend, Clock: cfg.Clock, PebbleDir: cfg.PebbleDir, PGDSN: cfg.PGDSN, PGReplicas: cfg.PGReplicas, Limits: cfg.Limits, Log: true,
		PGTracer: cfg.pgTracer,
	}
	if cfg.Cluster.Enabled {
		bc.LogNotify = pgcluster.Channel("")
	}
	return backends.Open(ctx, bc)
}

// errNoOwners is applyPolicy's refusal of -policy owner over a backend that
// does not record task owners.
var errNoOwners = errors.New("-policy owner needs a backend that records task owners (an engine.OwnerStore)")

// applyPolicy wraps the store in the configured authorization policy.
// -policy owner needs a store that records owners: over any other every
// Create would fail, so the server refuses to start instead.
func applyPolicy(cfg *config, s engine.Store) (engine.Store, error) {
	switch cfg.Policy {
	case "", "none":
		return s, nil
	case "owner":
		if cfg.CallerHeader == "" {
			return nil, errors.New("-policy owner needs -caller-header")
		}
		if _, ok := s.(engine.OwnerStore); !ok {
			return nil, fmt.Errorf("%w; backend %q does not", errNoOwners, cfg.Backend)
		}
		return authz.New(s, authz.OwnerPolicy{}), nil
	}
	return nil, fmt.Errorf("unknown policy %q (want none or owner)", cfg.Policy)
}
