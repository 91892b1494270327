package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/loadgen/load"
	"github.com/a2astore/a2astore/pgstore"
)

// TestStandbyCost measures, with A2ASTORE_STANDBY_COST=1 (skipped
// otherwise), the primary's CPU per ListTasks (first page with total) and
// the list latency at one offered load (open loop) with 0, 1 and 2
// standbys, and with 2 standbys without the gates (what the consistency
// mechanism adds). The primary's CPU is that of its postmaster and every
// child (backends, WAL senders, background processes), from /proc.
func TestStandbyCost(t *testing.T) {
	if os.Getenv("A2ASTORE_STANDBY_COST") == "" {
		t.Skip("set A2ASTORE_STANDBY_COST=1 to measure")
	}
	rate, _ := strconv.ParseFloat(os.Getenv("A2ASTORE_STANDBY_RATE"), 64)
	if rate == 0 {
		rate = 300
	}
	ctx := context.Background()
	set := pgtest.Replicated(t)
	p, sbs := set.DSN(t)
	w := openAgain(t, p)
	for i := range 3000 {
		must(t)(w.Create(ctx, task(fmt.Sprintf("cost%05d", i), fmt.Sprint("ctx", i%50), a2a.TaskStateWorking)))
	}
	for _, c := range []struct {
		name     string
		replicas []string
		gates    bool
	}{{"standbys=0", nil, true}, {"standbys=1", sbs[:1], true}, {"standbys=2", sbs, true}, {"standbys=2/gates=off", sbs, false}} {
		s := openReplicated(t, p, c.replicas, 0)
		s.SetGates(c.gates)
		set.WaitReplayed(t)
		load1, _ := os.ReadFile("/proc/loadavg")
		cpu0 := treeCPU(t, set.PrimaryPID())
		res, err := load.Run(ctx, load.Config{Store: s, Workload: "list-only", Rate: rate, Duration: 10 * time.Second,
			Concurrency: 16, Initial: -1, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		cpu := treeCPU(t, set.PrimaryPID()) - cpu0
		load2, _ := os.ReadFile("/proc/loadavg")
		st := s.ReplicaStats()
		ls := res.Ops[load.OpList]
		lists := ls.Count
		t.Logf("%s rate=%.0f/s lists=%d primary_cpu=%v primary_cpu_per_list=%.1fµs list_p50=%.3fms list_p99=%.3fms primary_reads=%d standby_reads=%v fallbacks=%v load_before=%s load_after=%s",
			c.name, rate, lists, cpu, float64(cpu.Microseconds())/float64(max(lists, 1)), ls.P50Ms, ls.P99Ms, st.PrimaryReads, standbyReads(st), st.Fallbacks,
			strings.TrimSpace(string(load1)), strings.TrimSpace(string(load2)))
	}
}

func standbyReads(st pgstore.ReplicaStats) []int64 {
	var r []int64
	for _, sb := range st.Standbys {
		r = append(r, sb.Reads)
	}
	return r
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
