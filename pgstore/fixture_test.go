package pgstore_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/taskcodec"
	"github.com/jackc/pgx/v5"
)

var fixtureSeed = flag.Uint64("fixture.seed", 0, "seed of the generated fixture (0: time-based)")

// fixture describes a table loaded by loadFixture.
type fixture struct {
	n       int
	hot     []string        // the hot contexts
	owners  map[string]int  // tasks per owner; owner-000 is the busiest
	order   []engine.Cursor // every row in list order
	byCtx   map[string][]engine.Cursor
	created []int // created[k] = list position of the task created k-th (for the OFFSET baseline)
}

// loadFixture fills schema.a2a_tasks (created by the store) with n tasks
// through COPY, with realistic skew: 4 hot contexts hold half the tasks,
// the rest spread over n/20 contexts; 1,000 owners with Zipf-distributed
// task counts (owner-000 the busiest); timestamps come in runs of 8 equal
// values; IDs are random so they do not follow time. A "created" column
// (the creation sequence) is added for the OFFSET baseline only.
func loadFixture(tb testing.TB, dsn, schema string, n int) *fixture {
	tb.Helper()
	seed := *fixtureSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	tb.Logf("fixture: n=%d seed=%d (rerun with -fixture.seed=%d)", n, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)

	f := &fixture{n: n, hot: []string{"hot-0", "hot-1", "hot-2", "hot-3"}, byCtx: map[string][]engine.Cursor{}, owners: map[string]int{}}
	zipf := rand.NewZipf(rng, 1.1, 1, 999)
	cold := max(n/20, 1)
	states := []string{"TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "TASK_STATE_SUBMITTED", "TASK_STATE_FAILED", "TASK_STATE_INPUT_REQUIRED"}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	m0, err := taskcodec.EncodeMessage(msg("m", "a short request of some length to look like a real one"))
	if err != nil {
		tb.Fatal(err)
	}
	hist := [][]byte{m0}
	ids := [][]byte{[]byte("m")}
	type rowT struct {
		c   engine.Cursor
		ctx string
	}
	rows := make([]rowT, n)
	start := time.Now()
	_, err = conn.CopyFrom(ctx, pgx.Identifier{schema, "a2a_tasks"},
		[]string{"id", "context_id", "updated_at", "revision", "state", "status_ts", "history", "msg_ids", "owner"},
		pgx.CopyFromFunc(func() ([]any, error) {
			i := len(f.order)
			if i == n {
				return nil, nil
			}
			var c string
			if rng.IntN(2) == 0 {
				c = f.hot[rng.IntN(len(f.hot))]
			} else {
				c = fmt.Sprint("ctx-", rng.IntN(cold))
			}
			us := base + int64(i/8)*1000
			id := fmt.Sprintf("task-%016x", rng.Uint64())
			rows[i] = rowT{engine.Cursor{UpdatedAt: us, ID: a2a.TaskID(id)}, c}
			f.order = append(f.order, rows[i].c)
			t := time.UnixMicro(us)
			owner := fmt.Sprintf("owner-%03d", zipf.Uint64())
			f.owners[owner]++
			return []any{id, c, t, int64(1), states[rng.IntN(len(states))], t, hist, ids, owner}, nil
		}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("fixture: COPY of %d rows took %v", n, time.Since(start).Round(time.Millisecond))
	// Creation order = insertion order; the OFFSET baseline pages it.
	q := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{
		"ALTER TABLE " + q + ".a2a_tasks ADD COLUMN created bigserial",
		"CREATE INDEX a2a_tasks_created ON " + q + ".a2a_tasks (created)",
		"VACUUM ANALYZE " + q + ".a2a_tasks",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Logf("fixture: loaded and analyzed in %v", time.Since(start).Round(time.Millisecond))
	slices.SortFunc(f.order, func(a, b engine.Cursor) int { return a.Compare(b) })
	pos := make(map[a2a.TaskID]int, n)
	for i, c := range f.order {
		pos[c.ID] = i
	}
	f.created = make([]int, n)
	for k, r := range rows {
		f.created[k] = pos[r.c.ID]
		f.byCtx[r.ctx] = append(f.byCtx[r.ctx], r.c)
	}
	for _, cs := range f.byCtx {
		slices.SortFunc(cs, func(a, b engine.Cursor) int { return a.Compare(b) })
	}
	return f
}

// at returns the cursor at fraction depth (0..1) of list order.
func (f *fixture) at(depth float64) engine.Cursor {
	return f.order[min(int(depth*float64(f.n)), f.n-1)]
}
