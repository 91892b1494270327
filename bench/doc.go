// Package bench is the a2astore benchmark lab. It holds no library code:
// everything is in its _test.go files and runs with `make bench`.
//
// BenchmarkStore is one benchmark body run against every backend — mem
// (engine/memstore), pebble (pebblestore on disk) and pg (pgstore on the
// internal/pgtest throwaway cluster) — with sub-benchmarks named key=value:
//
//	BenchmarkStore/backend=pg/op=page-depth/n=100000/page=50/depth=50/scheme=keyset
//
// so that `go tool benchstat -col /backend` pivots them. Peers run in the
// same group, on the same fixture, and add one key: impl=btree (the bare
// B-tree floor), impl=noctx (no context index), impl=a2a-inmemory (a2a-go's
// taskstore.InMemory), scheme=offset (the old PostgreSQL scheme) and
// indexes=none (PostgreSQL writes without the ordering indexes).
//
// BenchmarkTenancyAuthz (tenancy_authz_test.go, #15) measures per-owner
// pages and totals through the authz dispatcher under authz.OwnerPolicy on
// every backend that records owners, against an unscoped page and against
// the owner policy before #15 (impl=metadata-scan: the owner in task
// metadata, every list a scan), on a fixture of its own with 1,000
// Zipf-skewed owners, at the run's sizes from 1e5 up.
//
// Fixtures come from internal/taskgen with fixed seeds and are built once
// per (backend, n) on first use. Sizes are 1e3..1e5 by default; BENCH_FULL=1
// adds 1e6 and BENCH_SIZES=1000,10000 overrides both. Building with
// -tags benchslow adds work to every List the benchmarks make, for the
// regression gate's own test (cmd/benchgate).
//
// Results, charts and the regression gate are described in
// results/README.md.
package bench
