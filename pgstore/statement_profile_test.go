package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// stmtStat sums auto_explain's figures for one statement text.
type stmtStat struct {
	n                    int
	ms                   float64
	hit, dirtied, walRec float64
	walBytes             float64
}

// TestLifecycleStatementProfile (issue 31) profiles BenchmarkLifecycle's
// statements on the server: auto_explain (ANALYZE, BUFFERS, WAL, nested
// statements, timing off) in every pool connection, 600 lifecycles of one
// writer per impl in two rounds, n = 2e4. It prints, per impl and
// statement text (its first 70 characters), the mean duration (ms,
// executor start to end: AFTER triggers included), shared buffers hit and
// dirtied, and WAL records and bytes. With A2ASTORE_STATEMENT_PROFILE=nested
// the triggers' statements appear on lines of their own — and their
// explaining and logging, which auto_explain does inside the parent's
// duration, inflate the parents': read parents' durations from a run
// without. A measurement, not a check: run it by hand on a quiet machine.
//
//	A2ASTORE_STATEMENT_PROFILE=1 go test ./pgstore -run TestLifecycleStatementProfile -v
//	A2ASTORE_STATEMENT_PROFILE=nested go test ./pgstore -run TestLifecycleStatementProfile -v
func TestLifecycleStatementProfile(t *testing.T) {
	if os.Getenv("A2ASTORE_STATEMENT_PROFILE") == "" {
		t.Skip("a measurement: set A2ASTORE_STATEMENT_PROFILE=1")
	}
	nested := "off"
	if os.Getenv("A2ASTORE_STATEMENT_PROFILE") == "nested" {
		nested = "on"
	}
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	cfg, err := pgstore.PoolConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	stats := map[string]*stmtStat{}
	var phase atomic.Value
	phase.Store("setup")
	re := regexp.MustCompile(`(?s)^duration: ([0-9.]+) ms\s+plan:\s*(\{.*\})\s*$`)
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		m := re.FindStringSubmatch(n.Message)
		if m == nil {
			return
		}
		var p struct {
			QueryText string `json:"Query Text"`
			Plan      map[string]any
		}
		if json.Unmarshal([]byte(m[2]), &p) != nil {
			return
		}
		q := strings.Join(strings.Fields(p.QueryText), " ")
		if len(q) > 70 {
			q = q[:70]
		}
		key := phase.Load().(string) + " | " + q
		ms, _ := strconv.ParseFloat(m[1], 64)
		f := func(k string) float64 { v, _ := p.Plan[k].(float64); return v }
		mu.Lock()
		st := stats[key]
		if st == nil {
			st = &stmtStat{}
			stats[key] = st
		}
		st.n++
		st.ms += ms
		st.hit += f("Shared Hit Blocks")
		st.dirtied += f("Shared Dirtied Blocks")
		st.walRec += f("WAL Records")
		st.walBytes += f("WAL Bytes")
		mu.Unlock()
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, q := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`, `SET auto_explain.log_nested_statements = ` + nested,
			`SET auto_explain.log_analyze = on`, `SET auto_explain.log_buffers = on`, `SET auto_explain.log_wal = on`, `SET auto_explain.log_timing = off`,
			`SET auto_explain.log_format = json`, `SET auto_explain.log_level = notice`} {
			if _, err := c.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(ctx, pool, pgstore.Options{CountRollupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	loadFixture(t, dsn, "public", 20000)
	plainCopy(t, pool)
	var seq atomic.Int64
	for _, impl := range []string{"pgstore", "plain", "nocounts", "pgstore", "plain", "nocounts"} {
		trig := "ENABLE"
		if impl == "nocounts" {
			trig = "DISABLE"
		}
		if _, err := pool.Exec(ctx, `ALTER TABLE a2a_tasks `+trig+` TRIGGER USER`); err != nil {
			t.Fatal(err)
		}
		phase.Store(impl)
		runLifecycles(t, lifecycleRun{store: s, pool: pool, impl: impl, writers: 1, seq: &seq}, 300)
	}
	phase.Store("done")
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		st := stats[k]
		if st.n < 100 {
			continue
		}
		n := float64(st.n)
		fmt.Printf("%-82s n=%5d  %.3f ms  hit %.1f  dirtied %.2f  WAL %.2f records %.0f B\n", k, st.n, st.ms/n, st.hit/n, st.dirtied/n, st.walRec/n, st.walBytes/n)
	}
}
