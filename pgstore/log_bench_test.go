package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
)

// BenchmarkLogCost: what the task log (K7) adds to a task's lifecycle (a
// create and three conditional replaces, each with its event, as a2a-go
// writes them through the adapter), side by side in one run: log=off,
// log=on (one more row per revision, in the same statement), and
// log=notify (also a NOTIFY per revision, as cluster mode does). Metrics:
// µs per lifecycle (wall, one writer) and WAL bytes per lifecycle
// (pg_current_wal_lsn before and after, whole database: the benchmark is
// its only writer).
//
//	go test ./pgstore/ -run '^$' -bench BenchmarkLogCost -benchtime 2000x -count 3
func BenchmarkLogCost(b *testing.B) {
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	for _, mode := range []string{"off", "on", "notify"} {
		b.Run("log="+mode, func(b *testing.B) {
			opts := pgstore.Options{Schema: pgtest.Schema(b, dsn), Log: mode != "off"}
			if mode == "notify" {
				opts.LogNotify = "bench_log"
			}
			s, err := pgstore.Open(ctx, dsn, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var wal0, wal1 int64
			walNow := func() int64 {
				var n int64
				if err := s.Pool().QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&n); err != nil {
					b.Fatal(err)
				}
				return n
			}
			i := 0
			wal0 = walNow()
			start := time.Now()
			for b.Loop() {
				i++
				lifecycleWithEvents(ctx, b, s, fmt.Sprintf("lc-%d", i))
			}
			elapsed := time.Since(start)
			wal1 = walNow()
			b.ReportMetric(float64(elapsed.Microseconds())/float64(i), "us/lifecycle")
			b.ReportMetric(float64(wal1-wal0)/float64(i), "WAL-B/lifecycle")
		})
	}
}

// lifecycleWithEvents writes one lifecycle, each replace with the event a2a-go
// passes (engine.WithEvent).
func lifecycleWithEvents(ctx context.Context, b *testing.B, s *pgstore.Store, id string) {
	versions := lifecycleVersions(id, "ctx")
	rec, err := s.Create(ctx, versions[0])
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range versions[1:] {
		var ev a2a.Event = &a2a.TaskStatusUpdateEvent{TaskID: v.ID, ContextID: v.ContextID, Status: v.Status}
		if len(v.Artifacts) > 0 && v.Status.State == a2a.TaskStateWorking {
			ev = &a2a.TaskArtifactUpdateEvent{TaskID: v.ID, ContextID: v.ContextID, Artifact: v.Artifacts[0]}
		}
		if rec, err = s.Replace(engine.WithEvent(ctx, ev), v, rec.Revision); err != nil {
			b.Fatal(err)
		}
	}
}
