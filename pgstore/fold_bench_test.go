package pgstore_test

import (
	"context"
	"testing"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// foldStatsSQL sums, over the counter tables (base, ledgers, fold
// watermarks) and their indexes, the buffers read or hit and the rows
// inserted, updated and deleted, as the cumulative statistics say.
const foldStatsSQL = `SELECT coalesce(sum(coalesce(io.heap_blks_hit, 0) + coalesce(io.heap_blks_read, 0)
	+ coalesce(io.idx_blks_hit, 0) + coalesce(io.idx_blks_read, 0)), 0)::bigint,
	coalesce(sum(st.n_tup_ins + st.n_tup_upd + st.n_tup_del) FILTER (WHERE st.relname = 'a2a_task_counts'), 0)::bigint
FROM pg_statio_user_tables io JOIN pg_stat_user_tables st ON st.relid = io.relid
WHERE io.relname IN ('a2a_task_counts', 'a2a_task_count_deltas', 'a2a_task_count_moves', 'a2a_task_count_folds')`

// foldStats returns foldStatsSQL's buffers and base-row writes, after
// making this backend report what it has counted.
func foldStats(b *testing.B, conn *pgx.Conn) (buffers, baseRows int64) {
	b.Helper()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		b.Fatal(err)
	}
	if err := conn.QueryRow(ctx, foldStatsSQL).Scan(&buffers, &baseRows); err != nil {
		b.Fatal(err)
	}
	return buffers, baseRows
}

// BenchmarkFoldPerMove measures what the fold (a2a_task_counts_fold) costs
// per ledger row it takes, by counts that do not depend on the machine's
// load (issue 53: the fold must keep pace with 16 writers on 2 cores):
// buffers of the counter tables and their indexes read or hit, WAL bytes
// about them (pg_walinspect), and base rows written. Each iteration makes
// 5000 changes of state alone (a lifecycle's moves: one ledger row each) of
// tasks in 50 contexts and 200 owners, in transactions of 10 rows, then
// folds them all on one connection. Run it with -benchtime=1x for a check;
// its figures are counts, not times.
func BenchmarkFoldPerMove(b *testing.B) {
	const tasks, moves, perTx = 2000, 5000, 10
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	s := openNoRollup(b, dsn)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	conn := connect(b, dsn)
	execSQL(b, conn, `INSERT INTO a2a_tasks (id, context_id, revision, state, owner)
SELECT 'f' || i, 'ctx-' || (i % 50), 1, 'TASK_STATE_WORKING', 'owner-' || (i % 200) FROM generate_series(0, $1 - 1) i`, tasks)
	wal := newWALInspector(b, pool)
	var buffers, baseRows, walBytes, folded int64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for t := 0; t < moves; t += perTx {
			execSQL(b, conn, `UPDATE a2a_tasks SET state = CASE state WHEN 'TASK_STATE_WORKING' THEN 'TASK_STATE_COMPLETED' ELSE 'TASK_STATE_WORKING' END
WHERE id IN (SELECT 'f' || ((($1::int + g) * 7919) % $2) FROM generate_series(0, $3 - 1) g)`, i*moves+t, tasks, perTx)
		}
		buf0, rows0 := foldStats(b, conn)
		from := wal.position(b)
		b.StartTimer()
		for {
			var n int64
			if err := conn.QueryRow(ctx, `SELECT a2a_task_counts_fold()`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n <= 0 {
				break
			}
			folded += n
		}
		b.StopTimer()
		use := map[string]walUse{}
		wal.add(b, from, wal.position(b), use)
		walBytes += use["counts"].bytes
		buf1, rows1 := foldStats(b, conn)
		buffers += buf1 - buf0
		baseRows += rows1 - rows0
		b.StartTimer()
	}
	b.StopTimer()
	if folded != int64(b.N*moves) {
		b.Fatalf("folded %d ledger rows, want %d", folded, b.N*moves)
	}
	per := float64(folded)
	b.ReportMetric(float64(buffers)/per, "buf/move")
	b.ReportMetric(float64(walBytes)/per, "countWalB/move")
	b.ReportMetric(float64(baseRows)/per, "baseRows/move")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d moves folded: %d buffers, %d B of counter WAL, %d base-row writes", folded, buffers, walBytes, baseRows)
	if err := s.CheckInvariants(); err != nil {
		b.Fatal(err)
	}
}
