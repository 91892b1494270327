package pushdelivery_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/pushdelivery"
)

// claimSizes are the caught-up records of BenchmarkClaimNothingDue.
var claimSizes = []int{1_000, 10_000, 100_000}

// BenchmarkClaimNothingDue (SPEC C6): one Claim when nothing is due, over
// n tasks each with one caught-up record (its last revision delivered):
// the cost a worker pays on every poll (250 ms) and after every
// delivery. Target: flat in n (≤ 1 ms on PostgreSQL).
//
//   - backend=pg: the claim statement in its READ COMMITTED transaction,
//     after the first rescan has ended (its batches come at the first
//     claims). rows/claim: the rows the claim statement's scans read
//     (EXPLAIN ANALYZE, once, outside the timing): 0 when flat.
//   - backend=mem: the Local outbox's claim (Pebble's is the same code
//     over the same memory; only its writes differ), between rescans.
//     tasks-read/claim: the store reads per claim: 0 when flat. Its
//     rescan, every 5 s, is BenchmarkLocalRescan.
func BenchmarkClaimNothingDue(b *testing.B) {
	for _, n := range claimSizes {
		b.Run(fmt.Sprintf("backend=pg/n=%d", n), func(b *testing.B) {
			e := fresh(b, "claim-bench")
			ctx := context.Background()
			now := time.Now()
			caughtUpPG(b, e, n, now)
			for l, err := e.o.Claim(ctx, now, nil); ; l, err = e.o.Claim(ctx, now, nil) {
				if err != nil || l != nil {
					b.Fatalf("claim: %v, %v; want none due", l, err)
				}
				if !e.o.Rescanning() { // the first rescan's batches read
					break
				}
			}
			claim, _, _ := e.o.Statements()
			rows := rowsRead(b, e.pool, claim, now, int64(1), now.Add(time.Minute), []string{}, []string{})
			b.ReportAllocs()
			for b.Loop() {
				if l, err := e.o.Claim(ctx, now, nil); err != nil || l != nil {
					b.Fatalf("claim: %v, %v; want none due", l, err)
				}
			}
			b.ReportMetric(rows, "rows/claim")
		})
		b.Run(fmt.Sprintf("backend=mem/n=%d", n), func(b *testing.B) {
			o, cs, now := caughtUpLocal(b, n)
			ctx := context.Background()
			if l, err := o.Claim(ctx, now, nil); err != nil || l != nil { // the first claim reads every task
				b.Fatalf("claim: %v, %v; want none due", l, err)
			}
			cs.take()
			b.ReportAllocs()
			for b.Loop() {
				if l, err := o.Claim(ctx, now, nil); err != nil || l != nil {
					b.Fatalf("claim: %v, %v; want none due", l, err)
				}
			}
			b.ReportMetric(float64(reads(cs.take()))/float64(b.N), "tasks-read/claim")
		})
	}
}

// BenchmarkLocalRescan: the Local outbox's periodic rescan (LocalOptions.
// Rescan, 5 s), a claim with nothing due at which the rescan is due,
// over n tasks with one caught-up record each. tasks-read/rescan: the
// store reads it makes: the tasks written since the previous rescan
// (none here: the tasks were written an hour before), not every task's
// revision (before: n, O(the records stored); issue #51, C6).
func BenchmarkLocalRescan(b *testing.B) {
	for _, n := range claimSizes {
		b.Run(fmt.Sprintf("backend=mem/n=%d", n), func(b *testing.B) {
			o, cs, now := caughtUpLocal(b, n)
			ctx := context.Background()
			if l, err := o.Claim(ctx, now, nil); err != nil || l != nil {
				b.Fatalf("claim: %v, %v; want none due", l, err)
			}
			cs.take()
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(5 * time.Second) // each claim starts a rescan
				if l, err := o.Claim(ctx, now, nil); err != nil || l != nil {
					b.Fatalf("claim: %v, %v; want none due", l, err)
				}
			}
			b.ReportMetric(float64(reads(cs.take()))/float64(b.N), "tasks-read/rescan")
		})
	}
}

// reads sums a countingStore's reads.
func reads(m map[a2a.TaskID]int) int {
	n := 0
	for _, k := range m {
		n += k
	}
	return n
}

// caughtUpLocal makes a memory store of n working tasks (revision 1,
// written an hour before now),
// each with one record that delivered revision 1, in a memory outbox
// over a store that counts its reads; now is the time to claim at.
func caughtUpLocal(b *testing.B, n int) (*pushdelivery.Local, *countingStore, time.Time) {
	b.Helper()
	ctx := context.Background()
	now := time.Now()
	written := now.Add(-time.Hour).UnixMicro() // the tasks' time: idle for an hour
	s := memstore.New(memstore.Options{Log: true, Clock: func() int64 { return written }})
	b.Cleanup(func() { s.Close() })
	cs := &countingStore{Store: s, gets: map[a2a.TaskID]int{}}
	o := pushdelivery.NewMemory(cs, pushdelivery.LocalOptions{Rescan: 5 * time.Second, Clock: func() time.Time { return now }})
	for i := range n {
		id := a2a.TaskID("b" + strconv.Itoa(i))
		newTask(b, s, id)
		if err := o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c", URL: "http://h.example/"},
			Dest: "http://h.example", NextAt: now, Delivered: 1}); err != nil {
			b.Fatal(err)
		}
	}
	return o, cs, now
}

// caughtUpPG inserts, by SQL in e's schema, n working tasks (revision 1)
// each with one idle record that delivered revision 1: what a commit
// that caught up stores (TestPGClaimCostCaughtUp checks it), written in
// bulk so that the fixture of 1e5 takes seconds. Then ANALYZE, as
// autovacuum would.
func caughtUpPG(b *testing.B, e *pgEnv, n int, now time.Time) {
	b.Helper()
	fillPG(b, e, stmt{`INSERT INTO %[1]s.a2a_tasks (id, context_id, revision, state)
SELECT 'b' || i, 'c', 1, 'TASK_STATE_WORKING' FROM generate_series(1, $1::int) i`, []any{n}},
		stmt{`INSERT INTO %[1]s.a2a_push_configs (task_id, id, config, dest, created_at, delivered, next_at, idle)
SELECT 'b' || i, 'c', convert_to('{"id":"c","url":"http://h.example/"}', 'UTF8'), 'http://h.example', $2, 1, $2, true
FROM generate_series(1, $1::int) i`, []any{n, now}})
}

// stmt is a statement of fillPG, %[1]s the schema.
type stmt struct {
	sql  string
	args []any
}

// fillPG runs stmts in e's schema, then ANALYZE, as autovacuum would.
func fillPG(b *testing.B, e *pgEnv, stmts ...stmt) {
	b.Helper()
	ctx := context.Background()
	for _, q := range stmts {
		if _, err := e.pool.Exec(ctx, fmt.Sprintf(q.sql, e.schema), q.args...); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(ctx, fmt.Sprintf("ANALYZE %[1]s.a2a_push_configs; ANALYZE %[1]s.a2a_tasks", e.schema)); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaimOwnerAtLimit (SPEC C6, N4): one Claim passing over the
// tasks of an owner at its limit — the worker's skip list, n tasks each
// with a due record — to take the one record of another owner, then its
// Release: what a saturated owner (push-soak's hostile one, its slow
// webhook holding its slots) adds to every claim. backend=mem: the Local
// outbox (Pebble's claim is the same code).
func BenchmarkClaimOwnerAtLimit(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("backend=pg/n=%d", n), func(b *testing.B) {
			e := fresh(b, "claim-bench")
			ctx := context.Background()
			now := time.Now()
			skip := duePG(b, e, n, now)
			want := a2a.TaskID("b" + strconv.Itoa(n))
			b.ReportAllocs()
			for b.Loop() {
				l, err := e.o.Claim(ctx, now, nil, skip...)
				if err != nil || l == nil || l.Record().TaskID != want {
					b.Fatalf("claim: %v, %v; want %s's record", l, err, want)
				}
				l.Release(ctx)
			}
		})
		b.Run(fmt.Sprintf("backend=mem/n=%d", n), func(b *testing.B) {
			ctx := context.Background()
			now := time.Now()
			s := memstore.New(memstore.Options{Log: true})
			b.Cleanup(func() { s.Close() })
			o := pushdelivery.NewMemory(s, pushdelivery.LocalOptions{Rescan: time.Hour, Clock: func() time.Time { return now }})
			skip := make([]a2a.TaskID, 0, n)
			for i := range n + 1 {
				id := a2a.TaskID("b" + strconv.Itoa(i))
				newTask(b, s, id)
				if err := o.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "c", URL: "http://h.example/"},
					Dest: "http://h.example", NextAt: now.Add(-time.Second)}); err != nil {
					b.Fatal(err)
				}
				if i < n {
					skip = append(skip, id)
				}
				o.Touch(id)
			}
			want := a2a.TaskID("b" + strconv.Itoa(n))
			b.ReportAllocs()
			for b.Loop() {
				l, err := o.Claim(ctx, now, nil, skip...)
				if err != nil || l == nil || l.Record().TaskID != want {
					b.Fatalf("claim: %v, %v; want %s's record", l, err, want)
				}
				l.Release(ctx)
			}
		})
	}
}

// duePG inserts, by SQL in e's schema, n+1 working tasks (revision 1)
// each with one record due and behind (delivered 0), tasks b0..b(n-1)
// due first, and returns those n: BenchmarkClaimOwnerAtLimit's skip list.
func duePG(b *testing.B, e *pgEnv, n int, now time.Time) []a2a.TaskID {
	b.Helper()
	fillPG(b, e, stmt{`INSERT INTO %[1]s.a2a_tasks (id, context_id, revision, state)
SELECT 'b' || i, 'c', 1, 'TASK_STATE_WORKING' FROM generate_series(0, $1::int) i`, []any{n}},
		stmt{`INSERT INTO %[1]s.a2a_push_configs (task_id, id, config, dest, created_at, delivered, next_at)
SELECT 'b' || i, 'c', convert_to('{"id":"c","url":"http://h.example/"}', 'UTF8'), 'http://h.example', $2::timestamptz,
	0, CASE WHEN i < $1::int THEN $2::timestamptz ELSE $3::timestamptz END
FROM generate_series(0, $1::int) i`, []any{n, now.Add(-2 * time.Second), now.Add(-time.Second)}})
	skip := make([]a2a.TaskID, n)
	for i := range skip {
		skip[i] = a2a.TaskID("b" + strconv.Itoa(i))
	}
	return skip
}
