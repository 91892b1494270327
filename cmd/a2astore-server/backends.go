package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/internal/backends"
)

// openBackend opens the configured store and its health collectors.
func openBackend(ctx context.Context, cfg *config) (*backends.Backend, error) {
	return backends.Open(ctx, backends.Config{
		Name: cfg.Backend, Clock: cfg.Clock, PebbleDir: cfg.PebbleDir, PGDSN: cfg.PGDSN, Limits: cfg.Limits,
	})
}

// applyPolicy wraps the store in the configured authorization policy.
func applyPolicy(cfg *config, s engine.Store) (engine.Store, error) {
	switch cfg.Policy {
	case "", "none":
		return s, nil
	case "owner":
		if cfg.CallerHeader == "" {
			return nil, errors.New("-policy owner needs -caller-header")
		}
		return authz.New(s, authz.OwnerPolicy{}), nil
	}
	return nil, fmt.Errorf("unknown policy %q (want none or owner)", cfg.Policy)
}
