// Package backends opens an a2astore backend by name — mem, pebble or pg —
// together with the Prometheus collectors of its own health (Pebble's LSM,
// pgxpool's connections), for the commands that let users pick one: the
// staging server and the load generator.
package backends

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/pgstore"
)

// Config says which backend to open. The zero value opens mem.
type Config struct {
	Name      string       // "mem" (default), "pebble" or "pg"
	Clock     engine.Clock // mem and pebble; nil = wall clock
	PebbleDir string       // pebble: required
	// Pebble holds further pebblestore options (NoSync, Logger); its Clock
	// and Limits are replaced by Clock and Limits.
	Pebble pebblestore.Options
	PGDSN  string // pg: required; pool settings ride on the DSN
	// PGReplicas, pg: DSNs of hot standbys that Get and List may run on
	// (pgstore.Options.Replicas).
	PGReplicas []string
	// Limits bound the tasks every backend accepts (zero: the engine's
	// defaults).
	Limits engine.Limits
	// Log keeps the task log (engine.LogStore, K7) on every backend.
	Log bool
	// LogNotify, pg with Log: the channel every logged write notifies
	// (pgcluster.Channel for cluster mode).
	LogNotify string
	// PGTracer, pg: the tracer of the store's connections
	// (pgstore.Options.Tracer; pgtrace.New for a span per statement).
	PGTracer pgx.QueryTracer
}

// Store is an opened store. Closing it releases everything the backend
// holds (database, connection pool).
type Store interface {
	engine.Store
	io.Closer
}

// Backend is an opened store and the collectors of its health. Wrap the
// store in decorators (storemetrics, authz) freely: they forward Close.
type Backend struct {
	Store      Store
	Collectors []prometheus.Collector // backend health: a2astore_lsm_*, a2astore_pool_*
}

// Open opens the configured backend.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	switch cfg.Name {
	case "", "mem":
		return &Backend{Store: memstore.New(memstore.Options{Clock: cfg.Clock, Limits: cfg.Limits, Log: cfg.Log})}, nil

	case "pebble":
		if cfg.PebbleDir == "" {
			return nil, errors.New("backend pebble needs a directory")
		}
		opts := cfg.Pebble
		opts.Clock, opts.Limits, opts.Log = cfg.Clock, cfg.Limits, cfg.Log
		s, err := pebblestore.Open(cfg.PebbleDir, opts)
		if err != nil {
			return nil, err
		}
		return &Backend{Store: s, Collectors: []prometheus.Collector{
			storemetrics.NewLSMCollector("pebble", func() storemetrics.LSMStats { return lsmStats(s.Metrics()) }),
		}}, nil

	case "pg":
		if cfg.PGDSN == "" {
			return nil, errors.New("backend pg needs a DSN")
		}
		s, err := pgstore.Open(ctx, cfg.PGDSN, pgstore.Options{Limits: cfg.Limits, Log: cfg.Log, LogNotify: cfg.LogNotify,
			Replicas: cfg.PGReplicas, Tracer: cfg.PGTracer})
		if err != nil {
			return nil, fmt.Errorf("pg: %w", err)
		}
		return &Backend{Store: s, Collectors: []prometheus.Collector{
			storemetrics.NewPoolCollector("pg", func() storemetrics.PoolStats { return poolStats(s.Pool().Stat()) }),
			storemetrics.NewReplicaCollector("pg", func() storemetrics.ReplicaStats { return replicaStats(s.ReplicaStats()) }),
		}}, nil
	}
	return nil, fmt.Errorf("unknown backend %q (want mem, pebble or pg)", cfg.Name)
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

func replicaStats(s pgstore.ReplicaStats) storemetrics.ReplicaStats {
	out := storemetrics.ReplicaStats{PrimaryReads: s.PrimaryReads, PrimaryRetries: s.PrimaryRetries, Nudges: s.Nudges, Fallbacks: s.Fallbacks,
		WaitBuckets: pgstore.WaitBuckets[:], WaitCounts: s.WaitCounts, WaitSum: s.WaitSum}
	for _, sb := range s.Standbys {
		out.Standbys = append(out.Standbys, storemetrics.StandbyStats{Name: sb.Name, Reads: sb.Reads, Healthy: sb.Healthy,
			Lag: sb.Lag, LagBytes: sb.LagBytes})
	}
	return out
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
