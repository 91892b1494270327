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

// planFixture is a store on a fresh database loaded with the 100k-row
// fixture, and a connection to explain on.
func planFixture(t *testing.T) (*pgstore.Store, *fixture, *pgx.Conn) {
	t.Helper()
	if testing.Short() {
		t.Skip("loads 100k rows")
	}
	dsn := pgtest.DSN(t)
	s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, loadFixture(t, dsn, "public", 100_000), connect(t, dsn)
}

// C3: on 100k skewed rows the first page, a deep keyset page and a
// context-filtered keyset page are Limit over an Index Scan of the right
// ordering index, the boundary a row comparison in Index Cond, with no
// Sort, Seq Scan or bitmap scan — under both custom plans (the values) and
// generic plans (what a cached prepared statement may switch to). Planner
// settings are the defaults.
func TestPlans(t *testing.T) {
	s, f, conn := planFixture(t)

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
		{"status_deep", engine.ListRequest{Status: a2a.TaskStateWorking, PageToken: engine.EncodeToken(f.at(0.9))}, "idx_a2a_tasks_updated", true, false},
		{"status_time_deep", engine.ListRequest{StatusTimestampAfter: &statusAfter, PageToken: engine.EncodeToken(f.at(0.2))}, "idx_a2a_tasks_updated", true, false},
		// O6: owner pages seek the owner indexes: no sort, no other owner's
		// entries.
		{"owner_first", engine.ListRequest{Owner: busy}, "idx_a2a_tasks_owner_updated", false, false},
		{"owner_deep", engine.ListRequest{Owner: busy, PageToken: engine.EncodeToken(f.at(0.6))}, "idx_a2a_tasks_owner_updated", true, false},
		{"owner_status_deep", engine.ListRequest{Owner: busy, Status: a2a.TaskStateWorking, PageToken: engine.EncodeToken(f.at(0.6))}, "idx_a2a_tasks_owner_updated", true, false},
		// A small owner's few entries may come from either owner index.
		{"small_owner_deep", engine.ListRequest{Owner: small, PageToken: engine.EncodeToken(f.at(0.3))}, "idx_a2a_tasks_owner_updated|idx_a2a_tasks_owner_context_updated", true, true},
		{"owner_context_first", engine.ListRequest{Owner: busy, ContextID: hot}, "idx_a2a_tasks_owner_context_updated", false, false},
		{"owner_context_deep", engine.ListRequest{Owner: busy, ContextID: hot, PageToken: engine.EncodeToken(hotCur)}, "idx_a2a_tasks_owner_context_updated", true, false},
		{"small_owner_hot_context", engine.ListRequest{Owner: small, ContextID: hot, PageToken: engine.EncodeToken(hotCur)}, "idx_a2a_tasks_owner_context_updated", true, true},
	}
	for _, mode := range []string{"custom", "generic"} {
		for _, tc := range cases {
			t.Run("plan="+mode+"/"+tc.name, func(t *testing.T) {
				sql, args, _, _, err := s.ListSQL(&tc.req)
				if err != nil {
					t.Fatal(err)
				}
				plan := explain(t, conn, sql, args, mode == "generic")
				if plan.NodeType != "Limit" {
					t.Fatalf("top node %q, want Limit", plan.NodeType)
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
				if tc.req.Owner != "" && !strings.Contains(scan.IndexCond, "owner >=") {
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
func TestCountPlans(t *testing.T) {
	s, f, conn := planFixture(t)
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
