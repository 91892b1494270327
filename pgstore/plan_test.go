package pgstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/jackc/pgx/v5"
)

// planNode is the part of EXPLAIN (FORMAT JSON) the checks read.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	PlanRows  float64    `json:"Plan Rows"`
	Filter    string     `json:"Filter"`
	Plans     []planNode `json:"Plans"`
}

func (p *planNode) walk(f func(*planNode)) {
	f(p)
	for i := range p.Plans {
		p.Plans[i].walk(f)
	}
}

// explain returns the plan of sql with args: the custom plan for these
// values, or with generic set the generic plan a prepared statement may
// switch to after five executions (forced with plan_cache_mode).
func explain(t *testing.T, conn *pgx.Conn, sql string, args []any, generic bool) planNode {
	t.Helper()
	ctx := context.Background()
	var out []byte
	if !generic {
		if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
			t.Fatalf("explain: %v\n%s", err, sql)
		}
	} else {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(ctx, "RESET plan_cache_mode; DEALLOCATE page")
		if _, err := conn.Exec(ctx, "PREPARE page AS "+sql); err != nil {
			t.Fatalf("prepare: %v\n%s", err, sql)
		}
		// A generic plan does not look at the values, and EXECUTE takes no
		// bind parameters: pass NULLs.
		execute := "EXECUTE page"
		if len(args) > 0 {
			execute += "(" + strings.TrimSuffix(strings.Repeat("NULL, ", len(args)), ", ") + ")"
		}
		if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+execute).Scan(&out); err != nil {
			t.Fatalf("explain execute: %v\n%s", err, sql)
		}
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("explain output: %v: %s", err, out)
	}
	return plans[0].Plan
}

// explainPage returns the plan of the page query of req, in a
// transaction that first runs what the store runs before it (PinnedPlan).
func explainPage(t *testing.T, s *pgstore.Store, conn *pgx.Conn, req engine.ListRequest, generic bool) planNode {
	t.Helper()
	ctx := context.Background()
	sql, args, pin := pageSQL(t, s, req)
	if pin != "" {
		if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(ctx, "ROLLBACK")
		if _, err := conn.Exec(ctx, pin); err != nil {
			t.Fatal(err)
		}
	}
	return explain(t, conn, sql, args, generic)
}

// planFixture is a store on a fresh database loaded with the 100k-row
// fixture, and a connection to explain on.
func planFixture(t *testing.T) (*pgstore.Store, *fixture, *pgx.Conn) {
	t.Helper()
	dsn := pgtest.DSN(t)
	s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, loadFixture(t, dsn, "public", 100_000), connect(t, dsn)
}

// TestPlans checks the plans of the statements the store runs on one
// 100k-row fixture, loaded once (it takes tens of seconds on a loaded
// machine): pages (C3), totals (C4, C5) and retention's batches (R1).
func TestPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100k rows")
	}
	s, f, conn := planFixture(t)
	for _, c := range []struct {
		name  string
		check func(*testing.T, *pgstore.Store, *fixture, *pgx.Conn)
	}{{"pages", pagePlans}, {"counts", countPlans}, {"retain", retainPlans}} {
		t.Run(c.name, func(t *testing.T) { c.check(t, s, f, conn) })
	}
}

// C3: on 100k skewed rows the first page, a deep keyset page and a
// context-filtered keyset page are Limit over an Index Scan of the right
// ordering index, the boundary a row comparison in Index Cond, with no
// Sort, Seq Scan or bitmap scan — under both custom plans (the values) and
// generic plans (what a cached prepared statement may switch to). Planner
// settings are the defaults.
func pagePlans(t *testing.T, s *pgstore.Store, f *fixture, conn *pgx.Conn) {

	hot := f.hot[0]
	hotCur := f.byCtx[hot][len(f.byCtx[hot])*3/4]
	// owner-000 holds about 13% of the tasks; owner-500 a few dozen.
	busy, small := "owner-000", "owner-500"
	statusAfter := time.UnixMicro(f.at(0.5).UpdatedAt)
	cases := []struct {
		name   string
		req    engine.ListRequest
		index  string
		keyset bool
		// smallSort allows a bitmap scan of the index plus a Sort when the
		// planner expects fewer rows than a page (a cold context): then
		// fetching them all and sorting is its cheaper plan.
		smallSort bool
	}{
		{"first", engine.ListRequest{}, "idx_a2a_tasks_updated", false, false},
		{"deep", engine.ListRequest{PageToken: engine.EncodeToken(f.at(0.9))}, "idx_a2a_tasks_updated", true, false},
		{"middle_light", engine.ListRequest{PageToken: engine.EncodeToken(f.at(0.5)), Projection: engine.ProjectionLight, PageSize: 100}, "idx_a2a_tasks_updated", true, false},
		{"context_first", engine.ListRequest{ContextID: hot}, "idx_a2a_tasks_context_updated", false, false},
		{"context_deep", engine.ListRequest{ContextID: hot, PageToken: engine.EncodeToken(hotCur)}, "idx_a2a_tasks_context_updated", true, false},
		{"cold_context_deep", engine.ListRequest{ContextID: "ctx-7", PageToken: engine.EncodeToken(f.at(0.3))}, "idx_a2a_tasks_context_updated", true, true},
		{"context_status_deep", engine.ListRequest{ContextID: hot, Status: a2a.TaskStateCompleted, PageToken: engine.EncodeToken(hotCur)}, "idx_a2a_tasks_context_updated", true, false},
		{"status_deep", engine.ListRequest{Status: a2a.TaskStateWorking, PageToken: engine.EncodeToken(f.at(0.9))}, "idx_a2a_tasks_state_updated", true, false},
		{"status_time_deep", engine.ListRequest{StatusTimestampAfter: &statusAfter, PageToken: engine.EncodeToken(f.at(0.2))}, "idx_a2a_tasks_updated", true, false},
		// O6: owner pages seek the owner indexes: no sort, no other owner's
		// entries.
		{"owner_first", engine.ListRequest{Owner: busy}, "idx_a2a_tasks_owner_updated", false, false},
		{"owner_deep", engine.ListRequest{Owner: busy, PageToken: engine.EncodeToken(f.at(0.6))}, "idx_a2a_tasks_owner_updated", true, false},
		{"owner_status_deep", engine.ListRequest{Owner: busy, Status: a2a.TaskStateWorking, PageToken: engine.EncodeToken(f.at(0.6))}, "idx_a2a_tasks_owner_state_updated", true, false},
		// A small owner's few entries may come from either owner index.
		{"small_owner_deep", engine.ListRequest{Owner: small, PageToken: engine.EncodeToken(f.at(0.3))}, "idx_a2a_tasks_owner_updated|idx_a2a_tasks_owner_context_updated", true, true},
		{"owner_context_first", engine.ListRequest{Owner: busy, ContextID: hot}, "idx_a2a_tasks_owner_context_updated", false, false},
		{"owner_context_deep", engine.ListRequest{Owner: busy, ContextID: hot, PageToken: engine.EncodeToken(hotCur)}, "idx_a2a_tasks_owner_context_updated", true, false},
		{"small_owner_hot_context", engine.ListRequest{Owner: small, ContextID: hot, PageToken: engine.EncodeToken(hotCur)}, "idx_a2a_tasks_owner_context_updated", true, true},
	}
	for _, mode := range []string{"custom", "generic"} {
		for _, tc := range cases {
			t.Run("plan="+mode+"/"+tc.name, func(t *testing.T) {
				plan := explainPage(t, s, conn, tc.req, mode == "generic")
				if plan.NodeType != "Limit" {
					t.Fatalf("top node %q, want Limit", plan.NodeType)
				}
				if tc.req.Status != "" && tc.req.ContextID == "" && !strings.Contains(plan.Plans[0].IndexCond, "state >=") {
					t.Errorf("Index Cond %q lacks the state", plan.Plans[0].IndexCond)
				}
				var scan *planNode
				sorted := false
				plan.walk(func(p *planNode) {
					switch {
					case p.NodeType == "Index Scan", p.NodeType == "Bitmap Index Scan" && tc.smallSort:
						scan = p
					case p.NodeType == "Bitmap Heap Scan" && tc.smallSort:
					case p.NodeType == "Sort" && tc.smallSort:
						sorted = true
						if p.PlanRows > float64(engine.DefaultPageSize+1) {
							t.Errorf("sorts an estimated %v rows", p.PlanRows)
						}
					case p.NodeType == "Sort", p.NodeType == "Incremental Sort",
						strings.Contains(p.NodeType, "Seq Scan"), strings.Contains(p.NodeType, "Bitmap"):
						t.Errorf("plan has a %s node", p.NodeType)
					}
				})
				if sorted {
					t.Logf("planner sorts the few rows of a cold context")
				}
				if scan == nil {
					t.Fatalf("no Index Scan in plan %+v", plan)
				}
				if !slices.Contains(strings.Split(tc.index, "|"), scan.IndexName) {
					t.Errorf("index %q, want %q", scan.IndexName, tc.index)
				}
				hasRow := strings.Contains(scan.IndexCond, "ROW(updated_at, (id)::text) < ROW(")
				if hasRow != tc.keyset {
					t.Errorf("Index Cond %q: row comparison present=%v, want %v", scan.IndexCond, hasRow, tc.keyset)
				}
				if tc.req.ContextID != "" && !strings.Contains(scan.IndexCond, "context_id >=") {
					t.Errorf("Index Cond %q lacks the context", scan.IndexCond)
				}
				if tc.req.Owner != "" && !strings.Contains(scan.IndexCond, "(owner ") {
					t.Errorf("Index Cond %q lacks the owner", scan.IndexCond)
				}
				if strings.Contains(scan.Filter, "updated_at") {
					t.Errorf("boundary left in Filter %q", scan.Filter)
				}
				t.Logf("%s using %s; Index Cond: %s; Filter: %s", scan.NodeType, scan.IndexName, scan.IndexCond, scan.Filter)
			})
		}
	}
}

// L5, C4, O6, C5: a total of a counted shape (every shape without a status
// time filter) reads only the counter tables, each by an index (as the
// store reads them, with enable_seqscan off); a total with a status-time
// filter may scan a2a_tasks (C4). Under custom and generic plans, on the
// 100k-row fixture.
func countPlans(t *testing.T, s *pgstore.Store, f *fixture, conn *pgx.Conn) {
	hot := f.hot[0]
	statusAfter := time.UnixMicro(f.at(0.5).UpdatedAt)
	cases := []struct {
		name  string
		req   engine.ListRequest
		index string // "" = the counter table only, "*" = may scan
	}{
		{"none", engine.ListRequest{}, ""},
		{"state", engine.ListRequest{Status: a2a.TaskStateWorking}, ""},
		{"context", engine.ListRequest{ContextID: hot}, ""},
		{"context_state", engine.ListRequest{ContextID: hot, Status: a2a.TaskStateWorking}, ""},
		{"owner", engine.ListRequest{Owner: "owner-000"}, ""},
		{"owner_state", engine.ListRequest{Owner: "owner-000", Status: a2a.TaskStateWorking}, ""},
		{"owner_context", engine.ListRequest{Owner: "owner-000", ContextID: hot}, ""},
		{"small_owner_hot_context", engine.ListRequest{Owner: "owner-500", ContextID: hot}, ""},
		{"owner_context_state", engine.ListRequest{Owner: "owner-000", ContextID: hot, Status: a2a.TaskStateWorking}, ""},
		{"status_time", engine.ListRequest{StatusTimestampAfter: &statusAfter}, "*"},
	}
	for _, mode := range []string{"custom", "generic"} {
		for _, tc := range cases {
			t.Run("plan="+mode+"/"+tc.name, func(t *testing.T) {
				req := tc.req
				req.IncludeTotalSize = true
				_, _, sql, args, err := s.ListSQL(&req)
				if err != nil {
					t.Fatal(err)
				}
				if tc.index == "" {
					execSQL(t, conn, "SET enable_seqscan = off") // List's noSeqScanSQL, for the session
					defer execSQL(t, conn, "RESET enable_seqscan")
					if pin, err := s.PinnedPlan(&req); err != nil || pin != "" {
						// The count follows a filtered page and its pin
						// (pinPlanSQL), in List's transaction.
						execSQL(t, conn, "SET enable_sort = off; SET enable_incremental_sort = off; SET enable_bitmapscan = off")
						defer execSQL(t, conn, "RESET enable_sort; RESET enable_incremental_sort; RESET enable_bitmapscan")
					}
				}
				plan := explain(t, conn, sql, args, mode == "generic")
				var relations, indexes []string
				plan.walk(func(p *planNode) {
					if p.Relation != "" {
						relations = append(relations, p.Relation)
					}
					if p.IndexName != "" {
						indexes = append(indexes, p.IndexName)
					}
				})
				switch tc.index {
				case "":
					// Only a total by state reads the moves ledger.
					want := []string{"a2a_task_count_deltas", "a2a_task_count_folds", "a2a_task_counts"}
					if req.Status != a2a.TaskStateUnspecified {
						want = []string{"a2a_task_count_deltas", "a2a_task_count_folds", "a2a_task_count_moves", "a2a_task_counts"}
					}
					// Issue 53: the ledgers are read by their xact index,
					// never by a sequential scan (which would read every
					// dead row of a churning table).
					plan.walk(func(p *planNode) {
						if strings.HasPrefix(p.Relation, "a2a_task_count") && p.NodeType == "Seq Scan" {
							t.Errorf("count reads %s by %s", p.Relation, p.NodeType)
						}
					})
					slices.Sort(relations)
					if relations = slices.Compact(relations); !slices.Equal(relations, want) {
						t.Errorf("count reads %v, want %v", relations, want)
					}
				case "*":
				}
				t.Logf("reads %v via %v", relations, indexes)
			})
		}
	}
}

// C7: pages filtered by status — alone, with an owner, with a context,
// with both — first and deep, are Limit over an Index Scan of the index
// that leads with their filters (state; owner, state; context; owner,
// context), no Sort, no Seq Scan, no bitmap scan, whatever the planner's
// statistics: on a table loaded and never analyzed, analyzed, bulk-deleted
// since its ANALYZE, and whose rare state became common since (stale),
// under custom and generic plans. The table: 50,000 tasks of 20 owners in
// 50 contexts, the oldest 0.1 % waiting for input, the rest working or
// completed; autovacuum off, so the statistics are those each step makes.
func TestStatusPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 50k rows")
	}
	const n = 50_000
	s, dsn := open(t)
	conn := connect(t, dsn)
	execSQL(t, conn, `ALTER TABLE a2a_tasks SET (autovacuum_enabled = false)`)
	load := func() {
		execSQL(t, conn, `TRUNCATE a2a_tasks`)
		execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, updated_at, revision, state, status_ts, owner)
SELECT 'task-' || lpad(i::text, 8, '0'), 'ctx-' || (i % 50), t, 1,
       CASE WHEN i <= $1 / 1000 THEN 'TASK_STATE_INPUT_REQUIRED' WHEN i % 3 = 0 THEN 'TASK_STATE_COMPLETED' ELSE 'TASK_STATE_WORKING' END,
       t, 'owner-' || (i % 20)
FROM generate_series(1, $1::int) i, LATERAL (SELECT timestamptz '2025-01-01 00:00:00+00' + i * interval '1 ms') x(t)`, n)
	}
	deep := engine.EncodeToken(engine.Cursor{UpdatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(n / 2 * time.Millisecond).UnixMicro(), ID: "task-00025000"})
	rare, common := a2a.TaskStateInputRequired, a2a.TaskStateWorking
	type shape struct {
		name  string
		req   engine.ListRequest
		index string
	}
	// The unfiltered page, which runs unpinned, for comparison.
	shapes := []shape{{"none", engine.ListRequest{}, "idx_a2a_tasks_updated"}, {"none_deep", engine.ListRequest{PageToken: deep}, "idx_a2a_tasks_updated"}}
	for _, st := range []a2a.TaskState{rare, common} {
		for _, tok := range []string{"", deep} {
			name := strings.ToLower(strings.TrimPrefix(string(st), "TASK_STATE_"))
			if tok != "" {
				name += "_deep"
			}
			shapes = append(shapes,
				shape{"status_" + name, engine.ListRequest{Status: st, PageToken: tok}, "idx_a2a_tasks_state_updated"},
				shape{"owner_status_" + name, engine.ListRequest{Owner: "owner-7", Status: st, PageToken: tok}, "idx_a2a_tasks_owner_state_updated"},
				shape{"context_status_" + name, engine.ListRequest{ContextID: "ctx-7", Status: st, PageToken: tok}, "idx_a2a_tasks_context_updated"},
				shape{"owner_context_status_" + name, engine.ListRequest{Owner: "owner-7", ContextID: "ctx-7", Status: st, PageToken: tok}, "idx_a2a_tasks_owner_context_updated"},
				shape{"light_status_" + name, engine.ListRequest{Status: st, PageToken: tok, Projection: engine.ProjectionLight, PageSize: 100}, "idx_a2a_tasks_state_updated"},
			)
		}
	}
	states := []struct {
		name    string
		prepare func()
	}{
		{"fresh", load},
		{"analyzed", func() { execSQL(t, conn, `ANALYZE a2a_tasks`) }},
		// 90 % of the rows go after the ANALYZE: the statistics count them.
		{"bulk_deleted", func() { execSQL(t, conn, `DELETE FROM a2a_tasks WHERE id NOT LIKE '%0'`) }},
		// Analyzed with the rare state rare, then the newest 30 % move into
		// it: the statistics say a page of it is hard to fill.
		{"stale", func() {
			load()
			execSQL(t, conn, `ANALYZE a2a_tasks`)
			execSQL(t, conn, `UPDATE a2a_tasks SET state = 'TASK_STATE_INPUT_REQUIRED' WHERE id > 'task-' || lpad(($1 * 7 / 10)::text, 8, '0')`, n)
		}},
		// Analyzed with the common state common, then nearly all of it
		// moved out.
		{"stale_common", func() {
			load()
			execSQL(t, conn, `ANALYZE a2a_tasks`)
			execSQL(t, conn, `UPDATE a2a_tasks SET state = 'TASK_STATE_COMPLETED' WHERE state = 'TASK_STATE_WORKING' AND id NOT LIKE '%00'`)
		}},
	}
	for _, st := range states {
		st.prepare()
		for _, mode := range []string{"custom", "generic"} {
			for _, sh := range shapes {
				t.Run("stats="+st.name+"/plan="+mode+"/"+sh.name, func(t *testing.T) {
					checkIndexPlan(t, explainPage(t, s, conn, sh.req, mode == "generic"), sh.req, sh.index)
				})
			}
		}
	}
}

// checkIndexPlan checks that plan is Limit over an Index Scan of index
// with the request's filters and boundary in its Index Cond, and no Sort,
// Seq Scan or bitmap scan (C3, C7).
func checkIndexPlan(t *testing.T, plan planNode, req engine.ListRequest, index string) {
	t.Helper()
	if plan.NodeType != "Limit" {
		t.Fatalf("top node %q, want Limit", plan.NodeType)
	}
	var scan *planNode
	plan.walk(func(p *planNode) {
		switch {
		case p.NodeType == "Index Scan":
			scan = p
		case p.NodeType == "Sort", p.NodeType == "Incremental Sort", strings.Contains(p.NodeType, "Seq Scan"), strings.Contains(p.NodeType, "Bitmap"):
			t.Errorf("plan has a %s node", p.NodeType)
		}
	})
	if scan == nil {
		t.Fatalf("no Index Scan in plan %+v", plan)
	}
	if scan.IndexName != index {
		t.Errorf("index %q, want %q", scan.IndexName, index)
	}
	for _, c := range []struct {
		on   bool
		cond string
	}{
		{req.PageToken != "", "ROW(updated_at, (id)::text) < ROW("},
		{req.Owner != "", "(owner "},
		{req.ContextID != "", "context_id >="},
		{req.Status != "" && req.ContextID == "", "state >="},
	} {
		if c.on && !strings.Contains(scan.IndexCond, c.cond) {
			t.Errorf("Index Cond %q lacks %q", scan.IndexCond, c.cond)
		}
	}
	if strings.Contains(scan.Filter, "updated_at") {
		t.Errorf("boundary left in Filter %q", scan.Filter)
	}
	if t.Failed() {
		t.Logf("plan: %+v", plan)
	}
}

// C7: a filtered page ends where its range ends. A page of one owner's
// tasks in a state (or in a context) that holds fewer than PageSize+1 of
// them reads those entries and stops; it does not walk the owner's
// entries of the states (contexts) sorted after it. With both leading
// columns as ranges, PostgreSQL's B-tree treats only the first column's
// bounds as ending the scan, and such a page read every later entry of the
// owner: here owner-3's 6,667 working entries after its 10
// input-required ones, 70-odd buffers for a page of 10. A page may read a
// heap page per row it returns, and a few index pages.
func TestFilteredPageEndsWithItsRange(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 40k rows")
	}
	ctx := context.Background()
	s, dsn := open(t)
	conn := connect(t, dsn)
	// 4 owners, 50 contexts; the 40 oldest tasks input-required, then
	// working (ordered after input-required) or completed (before it).
	execSQL(t, conn, `INSERT INTO a2a_tasks (id, context_id, updated_at, revision, state, status_ts, owner)
SELECT 'task-' || lpad(i::text, 8, '0'), 'ctx-' || lpad((i % 50)::text, 2, '0'), t, 1,
       CASE WHEN i <= 40 THEN 'TASK_STATE_INPUT_REQUIRED' WHEN i % 3 = 0 THEN 'TASK_STATE_COMPLETED' ELSE 'TASK_STATE_WORKING' END,
       t, 'owner-' || (i % 4)
FROM generate_series(1, 40000) i, LATERAL (SELECT timestamptz '2025-01-01 00:00:00+00' + i * interval '1 ms') x(t)`)
	execSQL(t, conn, `VACUUM ANALYZE a2a_tasks`)
	for _, req := range []engine.ListRequest{
		{Owner: "owner-3", Status: a2a.TaskStateInputRequired},
		// ctx-03 holds owner-3's tasks 3, 103, …: 400 of them, and
		// owner-3's entries in ctx-04…ctx-49 follow in the index.
		{Owner: "owner-3", ContextID: "ctx-03"},
		// (With a state as well the page filters the owner's entries in
		// the context by state: it may read all of them, C7.)
	} {
		// Page to the last page of the filter: it has fewer than
		// PageSize+1 entries, so nothing but the range's end stops it.
		req.PageSize = 50
		for {
			resp, err := s.List(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.NextPageToken == "" {
				break
			}
			req.PageToken = resp.NextPageToken
		}
		if buffers, rows := pageBuffers(t, s, conn, req); buffers > rows+8 {
			t.Errorf("%+v: the last page read %d buffers for %d rows", req, buffers, rows)
		}
	}
}

// pageSQL returns the page query of req, its arguments and what the
// store runs before it in the page's transaction (PinnedPlan; "" when the
// page runs alone).
func pageSQL(t testing.TB, s *pgstore.Store, req engine.ListRequest) (sql string, args []any, pin string) {
	t.Helper()
	sql, args, _, _, err := s.ListSQL(&req)
	if err != nil {
		t.Fatal(err)
	}
	if pin, err = s.PinnedPlan(&req); err != nil {
		t.Fatal(err)
	}
	return sql, args, pin
}

// pageBuffers is the number of shared buffers (hit and read) the page
// query of req reads and the rows it returns, as EXPLAIN (ANALYZE,
// BUFFERS) reports them, run as List runs it (after PinnedPlan, in a
// transaction).
func pageBuffers(t *testing.T, s *pgstore.Store, conn *pgx.Conn, req engine.ListRequest) (buffers, rows int) {
	t.Helper()
	sql, args, pin := pageSQL(t, s, req)
	return analyzeBuffers(t, conn, pgx.TxOptions{AccessMode: pgx.ReadOnly}, pin, sql, args)
}

// analyzeBuffers runs sql under EXPLAIN (ANALYZE, BUFFERS) in a
// transaction of opts, after setup unless it is "", and returns the
// shared buffers (hit and read) it read and the rows it returned.
func analyzeBuffers(t testing.TB, conn *pgx.Conn, opts pgx.TxOptions, setup, sql string, args []any) (buffers, rows int) {
	t.Helper()
	ctx := context.Background()
	var out []byte
	err := pgx.BeginTxFunc(ctx, conn, opts, func(tx pgx.Tx) error {
		if setup != "" {
			if _, err := tx.Exec(ctx, setup); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, FORMAT JSON) "+sql, args...).Scan(&out)
	})
	if err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
			Rows int `json:"Actual Rows"`
		}
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("explain output: %v: %s", err, out)
	}
	p := plans[0].Plan
	return p.Hit + p.Read, p.Rows
}
