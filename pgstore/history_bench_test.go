package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// historyN is the number of tasks of BenchmarkTotalAfterHistory's
// row-by-row histories: TOTALS_N, default 1e5 (the issue's).
func historyN(b *testing.B) int {
	env := os.Getenv("TOTALS_N")
	if env == "" {
		return 100_000
	}
	v, err := strconv.ParseFloat(env, 64)
	if err != nil || v < 1 {
		b.Fatalf("TOTALS_N: bad size %q", env)
	}
	return int(v)
}

// historyChurn is how long the writers of history=flips_held_snapshot
// run before it is measured: TOTALS_CHURN, default 60s (the issue's).
func historyChurn(b *testing.B) time.Duration {
	env := os.Getenv("TOTALS_CHURN")
	if env == "" {
		return time.Minute
	}
	d, err := time.ParseDuration(env)
	if err != nil || d < 0 {
		b.Fatalf("TOTALS_CHURN: bad duration %q", env)
	}
	return d
}

// historyFilter is a shape of BenchmarkTotalAfterHistory's first pages.
type historyFilter struct {
	name string
	req  engine.ListRequest
}

// historyFilters are the shapes: unfiltered, by state, by
// context, by owner; ctx is a busy context of the history's tasks.
func historyFilters(ctx string) []historyFilter {
	return []historyFilter{
		{"none", engine.ListRequest{}},
		{"state", engine.ListRequest{Status: a2a.TaskStateWorking}},
		{"context", engine.ListRequest{ContextID: ctx}},
		{"owner", engine.ListRequest{Owner: "owner-000"}},
	}
}

// BenchmarkTotalAfterHistory: issue 53's figures (a)–(d) — the first
// page of 50 (whole tasks, as the wire asks) without and with its total,
// by filter (none, state, context, owner), after a write history:
//
//	history=creates                 (a) right after n tasks created one
//	                                by one by Store.CreateOwned from 8
//	                                goroutines, autovacuum on (the test
//	                                cluster's default), nothing waited for
//	history=flips_held_snapshot     (b) while 16 goroutines flip random
//	                                tasks' states by SQL, one row per
//	                                statement, with one REPEATABLE READ
//	                                snapshot held open since they started,
//	                                after they ran TOTALS_CHURN (60 s)
//	history=after_flips             (c) right after (b) ends (writers
//	                                stopped, the snapshot released)
//	history=after_flips_vacuum      (c) then after a VACUUM of the database
//	history=bulk_copy               (d) right after a bulk load by COPY
//	                                (the loadFixture table: a2a_tasks
//	                                vacuumed and analyzed, the counters
//	                                not), at the run's sizes (1e5,
//	                                BENCH_FULL=1 adds 1e6)
//
// (a)–(c) share one database of TOTALS_N (1e5) tasks. Each shape is
// measured as total=pair (benchTotalPair: page and page with total
// alternately, timed apart: us/op-page, us/op-total, ratio — the
// issue's target ≤ 1.25 in every case) and, independent of the
// machine's load, by the buffers each statement reads (EXPLAIN ANALYZE
// BUFFERS at the end of the run, as List runs it: page-buffers,
// count-buffers, buffer-ratio = (page + count) / page) and the ledger
// rows the total read then (pending-rows).
//
//	go test ./pgstore/ -run '^$' -bench BenchmarkTotalAfterHistory -benchtime 2s -timeout 1h
//	TOTALS_N=2e3 TOTALS_CHURN=2s go test ./pgstore/ -run '^$' -bench BenchmarkTotalAfterHistory -benchtime 1x
func BenchmarkTotalAfterHistory(b *testing.B) {
	ctx := context.Background()
	n := historyN(b)
	func() {
		s, pool, _ := benchStoreCfg(b, 0, func(cfg *pgxpool.Config) { cfg.MaxConns = 40 }, pgstore.Options{})
		ids := createOneByOne(b, s, n, 8)
		filters := historyFilters("ctx-0")
		benchHistory(b, s, pool, "creates", n, filters)

		held, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			b.Fatal(err)
		}
		defer held.Rollback(ctx)
		var k int
		if err := held.QueryRow(ctx, `SELECT count(*) FROM a2a_tasks`).Scan(&k); err != nil { // takes the snapshot
			b.Fatal(err)
		}
		stop := startFlippers(b, pool, &fixture{order: ids}, 16)
		churn := time.NewTimer(historyChurn(b)) // the writers' run before (b) is measured: the 60 s
		<-churn.C
		benchHistory(b, s, pool, "flips_held_snapshot", n, filters)
		stop()
		if err := held.Rollback(ctx); err != nil {
			b.Fatal(err)
		}
		benchHistory(b, s, pool, "after_flips", n, filters)
		poolExec(b, pool)(`VACUUM`)
		benchHistory(b, s, pool, "after_flips_vacuum", n, filters)
		if err := s.CheckInvariants(); err != nil {
			b.Fatal(err)
		}
	}()
	for _, size := range benchSizes() {
		func() {
			s, pool, f := benchStoreConns(b, size, 0)
			benchHistory(b, s, pool, "bulk_copy", size, historyFilters(f.hot[0]))
		}()
	}
}

// benchHistory runs the total=pair sub-benchmark of every filter after
// history, and reports the buffers of its statements.
func benchHistory(b *testing.B, s *pgstore.Store, pool *pgxpool.Pool, history string, n int, filters []historyFilter) {
	for _, f := range filters {
		name := fmt.Sprintf("backend=pg/op=first_page/history=%s/n=%d/filter=%s/total=pair", history, n, f.name)
		b.Run(name, func(b *testing.B) {
			benchTotalPair(b, s, pool, f.req)
			page, count, pending := listBuffers(b, s, pool, f.req)
			b.ReportMetric(float64(page), "page-buffers")
			b.ReportMetric(float64(count), "count-buffers")
			b.ReportMetric(float64(page+count)/float64(page), "buffer-ratio")
			b.ReportMetric(float64(pending), "pending-rows")
		})
	}
}

// listBuffers returns the shared buffers the page of req (with its pin,
// if any) and its total read, each as List runs it, and how many ledger
// rows the total read.
func listBuffers(b *testing.B, s *pgstore.Store, pool *pgxpool.Pool, req engine.ListRequest) (page, count int, pending int64) {
	b.Helper()
	ctx := context.Background()
	req.PageSize, req.IncludeTotalSize = 50, true
	sql, args, countSQL, countArgs, err := s.ListSQL(&req)
	if err != nil {
		b.Fatal(err)
	}
	pin, err := s.PinnedPlan(&req)
	if err != nil {
		b.Fatal(err)
	}
	if pin == "" {
		pin = "SELECT 1"
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Release()
	conn := c.Conn()
	rr := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	page, _ = analyzeBuffers(b, conn, rr, pin, sql, args)
	count, _ = analyzeBuffers(b, conn, rr, "SET LOCAL enable_seqscan = off", countSQL, countArgs)
	var total int64
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		return tx.QueryRow(ctx, countSQL, countArgs...).Scan(&total, &pending)
	})
	if err != nil {
		b.Fatal(err)
	}
	return page, count, pending
}

// createOneByOne creates n light tasks by s.CreateOwned, one per call,
// from writers goroutines — as a new user loads a store — in 1,000
// contexts (ctx-0 … ctx-999), 200 owners (owner-000 … owner-199) and
// half working, half submitted, and returns their cursors (IDs only).
func createOneByOne(b *testing.B, s *pgstore.Store, n, writers int) []engine.Cursor {
	ctx := engine.WithoutTask(context.Background())
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				st := a2a.TaskStateSubmitted
				if i%2 == 0 {
					st = a2a.TaskStateWorking
				}
				tk := task(fmt.Sprintf("h-%07d", i), fmt.Sprint("ctx-", i%1000), st)
				if _, err := s.CreateOwned(ctx, tk, fmt.Sprintf("owner-%03d", i%200)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "history: %d tasks created one by one from %d goroutines in %v\n", n, writers, time.Since(start).Round(time.Millisecond))
	ids := make([]engine.Cursor, n)
	for i := range ids {
		ids[i].ID = a2a.TaskID(fmt.Sprintf("h-%07d", i))
	}
	return ids
}
