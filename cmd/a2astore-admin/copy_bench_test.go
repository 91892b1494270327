package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/internal/taskgen"
	"github.com/a2astore/a2astore/pebblestore"
)

// loadPebble bulk-loads n taskgen tasks (three owners, a thousand skewed
// contexts, history, artifacts, one log entry each) into a new Pebble
// store in dir through its Importer: the bulk loader of scale runs.
func loadPebble(tb testing.TB, dir string, n int) {
	tb.Helper()
	ctx := context.Background()
	s, err := pebblestore.Open(dir, pebblestore.Options{Log: true, NoSync: true, Logger: pebblelog.Quiet{}})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	gen := taskgen.New(taskgen.Shape{Seed: 55})
	const t0 = int64(1_750_000_000_000_000)
	batch := make([]engine.StoredTask, 0, 1000)
	for i := range n {
		task := gen.Task(i)
		l, err := engine.NewLogEntry(task, nil)
		if err != nil {
			tb.Fatal(err)
		}
		at := t0 + int64(i)
		l.Revision, l.Time = 1, at
		batch = append(batch, engine.StoredTask{
			Record: engine.Record{Task: task, Revision: 1, Cursor: engine.Cursor{UpdatedAt: at, ID: task.ID}, Owner: copyOwners[i%len(copyOwners)]},
			Log:    []engine.LogEntry{l},
		})
		if len(batch) == cap(batch) || i == n-1 {
			if err := s.Import(ctx, batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// BenchmarkCopy measures copy's rate both ways between Pebble and
// PostgreSQL, on A2ASTORE_COPY_TASKS tasks (default 1e4): tasks/s of the
// copy itself (read from the source, batches of 1000 written to a new
// target), and of the verification that follows it (both traversed and
// compared), reported apart; and what bounds the copy: this process's
// CPU (the copier and, on Pebble, the store) and the rest of the
// machine's (on a quiet machine, PostgreSQL's), each in cores busy over
// the copy's wall time. Run it quietly, once:
//
//	go test ./cmd/a2astore-admin -run '^$' -bench '^BenchmarkCopy$' -benchtime 1x
func BenchmarkCopy(b *testing.B) {
	n := copyTasks(b, 10_000)
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	loadPebble(b, src, n)
	pgSrc := pgtest.DSN(b)
	mustAdmin(b, "copy", "-from", "pebble", "-from-pebble-dir", src, "-to", "pg", "-to-pg-dsn", pgSrc)
	runs := 0
	for _, c := range []struct {
		name   string
		from   endpoint
		target func() endpoint
	}{
		{"from=pebble/to=pg", endpoint{backend: "pebble", pebbleDir: src}, func() endpoint {
			return endpoint{backend: "pg", pgDSN: pgtest.DSN(b), pgSchema: "public"}
		}},
		{"from=pg/to=pebble", endpoint{backend: "pg", pgDSN: pgSrc, pgSchema: "public"}, func() endpoint {
			runs++
			return endpoint{backend: "pebble", pebbleDir: filepath.Join(dir, fmt.Sprintf("dst%d", runs))}
		}},
	} {
		b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
			var copying, verifying, self, busy time.Duration
			copies := 0
			for b.Loop() {
				o := &options{src: c.from, dst: c.target(), batch: 1000}
				ctx := context.Background()
				start, self0, busy0 := time.Now(), processCPU(), machineBusy()
				cp, err := startCopy(ctx, o, io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				if err := cp.run(ctx); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				self += processCPU() - self0
				busy += machineBusy() - busy0
				if err := cp.verify(ctx); err != nil {
					b.Fatal(err)
				}
				verifying += time.Since(mid)
				copying += mid.Sub(start)
				cp.close()
				copies++
			}
			b.ReportMetric(float64(n*copies)/copying.Seconds(), "tasks/s")
			b.ReportMetric(float64(n*copies)/verifying.Seconds(), "verified-tasks/s")
			b.ReportMetric(self.Seconds()/copying.Seconds(), "copier-cores")
			if busy > 0 {
				b.ReportMetric((busy-self).Seconds()/copying.Seconds(), "others-cores")
			}
		})
	}
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineBusy is the CPU time every process on the machine has used
// (/proc/stat's user, nice, system, irq and softirq ticks; 0 where there
// is no /proc).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
