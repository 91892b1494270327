package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5/pgxpool"
)

// benchSizes are the table sizes; BENCH_FULL=1 adds 1e6 (its COPY load
// takes about a minute and a half here).
func benchSizes() []int {
	if os.Getenv("BENCH_FULL") != "" {
		return []int{1e5, 1e6}
	}
	return []int{1e5}
}

// benchStore opens a store on a fresh database holding a loaded fixture of
// n tasks. The database lives until b's cleanup.
func benchStore(b *testing.B, n int) (*pgstore.Store, *pgxpool.Pool, *fixture) {
	return benchStoreConns(b, n, 0)
}

// benchStoreConns is benchStore with a pool of maxConns connections (0 =
// pgxpool's default).
func benchStoreConns(b *testing.B, n int, maxConns int32) (*pgstore.Store, *pgxpool.Pool, *fixture) {
	b.Helper()
	return benchStoreOpts(b, n, maxConns, pgstore.Options{})
}

// benchStoreOpts is benchStoreConns with the store's options.
func benchStoreOpts(b *testing.B, n int, maxConns int32, opts pgstore.Options) (*pgstore.Store, *pgxpool.Pool, *fixture) {
	b.Helper()
	return benchStoreCfg(b, n, func(cfg *pgxpool.Config) {
		if maxConns > 0 {
			cfg.MaxConns = maxConns
		}
	}, opts)
}

// benchStoreCfg is benchStoreOpts with the pool's configuration set by
// configure (after PoolConfig).
func benchStoreCfg(b *testing.B, n int, configure func(*pgxpool.Config), opts pgstore.Options) (*pgstore.Store, *pgxpool.Pool, *fixture) {
	b.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	cfg, err := pgstore.PoolConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	configure(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() }) // stops the roll-up before the pool closes
	if n == 0 {
		return s, pool, nil // no fixture
	}
	start := time.Now()
	f := loadFixture(b, dsn, "public", n)
	fmt.Fprintf(os.Stderr, "fixture n=%d loaded (COPY, indexes, VACUUM ANALYZE) in %v\n", n, time.Since(start).Round(time.Millisecond))
	return s, pool, f
}

// serverMillis runs EXPLAIN ANALYZE of sql a few times and returns the
// smallest server-side execution time, in ms: the database's own cost,
// free of client and scheduling noise on a shared machine.
func serverMillis(b *testing.B, pool *pgxpool.Pool, sql string, args []any) float64 {
	b.Helper()
	best := -1.0
	for range 5 {
		var out []byte
		if err := pool.QueryRow(context.Background(), "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
			b.Fatal(err)
		}
		var plans []struct {
			ExecutionTime float64 `json:"Execution Time"`
		}
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			b.Fatalf("explain analyze: %v", err)
		}
		if best < 0 || plans[0].ExecutionTime < best {
			best = plans[0].ExecutionTime
		}
	}
	return best
}

// BenchmarkPage: one page of 50 at several depths, by keyset (the store's
// List) and by the old scheme, a numeric offset over creation order
// (implemented here only, as the baseline).
func BenchmarkPage(b *testing.B) {
	for _, n := range benchSizes() {
		func() {
			s, pool, f := benchStore(b, n)
			ctx := context.Background()
			for _, depth := range []int{0, 10, 50, 90} {
				b.Run(fmt.Sprintf("backend=pg/op=list/n=%d/depth=%d/scheme=keyset", n, depth), func(b *testing.B) {
					req := &engine.ListRequest{PageSize: 50}
					if depth > 0 {
						req.PageToken = engine.EncodeToken(f.at(float64(depth) / 100))
					}
					var st engine.ListStats
					b.ReportAllocs()
					for b.Loop() {
						resp, err := s.List(ctx, req)
						if err != nil || len(resp.Tasks) != 50 {
							b.Fatalf("%v, %d tasks", err, len(resp.Tasks))
						}
						st.Add(resp.Stats)
					}
					b.ReportMetric(float64(st.Examined)/float64(b.N), "rows/op")
				})
				// The store's page query alone, rows read but not decoded: the
				// like-for-like comparison with the offset baseline.
				b.Run(fmt.Sprintf("backend=pg/op=list/n=%d/depth=%d/scheme=keyset_sql", n, depth), func(b *testing.B) {
					req := &engine.ListRequest{PageSize: 50}
					if depth > 0 {
						req.PageToken = engine.EncodeToken(f.at(float64(depth) / 100))
					}
					sql, args, _, _, err := s.ListSQL(req)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						rows, err := pool.Query(ctx, sql, args...)
						if err != nil {
							b.Fatal(err)
						}
						k := 0
						for rows.Next() {
							k++
						}
						if rows.Err() != nil || k != 51 {
							b.Fatalf("%v, %d rows", rows.Err(), k)
						}
					}
					b.ReportMetric(serverMillis(b, pool, sql, args), "server-ms")
				})
				b.Run(fmt.Sprintf("backend=pg/op=list/n=%d/depth=%d/scheme=offset", n, depth), func(b *testing.B) {
					offset := n * depth / 100
					sql := `SELECT id, context_id, updated_at, revision, state, status_ts, status_ns, status_msg, metadata, history
FROM a2a_tasks ORDER BY created DESC OFFSET $1 LIMIT 51`
					b.ReportAllocs()
					for b.Loop() {
						rows, err := pool.Query(ctx, sql, offset)
						if err != nil {
							b.Fatal(err)
						}
						k := 0
						for rows.Next() {
							k++
						}
						if rows.Err() != nil || k != 51 {
							b.Fatalf("%v, %d rows", rows.Err(), k)
						}
					}
					b.ReportMetric(serverMillis(b, pool, sql, []any{offset}), "server-ms")
				})
			}
		}()
	}
}

// BenchmarkReplace: unconditional Replace of random existing tasks, with
// the two ordering indexes and without them (dropped after startup; the
// store only checks them when it opens), run in parallel for throughput.
// It reports each index's size.
func BenchmarkReplace(b *testing.B) {
	const n = 100_000
	for _, indexes := range []string{"with", "without"} {
		func() {
			s, pool, f := benchStore(b, n)
			ctx := context.Background()
			sizes := map[string]int64{}
			for _, rel := range []string{"a2a_tasks", "a2a_tasks_pkey", "idx_a2a_tasks_updated", "idx_a2a_tasks_context_updated"} {
				var size int64
				if err := pool.QueryRow(ctx, "SELECT pg_relation_size($1::regclass)", rel).Scan(&size); err != nil {
					b.Fatal(err)
				}
				sizes[rel] = size
			}
			if indexes == "without" {
				if _, err := pool.Exec(ctx, "DROP INDEX idx_a2a_tasks_updated, idx_a2a_tasks_context_updated"); err != nil {
					b.Fatal(err)
				}
			}
			b.Run(fmt.Sprintf("backend=pg/op=replace/n=%d/indexes=%s", n, indexes), func(b *testing.B) {
				// WAL written and HOT updates are the server's side of the
				// index write overhead, steadier than wall time on a shared
				// machine.
				var lsn0 string
				var hot0 int64
				if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'a2a_tasks'").Scan(&lsn0, &hot0); err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(4)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
					for pb.Next() {
						c := f.order[rng.IntN(n)]
						tk := task(string(c.ID), "ctx-1", a2a.TaskStateWorking)
						tk.History = []*a2a.Message{msg("m", "a short request of some length to look like a real one")}
						if _, err := s.Replace(ctx, tk, 0); err != nil {
							b.Error(err)
							return
						}
					}
				})
				var wal float64
				if err := pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)", lsn0).Scan(&wal); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(wal/float64(b.N), "wal-bytes/op")
				// pg_stat counters are flushed by the backends lazily; read
				// what is there (a lower bound).
				var hot1 int64
				if err := pool.QueryRow(ctx, "SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'a2a_tasks'").Scan(&hot1); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(hot1-hot0)/float64(b.N), "hot-updates/op")
				if indexes == "with" {
					b.ReportMetric(float64(sizes["idx_a2a_tasks_updated"]), "idx_updated_bytes")
					b.ReportMetric(float64(sizes["idx_a2a_tasks_context_updated"]), "idx_context_bytes")
				}
				b.ReportMetric(float64(sizes["a2a_tasks_pkey"]), "pkey_bytes")
				b.ReportMetric(float64(sizes["a2a_tasks"]), "table_bytes")
			})
		}()
	}
}

// countShapes are the filter shapes of BenchmarkCount and
// BenchmarkFirstPage on a loadFixture table.
func countShapes(f *fixture) []struct {
	name string
	req  engine.ListRequest
} {
	after := time.UnixMicro(f.at(0.5).UpdatedAt)
	return []struct {
		name string
		req  engine.ListRequest
	}{
		{"none", engine.ListRequest{}},
		{"context_hot", engine.ListRequest{ContextID: f.hot[0]}},
		{"context_cold", engine.ListRequest{ContextID: "ctx-7"}},
		{"status", engine.ListRequest{Status: a2a.TaskStateWorking}},
		{"context_status", engine.ListRequest{ContextID: f.hot[0], Status: a2a.TaskStateWorking}},
		{"status_time", engine.ListRequest{StatusTimestampAfter: &after}},
		{"owner_busy", engine.ListRequest{Owner: "owner-000"}},
		{"owner_small", engine.ListRequest{Owner: "owner-500"}},
		{"owner_status", engine.ListRequest{Owner: "owner-000", Status: a2a.TaskStateWorking}},
		{"owner_context", engine.ListRequest{Owner: "owner-000", ContextID: f.hot[0]}},
		{"owner_small_context_hot", engine.ListRequest{Owner: "owner-500", ContextID: f.hot[0]}},
	}
}

// BenchmarkCount: List with IncludeTotalSize (page of 1) per filter shape;
// the count dominates. rows/op is how many rows the count inspected (0
// when it came from the counters); server-ms is the count query's own
// execution time on the server (EXPLAIN ANALYZE, best of 5). Each shape
// has a peer, impl=scan, running the count the store ran before the
// counters existed (count(*) over the matching rows) on the same table.
func BenchmarkCount(b *testing.B) {
	for _, n := range benchSizes() {
		func() {
			s, pool, f := benchStore(b, n)
			ctx := context.Background()
			for _, shape := range countShapes(f) {
				req := shape.req
				req.PageSize = 1
				req.IncludeTotalSize = true
				b.Run(fmt.Sprintf("backend=pg/op=count/n=%d/filter=%s", n, shape.name), func(b *testing.B) {
					var st engine.ListStats
					b.ReportAllocs()
					for b.Loop() {
						resp, err := s.List(ctx, &req)
						if err != nil {
							b.Fatal(err)
						}
						st.Add(resp.Stats)
					}
					b.ReportMetric(float64(st.Counted)/float64(b.N), "rows/op")
					_, _, sql, args, err := s.ListSQL(&req)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(serverMillis(b, pool, sql, args), "server-ms")
				})
				b.Run(fmt.Sprintf("backend=pg/op=count/n=%d/filter=%s/impl=scan", n, shape.name), func(b *testing.B) {
					sql, args, err := s.ScanCountSQL(&req)
					if err != nil {
						b.Fatal(err)
					}
					var total int64
					b.ReportAllocs()
					for b.Loop() {
						if err := pool.QueryRow(ctx, sql, args...).Scan(&total); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(total), "rows/op")
					b.ReportMetric(serverMillis(b, pool, sql, args), "server-ms")
				})
			}
		}()
	}
}

// BenchmarkFirstPage: the first page of 50 (whole tasks, as the wire
// asks) per filter shape, with the total (what every A2A ListTasks asks
// for) and without it. Target: with ≤ 1.5× without for every counted
// shape.
func BenchmarkFirstPage(b *testing.B) {
	for _, n := range benchSizes() {
		func() {
			s, _, f := benchStore(b, n)
			ctx := context.Background()
			for _, shape := range countShapes(f) {
				for _, total := range []bool{false, true} {
					name := map[bool]string{false: "without", true: "with"}[total]
					b.Run(fmt.Sprintf("backend=pg/op=first-page/n=%d/filter=%s/total=%s", n, shape.name, name), func(b *testing.B) {
						req := shape.req
						req.PageSize = 50
						req.IncludeTotalSize = total
						b.ReportAllocs()
						for b.Loop() {
							if _, err := s.List(ctx, &req); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		}()
	}
}

// BenchmarkCountWrites: write throughput with the counters' triggers
// with 16 base rows per (kind, name, state), chosen by task ID
// (counts=sharded: the release before issue 31's), with one row per
// (kind, name, state) (counts=hot: as installed) and without triggers
// (counts=none), from 1, 4 and 16 concurrent writers on their own
// connections. op=create creates owned tasks in random contexts (the
// created tasks are deleted afterwards, untimed), with owners drawn
// uniformly from 1,000 (owners=1000: the global rows are the only ones all
// writers share) or all of one owner (owners=1: every writer also updates
// that owner's rows, the skew a busy tenant brings); op=replace flips a
// random task's state (its context and owner rows move too). Target:
// the installed counters (hot) lose at most 20% against none at 4 writers.
func BenchmarkCountWrites(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	ws, pool, f := benchStoreConns(b, n, 20) // a connection per writer
	exec := poolExec(b, pool)
	var seq atomic.Int64
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}
	create := func(owners int) func(rng *rand.Rand) error {
		return func(rng *rand.Rand) error {
			tk := task(fmt.Sprint("bench-", seq.Add(1)), fmt.Sprint("ctx-", rng.IntN(n/20)), a2a.TaskStateSubmitted)
			_, err := ws.CreateOwned(ctx, tk, fmt.Sprintf("owner-%03d", rng.IntN(owners)))
			return err
		}
	}
	ops := map[string]func(rng *rand.Rand) error{
		"create/owners=1000": create(1000),
		"create/owners=1":    create(1),
		"replace": func(rng *rand.Rand) error {
			c := f.order[rng.IntN(n)]
			tk := task(string(c.ID), fmt.Sprint("ctx-", rng.IntN(n/20)), states[rng.IntN(2)])
			_, err := ws.Replace(ctx, tk, 0)
			return err
		},
	}
	for _, counts := range []string{"sharded", "hot", "none"} {
		switch counts {
		case "sharded", "hot":
			shards := 1
			if counts == "sharded" {
				shards = 16
			}
			for _, stmt := range pgstore.CountFunctionsSQL(shards) {
				exec(stmt)
			}
			exec(`SELECT a2a_task_counts_rebuild()`) // the base in the functions' shards
		case "none":
			for _, tg := range []string{"insert", "delete", "update", "truncate"} {
				exec("DROP TRIGGER a2a_task_counts_" + tg + " ON a2a_tasks")
			}
		}
		for _, op := range []string{"create/owners=1000", "create/owners=1", "replace"} {
			for _, writers := range []int{1, 4, 16} {
				b.Run(fmt.Sprintf("backend=pg/op=%s/n=%d/writers=%d/counts=%s", op, n, writers, counts), func(b *testing.B) {
					var next atomic.Int64
					var wg sync.WaitGroup
					errs := make(chan error, writers)
					b.ResetTimer()
					start := time.Now()
					for w := range writers {
						wg.Go(func() {
							rng := rand.New(rand.NewPCG(uint64(w), 7))
							for next.Add(1) <= int64(b.N) {
								if err := ops[op](rng); err != nil {
									errs <- err
									return
								}
							}
						})
					}
					wg.Wait()
					elapsed := time.Since(start)
					b.StopTimer()
					close(errs)
					for err := range errs {
						b.Fatal(err)
					}
					b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
					exec(`DELETE FROM a2a_tasks WHERE id LIKE 'bench-%'`)
				})
			}
		}
	}
}
