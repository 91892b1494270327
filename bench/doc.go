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
// B-tree floors: light fields inline for a light page; the a2a tasks
// themselves, deep-copied page-wide, for a full page), impl=pair (the
// light page and its floor alternating in one loop, each timed on its
// own: store-ns/page, floor-ns/page and store/floor; on pebble the floor
// is a bare Pebble DB of the light fields, pebblefloor_test.go), impl=noctx (no
// context index), impl=a2a-inmemory (a2a-go's taskstore.InMemory),
// scheme=offset (the old PostgreSQL scheme), scheme=or-cursor and
// scheme=lookup (the cursor patterns of other SDKs' SQL stores:
// sqlpeers_test.go), indexes=none (PostgreSQL
// writes without the ordering indexes) and impl=scan (PostgreSQL totals
// counted by count(*), as before the store kept counters). op=list-wire is a ListTasks page as a server answers it:
// through the a2aserver adapter, total included, encoded to JSON.
// op=replace-notask is op=replace as the adapter makes it
// (engine.WithoutTask: no copy of the task returned).
//
// BenchmarkTenancyAuthz (tenancy_authz_test.go, #15) measures per-owner
// pages and totals through the authz dispatcher under authz.OwnerPolicy on
// every backend that records owners, against an unscoped page and against
// the owner policy before #15 (impl=metadata-scan: the owner in task
// metadata, every list a scan), on a fixture of its own with 1,000
// Zipf-skewed owners, at the run's sizes from 1e5 up.
//
// On mem, op=page also runs on a fixture of light tasks (tasks=light: a
// 36-byte ID, 16 contexts, a state and a status timestamp, #16), beside
// both floors. BenchmarkMemHeap (#16) reports memstore's live heap per task
// beside a bare-tree floor built in the same process, for light and
// realistic tasks, at the run's sizes from 1e5 up.
//
// Fixtures come from internal/taskgen with fixed seeds and are built once
// per (backend, n) on first use. Sizes are 1e3..1e5 by default; BENCH_FULL=1
// adds 1e6 and BENCH_SIZES=1000,10000 overrides both.
//
// The tenancy benchmarks (owner_test.go: op=page-owner, op=total-owner,
// op=create-owner, op=replace-owner, keyed owners=1000/owner=…) run last,
// at the sizes from 1e5 up (the largest of the run if none is that large),
// on fixtures whose tasks were created by CreateOwned for 1,000
// Zipf-skewed owners; loading one releases the group's other fixtures. A
// backend whose store is not an engine.OwnerStore skips them. Building with
// -tags benchslow adds work to every List the benchmarks make, for the
// regression gate's own test (cmd/benchgate).
//
// BenchmarkScale (scale_test.go, #55) is the cost curve from 1e3 to 1e7
// tasks that `make results-scale` (results/scale.sh) records, one backend
// and size per process: the suite's page and write bodies and its floors
// on a fixture of taskgen's mix with 1,000 owners and a 0.1 % state,
// written through the store's engine.Importer when it has one, plus
// filtered pages, totals and the footprint (bytes per task, the load's
// rate, mem's RSS, Pebble's write amplification and compaction debt).
//
// Results, charts and the regression gate are described in
// results/README.md.
package bench
