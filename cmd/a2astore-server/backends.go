package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/pgstore"
)

// backend is an opened store plus what closing it needs.
type backend struct {
	store      engine.Store
	close      func() error
	collectors []prometheus.Collector // backend-specific metrics (pool, LSM)
}

// openBackend opens the configured store. Each backend is one case.
func openBackend(ctx context.Context, cfg *config) (*backend, error) {
	switch cfg.Backend {
	case "", "mem":
		s := memstore.New(memstore.Options{Clock: cfg.Clock})
		return &backend{store: s, close: s.Close}, nil

	case "pebble":
		if cfg.PebbleDir == "" {
			return nil, errors.New("-backend pebble needs -pebble-dir")
		}
		s, err := pebblestore.Open(cfg.PebbleDir, pebblestore.Options{Clock: cfg.Clock})
		if err != nil {
			return nil, err
		}
		return &backend{store: s, close: s.Close, collectors: []prometheus.Collector{
			storemetrics.NewLSMCollector("pebble", func() storemetrics.LSMStats { return lsmStats(s.Metrics()) }),
		}}, nil

	case "pg":
		if cfg.PGDSN == "" {
			return nil, errors.New("-backend pg needs -pg-dsn")
		}
		pcfg, err := pgstore.PoolConfig(cfg.PGDSN)
		if err != nil {
			return nil, fmt.Errorf("pg: %w", err)
		}
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, fmt.Errorf("pg: %w", err)
		}
		s, err := pgstore.New(ctx, pool, pgstore.Options{})
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &backend{
			store: s,
			close: func() error { err := s.Close(); pool.Close(); return err },
			collectors: []prometheus.Collector{
				storemetrics.NewPoolCollector("pg", func() storemetrics.PoolStats { return poolStats(pool.Stat()) }),
			},
		}, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want mem, pebble or pg)", cfg.Backend)
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

func poolStats(s *pgxpool.Stat) storemetrics.PoolStats {
	return storemetrics.PoolStats{
		MaxConns:             s.MaxConns(),
		TotalConns:           s.TotalConns(),
		IdleConns:            s.IdleConns(),
		AcquiredConns:        s.AcquiredConns(),
		AcquireCount:         s.AcquireCount(),
		EmptyAcquireCount:    s.EmptyAcquireCount(),
		CanceledAcquireCount: s.CanceledAcquireCount(),
		AcquireDuration:      s.AcquireDuration(),
	}
}

func lsmStats(m *pebble.Metrics) storemetrics.LSMStats {
	return storemetrics.LSMStats{
		DiskBytes:           m.DiskSpaceUsage(),
		ReadAmp:             m.ReadAmp(),
		CompactionDebtBytes: m.Compact.EstimatedDebt,
		Compactions:         m.Compact.Count,
		Flushes:             m.Flush.Count,
		MemtableBytes:       m.MemTable.Size,
		WALBytes:            m.WAL.Size,
		BlockCacheBytes:     m.BlockCache.Size,
		BlockCacheHits:      m.BlockCache.Hits,
		BlockCacheMisses:    m.BlockCache.Misses,
	}
}
