package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/loadgen/load"
	"github.com/a2astore/a2astore/pgstore"
)

// TestStandbyCost measures, with A2ASTORE_STANDBY_COST=1 (skipped
// otherwise), on pgtest's replicated cluster with 3,000 tasks:
//
//   - idle: the primary's CPU with no reads (its background and WAL
//     senders, and the health monitor's probes), the floor under every
//     figure below;
//   - get: the latency of one Get at a time on the primary, on a standby
//     through the gate, and on a standby without it (what the mechanism
//     adds per read: the position query and the gate);
//   - list-only at one offered load (open loop, A2ASTORE_STANDBY_RATE,
//     default 300/s) with 0, 1 and 2 standbys and 2 without gates: the
//     primary's CPU per list (first page with total) and the latency;
//   - read-heavy and list-only closed loop (8 workers): throughput and the
//     primary's CPU per operation with 0, 1 and 2 standbys; read-heavy
//     with 1 standby and no nudges, nudges after 2 ms and after 10 ms; and
//     2 standbys with one lagging by 2 s.
//
// The primary's CPU is that of its postmaster and every child (backends,
// WAL senders, background processes), from /proc.
func TestStandbyCost(t *testing.T) {
	if os.Getenv("A2ASTORE_STANDBY_COST") == "" {
		t.Skip("set A2ASTORE_STANDBY_COST=1 to measure")
	}
	rate, _ := strconv.ParseFloat(os.Getenv("A2ASTORE_STANDBY_RATE"), 64)
	if rate == 0 {
		rate = 300
	}
	set := pgtest.Replicated(t)
	p, sbs := costDB(t, set)
	idle := openReplicated(t, p, sbs, 0)
	cpu0 := treeCPU(t, set.PrimaryPID())
	l0 := loadavg()
	time.Sleep(10 * time.Second) // a measurement window, not a wait for a condition
	t.Logf("idle: primary_cpu=%v over 10s (2 standbys, health monitor every %v) load=%s..%s",
		treeCPU(t, set.PrimaryPID())-cpu0, pgstore.DefaultReplicaCheckInterval, l0, loadavg())
	idle.Close()
	costGets(t, p, sbs)
	for _, c := range costCases() {
		costRun(t, set, c, load.Config{Workload: "list-only", Rate: rate, Duration: 10 * time.Second, Concurrency: 16, Initial: -1, Seed: 1})
	}
	for _, wl := range []string{"read-heavy", "list-only"} {
		for _, c := range costCases()[:3] {
			costRun(t, set, c, load.Config{Workload: wl, Duration: 10 * time.Second, Concurrency: 8, Initial: -1, Seed: 1})
		}
	}
	for _, after := range []time.Duration{-1, 2 * time.Millisecond, 10 * time.Millisecond} {
		costRun(t, set, costCase{fmt.Sprintf("standbys=1/nudge-after=%v", after), 1, true, after},
			load.Config{Workload: "read-heavy", Duration: 10 * time.Second, Concurrency: 8, Initial: -1, Seed: 1})
	}
	set.Standby(1).SetApplyDelay(t, 2*time.Second)
	costRun(t, set, costCase{"standbys=2/one-lagging-2s", 2, true, 0},
		load.Config{Workload: "read-heavy", Duration: 10 * time.Second, Concurrency: 8, Initial: -1, Seed: 1})
}

type costCase struct {
	name       string
	standbys   int
	gates      bool
	nudgeAfter time.Duration // 0: the default
}

func costCases() []costCase {
	return []costCase{{"standbys=0", 0, true, 0}, {"standbys=1", 1, true, 0}, {"standbys=2", 2, true, 0}, {"standbys=2/gates=off", 2, false, 0}}
}

// costDB returns a new database on the replicated cluster holding 3,000
// tasks in 50 contexts, replayed on the standbys: every run has its own,
// since loadgen's task IDs are the same in every run.
func costDB(t *testing.T, set *pgtest.ReplicaSet) (string, []string) {
	t.Helper()
	p, sbs := set.DSN(t)
	w, err := pgstore.Open(context.Background(), p, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < 3000; i += 8 {
				if _, err := w.Create(context.Background(), task(fmt.Sprintf("cost%05d", i), fmt.Sprint("ctx", i%50), a2a.TaskStateWorking)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, err := w.FoldCounts(context.Background()); err != nil {
		t.Fatal(err)
	}
	set.WaitReplayed(t)
	return p, sbs
}

// costRun runs cfg on a store for c over a database of its own and logs
// throughput, latency and the primary's CPU.
func costRun(t *testing.T, set *pgtest.ReplicaSet, c costCase, cfg load.Config) {
	t.Helper()
	p, sbs := costDB(t, set)
	s, err := pgstore.Open(context.Background(), p, pgstore.Options{Replicas: sbs[:c.standbys], ReplicaNudgeAfter: c.nudgeAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetGates(c.gates)
	set.WaitReplayed(t)
	l0 := loadavg()
	cpu0 := treeCPU(t, set.PrimaryPID())
	cfg.Store = s
	res, err := load.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cpu := treeCPU(t, set.PrimaryPID()) - cpu0
	st := s.ReplicaStats()
	ls := res.Ops[load.OpList]
	mode := "closed"
	if cfg.Rate > 0 {
		mode = fmt.Sprintf("rate=%.0f/s", cfg.Rate)
	}
	t.Logf("%s %s %s: ops=%d ops/s=%.0f primary_cpu=%v primary_cpu_per_op=%.1fµs list_p50=%.3fms list_p99=%.3fms get_p50=%.3fms get_p99=%.3fms primary_reads=%d standby_reads=%v fallbacks=%v nudges=%d load=%s..%s",
		cfg.Workload, mode, c.name, res.Total.Count, res.Total.OpsPerSec, cpu, float64(cpu.Microseconds())/float64(max(res.Total.Count, 1)),
		ls.P50Ms, ls.P99Ms, res.Ops[load.OpGet].P50Ms, res.Ops[load.OpGet].P99Ms, st.PrimaryReads, standbyReads(st), nonzero(st.Fallbacks), st.Nudges, l0, loadavg())
}

// costGets logs the latency of 3,000 Gets, one at a time, on the primary
// and on a standby with and without the gate.
func costGets(t *testing.T, p string, sbs []string) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []costCase{{"primary", 0, true, 0}, {"standby", 1, true, 0}, {"standby/gates=off", 1, false, 0}} {
		s := openReplicated(t, p, sbs[:c.standbys], 0)
		s.SetGates(c.gates)
		l0 := loadavg()
		var d []time.Duration
		for i := range 3000 {
			start := time.Now()
			must(t)(s.Get(ctx, a2a.TaskID(fmt.Sprintf("cost%05d", i))))
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		st := s.ReplicaStats()
		t.Logf("get one at a time, %s: mean=%v p50=%v p99=%v primary_reads=%d standby_reads=%v load=%s..%s",
			c.name, sum/time.Duration(len(d)), d[len(d)/2], d[len(d)*99/100], st.PrimaryReads, standbyReads(st), l0, loadavg())
		s.Close()
	}
}

func standbyReads(st pgstore.ReplicaStats) []int64 {
	var r []int64
	for _, sb := range st.Standbys {
		r = append(r, sb.Reads)
	}
	return r
}

func nonzero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// treeCPU is the user+system CPU time of pid and its children.
func treeCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		self, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		ppid, _ := strconv.Atoi(fields[1])
		if self != pid && ppid != pid {
			continue
		}
		u, _ := strconv.ParseInt(fields[11], 10, 64)
		k, _ := strconv.ParseInt(fields[12], 10, 64)
		ticks += u + k
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
}
