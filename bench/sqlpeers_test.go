package bench

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The SQL cursor patterns other SDKs' database stores use, beside the
// store's keyset page at the same depth (op=page-depth, pg group, #23):
//
//	scheme=or-cursor  the keyset condition written out with OR, as ORMs
//	                  emit it: updated_at < $1 OR (updated_at = $1 AND id < $2)
//	scheme=lookup     the page token is a task ID and its boundary is looked
//	                  up first (a2a-python's DatabaseTaskStore shape): one
//	                  query for the boundary row's timestamp, then the
//	                  OR-expanded page after it — two round trips a page
//
// Both read the rows as benchPGOffset does (not decoded), so the ratio
// against the store's page (which decodes into tasks) favours the peer.
func benchPGCursorPeers(b *testing.B, e *env, depth int) {
	const cols = `id, context_id, updated_at, revision, state, status_ts, status_ns, metadata`
	for _, scheme := range []string{"or-cursor", "lookup"} {
		forSizes(b, e, func(n int) string {
			return fmt.Sprintf("op=page-depth/n=%d/page=50/depth=%d/scheme=%s", n, depth, scheme)
		}, func(b *testing.B, fx *fixture) {
			ctx := context.Background()
			table := pgTable(fx.n)
			page := `SELECT ` + cols + ` FROM ` + table + `
WHERE updated_at < $1 OR (updated_at = $1 AND id COLLATE "C" < $2)
ORDER BY updated_at DESC, id COLLATE "C" DESC LIMIT 51`
			lookup := `SELECT updated_at FROM ` + table + ` WHERE id = $1`
			pos := fx.n * depth / 100
			at := fx.order[pos]
			want := min(51, fx.n-pos-1)
			var ts time.Time
			if err := e.pool.QueryRow(ctx, lookup, string(at.ID)).Scan(&ts); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				slowdown()
				if scheme == "lookup" {
					if err := e.pool.QueryRow(ctx, lookup, string(at.ID)).Scan(&ts); err != nil {
						b.Fatal(err)
					}
				}
				readRows(ctx, b, e, want, page, ts, string(at.ID))
			}
			b.ReportMetric(float64(want), "examined/page")
		})
	}
}

// readRows runs a peer's query and reads its rows without decoding them;
// it fails the benchmark unless there are want.
func readRows(ctx context.Context, b *testing.B, e *env, want int, sql string, args ...any) {
	rows, err := e.pool.Query(ctx, sql, args...)
	if err != nil {
		b.Fatal(err)
	}
	k := 0
	for rows.Next() {
		k++
	}
	if rows.Err() != nil || k != want {
		b.Fatalf("%v, %d rows, want %d", rows.Err(), k, want)
	}
}
