package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The load-independent costs of BenchmarkLifecycle: what a lifecycle
// sends (statements and round trips, counted by a pgx tracer on the
// benchmark's pool) and what the database writes for it (WAL bytes, and
// with pg_walinspect, the WAL by the relation it is about).

// stmtCounter counts the statements a pool's connections send and the
// round trips they take: a query is one of each, a batch one round trip
// of its queries. It is the pool's pgx tracer (a pgx.QueryTracer and
// pgx.BatchTracer).
type stmtCounter struct {
	statements, roundTrips atomic.Int64
}

func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.statements.Add(1)
	c.roundTrips.Add(1)
	return ctx
}

func (c *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	return ctx
}

func (c *stmtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.statements.Add(1)
}

func (c *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// counts returns the statements and round trips so far.
func (c *stmtCounter) counts() (statements, roundTrips int64) {
	return c.statements.Load(), c.roundTrips.Load()
}

// walUse is WAL written about one kind of relation: records and bytes.
type walUse struct{ records, bytes int64 }

// walCategories are the kinds of relation a lifecycle's WAL is about:
// the task tables (a2a_tasks and the plain copy, with their indexes and
// TOAST), the task logs, the counters (base, ledgers, fold watermarks)
// and everything else (commit records, catalogs, other relations).
var walCategories = []string{"tasks", "log", "counts", "other"}

func walCategory(rel string) string {
	switch rel {
	case "a2a_tasks", "a2a_tasks_plain":
		return "tasks"
	case "a2a_task_log", "a2a_task_log_plain":
		return "log"
	case "a2a_task_counts", "a2a_task_count_deltas", "a2a_task_count_moves", "a2a_task_count_folds":
		return "counts"
	}
	return "other"
}

// walInspector reads which relations WAL was written about, by
// pg_walinspect (PostgreSQL 15). On a server without it, ok is false
// and the breakdown is not reported.
type walInspector struct {
	pool *pgxpool.Pool
	ok   bool
}

func newWALInspector(b *testing.B, pool *pgxpool.Pool) *walInspector {
	_, err := pool.Exec(context.Background(), `CREATE EXTENSION IF NOT EXISTS pg_walinspect`)
	if err != nil {
		b.Logf("no WAL breakdown by relation (pg_walinspect: %v)", err)
	}
	return &walInspector{pool: pool, ok: err == nil}
}

// position returns the WAL insert position, as text, and makes sure
// every record before it is flushed (pg_walinspect reads only flushed
// WAL, and the test clusters commit asynchronously): after reading it, a
// transaction that wrote a record (a logical decoding message, which
// also gives it an ID) commits synchronously.
func (w *walInspector) position(b *testing.B) string {
	b.Helper()
	var lsn string
	err := pgx.BeginFunc(context.Background(), w.pool, func(tx pgx.Tx) error {
		ctx := context.Background()
		if err := tx.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT set_config('synchronous_commit', 'on', true), pg_logical_emit_message(true, 'a2astore-bench', 'flush')`)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return lsn
}

// walBreakdownSQL groups the WAL records between $1 and $2 by the table
// their first block belongs to (an index's or TOAST relation's table),
// and says which are heap inserts into the table itself.
const walBreakdownSQL = `WITH base AS (
  SELECT c.relfilenode AS node, coalesce(i.indrelid, c.oid) AS tbl, i.indexrelid IS NOT NULL AS idx
  FROM pg_class c LEFT JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relfilenode <> 0),
rels AS (
  SELECT b.node, coalesce(m.relname, t.relname)::text AS rel, b.idx OR m.oid IS NOT NULL AS aux
  FROM base b JOIN pg_class t ON t.oid = b.tbl LEFT JOIN pg_class m ON m.reltoastrelid = b.tbl),
w AS (
  SELECT record_length, resource_manager = 'Heap' AND record_type LIKE 'INSERT%' AS heap_insert,
         regexp_match(coalesce(block_ref, ''), 'rel \d+/(\d+)/(\d+)') AS m
  FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn))
SELECT coalesce(r.rel, ''), coalesce(r.aux, false), w.heap_insert, count(*), sum(w.record_length)::bigint
FROM w LEFT JOIN rels r ON r.node = w.m[2]::oid
  AND w.m[1]::oid = (SELECT oid FROM pg_database WHERE datname = current_database())
GROUP BY 1, 2, 3`

// add adds the WAL between from and to (positions) to use, by category,
// and returns the rows appended to the count ledgers meanwhile (heap
// inserts into a2a_task_count_deltas and a2a_task_count_moves).
func (w *walInspector) add(b *testing.B, from, to string, use map[string]walUse) (ledgerRows int64) {
	b.Helper()
	if !w.ok {
		return 0
	}
	rows, err := w.pool.Query(context.Background(), walBreakdownSQL, from, to)
	if err != nil {
		b.Fatal(err)
	}
	var rel string
	var aux, insert bool
	var records, bytes int64
	_, err = pgx.ForEachRow(rows, []any{&rel, &aux, &insert, &records, &bytes}, func() error {
		c := walCategory(rel)
		u := use[c]
		u.records += records
		u.bytes += bytes
		use[c] = u
		if (rel == "a2a_task_count_deltas" || rel == "a2a_task_count_moves") && !aux && insert {
			ledgerRows += records
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ledgerRows
}

// describe formats use per lifecycle (lifecycles of them), by category.
func describeWAL(use map[string]walUse, lifecycles int) string {
	var parts []string
	for _, c := range walCategories {
		u := use[c]
		parts = append(parts, fmt.Sprintf("%s %.0f B in %.1f records", c, float64(u.bytes)/float64(lifecycles), float64(u.records)/float64(lifecycles)))
	}
	return strings.Join(parts, ", ")
}
