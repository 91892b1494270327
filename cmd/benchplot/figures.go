package main

import (
	"fmt"
	"math"
	"strconv"
)

// A figure is one tracked headline number: the headline table shows it for
// the newest run (at the largest n it has, for sized figures), the history
// table and chart at historyN for every run, so quick and full runs line up.
type figure struct {
	Key    string // stable: history is keyed by it; never rename
	Label  string
	Unit   string // "µs", "×", "/s", "ms"
	Target string // the target, if any
	Sized  bool   // measured at several n (bench figures)
	Chart  bool   // drawn on the history chart (µs figures)
	Source string // where in the run it comes from (benchmark name or file)
	get    func(r *run, n int) (float64, bool)
}

// historyN is the n at which sized figures are tracked across runs: the
// largest size quick runs have.
const historyN = 10000

// benchSizes are the sizes the suite knows.
var benchSizes = []int{1e3, 1e4, 1e5, 1e6}

func benchMedian(name, unit string, scale float64) func(r *run, n int) (float64, bool) {
	return func(r *run, n int) (float64, bool) {
		if r.Bench == nil {
			return 0, false
		}
		v, ok := r.Bench.median(fmt.Sprintf(name, n), unit)
		return v * scale, ok
	}
}

func benchRatio(num, den string) func(r *run, n int) (float64, bool) {
	return func(r *run, n int) (float64, bool) {
		return medianRatio(r.Bench, fmt.Sprintf(num, n), fmt.Sprintf(den, n))
	}
}

// medianRatio is benchmark num's median time over den's, in d (nil: none).
func medianRatio(d *data, num, den string) (float64, bool) {
	if d == nil {
		return 0, false
	}
	a, ok1 := d.median(num, "sec/op")
	b, ok2 := d.median(den, "sec/op")
	if !ok1 || !ok2 || b == 0 {
		return 0, false
	}
	return a / b, true
}

// pgTotalRatio is pgstore's BenchmarkTotalUnderWriters at n: the first
// page with its total over the page without, with k writers, the roll-up
// woken by totals (wake=on, the store as built), filter none or state —
// the median ratio of the side-by-side pair (total=pair), or in runs made
// before it, the median total=true over the median total=false.
func pgTotalRatio(k int, filter string) func(r *run, n int) (float64, bool) {
	return func(r *run, n int) (float64, bool) {
		name := fmt.Sprintf("TotalUnderWriters/backend=pg/op=first_page/n=%d/writers=%d/wake=on/filter=%s/total=", n, k, filter)
		if r.PG != nil {
			if v, ok := r.PG.median(name+"pair", "ratio"); ok {
				return v, true
			}
		}
		return medianRatio(r.PG, name+"true", name+"false")
	}
}

// pgLifecycleRatio is pgstore's BenchmarkLifecycle with k writers: time
// per lifecycle through pgstore over the same rows by plain SQL (its
// median "ratio"), at the largest table size the run has.
func pgLifecycleRatio(k int) func(r *run, _ int) (float64, bool) {
	return func(r *run, _ int) (v float64, ok bool) {
		if r.PG == nil {
			return 0, false
		}
		best := -1
		for _, name := range r.PG.names {
			kv := keys(name)
			n, err := strconv.Atoi(kv["n"])
			if kv[""] != "Lifecycle" || kv["writers"] != strconv.Itoa(k) || err != nil || n <= best {
				continue
			}
			if m, found := r.PG.median(name, "ratio"); found {
				v, ok, best = m, true, n
			}
		}
		return v, ok
	}
}

// pebbleFloorRatio is pebblestore's BenchmarkReplaceFloor: the store's
// Replace over bare Pebble's floor (ratio) or over the store's own keys
// written by bare Pebble (ratio-keys), median.
func pebbleFloorRatio(unit string) func(r *run, _ int) (float64, bool) {
	return func(r *run, _ int) (float64, bool) {
		if r.Pebble == nil {
			return 0, false
		}
		return r.Pebble.median("ReplaceFloor", unit)
	}
}

// serverFigure is a server run's round trips/s or CPU per request.
func serverFigure(backend, transport, workload string, cpu bool) func(r *run, _ int) (float64, bool) {
	return func(r *run, _ int) (float64, bool) {
		for _, s := range r.Server {
			if s.Backend == backend && s.Transport == transport && s.Workload == workload {
				if cpu {
					return s.CPUPerRequest()
				}
				return s.Res.Total.OpsPerSec, s.Res.Total.Count > 0
			}
		}
		return 0, false
	}
}

func loadgenOps(backend string) func(r *run, _ int) (float64, bool) {
	return func(r *run, _ int) (float64, bool) {
		res, ok := r.Loadgen[backend]
		if !ok {
			return 0, false
		}
		return res.Total.OpsPerSec, true
	}
}

// gcShare is the collector's CPU share, in percent, of the gc/<name>.json
// run.
func gcShare(name string) func(r *run, _ int) (float64, bool) {
	return func(r *run, _ int) (float64, bool) {
		res, ok := r.GC[name]
		if !ok || res.GC == nil {
			return 0, false
		}
		return 100 * res.GC.CPUShare, true
	}
}

const (
	lightPage       = "Store/backend=%s/op=page/n=%%d/page=50/proj=light"
	replaceOp       = "Store/backend=%s/op=replace/n=%%d"
	replaceNoTaskOp = "Store/backend=%s/op=replace-notask/n=%%d"
)

// figures are the headline, in table order.
var figures = []figure{
	{Key: "mem-page-light", Source: "`Store/backend=mem/op=page/…/proj=light`", Label: "mem: light page of 50, random cursor", Unit: "µs", Sized: true, Chart: true,
		get: benchMedian(fmt.Sprintf(lightPage, "mem"), "sec/op", 1e6)},
	{Key: "mem-page-floor", Source: "`…/proj=light` ÷ `…/proj=light/impl=btree`", Label: "mem light page / bare B-tree + copies floor, measured one after the other", Unit: "×", Sized: true,
		get: benchRatio(fmt.Sprintf(lightPage, "mem"), fmt.Sprintf(lightPage, "mem")+"/impl=btree")},
	{Key: "mem-page-pair", Source: "`…/proj=light/impl=pair` (store/floor)", Label: "mem light page / bare B-tree + copies floor, alternating in one loop", Unit: "×", Target: "≤ 1.5×", Sized: true,
		get: benchMedian(fmt.Sprintf(lightPage, "mem")+"/impl=pair", "store/floor", 1)},
	{Key: "mem-replace", Source: "`Store/backend=mem/op=replace`", Label: "mem: Replace moving a task to the head", Unit: "µs", Target: "≤ 2 µs at 1e6", Sized: true, Chart: true,
		get: benchMedian(fmt.Sprintf(replaceOp, "mem"), "sec/op", 1e6)},
	{Key: "mem-replace-notask", Source: "`Store/backend=mem/op=replace-notask`", Label: "mem: Replace as the adapter to a2a-go makes it (no copy of the task returned)", Unit: "µs", Sized: true,
		get: benchMedian(fmt.Sprintf(replaceNoTaskOp, "mem"), "sec/op", 1e6)},
	{Key: "mem-gc", Source: "`gc/mem-read-heavy.json`", Label: "mem: collector's CPU share, read-heavy loadgen at 1e6 tasks (default GOGC)", Unit: "%", Target: "≤ 10 %",
		get: gcShare("mem-read-heavy")},
	{Key: "a2a-inmemory", Source: "`op=list-first/…/impl=a2a-inmemory` ÷ `op=list-first`", Label: "a2a-go taskstore.InMemory / memstore, first page + total", Unit: "×", Target: "≥ 1000× at 1e5", Sized: true,
		get: benchRatio("Store/backend=mem/op=list-first/n=%d/page=50/impl=a2a-inmemory", "Store/backend=mem/op=list-first/n=%d/page=50")},
	{Key: "pebble-page-light", Source: "`Store/backend=pebble/op=page/…/proj=light`", Label: "pebble: light page of 50, random cursor", Unit: "µs", Sized: true, Chart: true,
		get: benchMedian(fmt.Sprintf(lightPage, "pebble"), "sec/op", 1e6)},
	{Key: "pebble-page-pair", Source: "`Store/backend=pebble/…/proj=light/impl=pair` (store/floor)", Label: "pebble light page / bare Pebble page of the light fields, alternating in one loop", Unit: "×", Target: "≤ 1.0×", Sized: true,
		get: benchMedian(fmt.Sprintf(lightPage, "pebble")+"/impl=pair", "store/floor", 1)},
	{Key: "pebble-replace", Source: "`Store/backend=pebble/op=replace`", Label: "pebble: Replace (NoSync)", Unit: "µs", Target: "≤ 10 µs", Sized: true, Chart: true,
		get: benchMedian(fmt.Sprintf(replaceOp, "pebble"), "sec/op", 1e6)},
	{Key: "pebble-replace-floor", Source: "`ReplaceFloor` ratio (pebblestore)", Label: "pebble Replace / bare Pebble floor (get, delete, 2 sets), alternating, 1e4 tasks", Unit: "×", Target: "≤ 1.0×",
		get: pebbleFloorRatio("ratio")},
	{Key: "pebble-replace-keys", Source: "`ReplaceFloor` ratio-keys (pebblestore)", Label: "pebble Replace / the store's own keys written by bare Pebble, alternating, 1e4 tasks", Unit: "×",
		get: pebbleFloorRatio("ratio-keys")},
	{Key: "pg-page-light", Source: "`Store/backend=pg/op=page/…/proj=light`", Label: "pg: light page of 50, random cursor", Unit: "µs", Sized: true, Chart: true,
		get: benchMedian(fmt.Sprintf(lightPage, "pg"), "sec/op", 1e6)},
	{Key: "pg-keyset-d90", Source: "`op=page-depth/…/depth=90/scheme=keyset`", Label: "pg: keyset page at depth 90 %", Unit: "µs", Target: "≤ 500 µs", Sized: true,
		get: benchMedian("Store/backend=pg/op=page-depth/n=%d/page=50/depth=90/scheme=keyset", "sec/op", 1e6)},
	{Key: "pg-offset-d50", Source: "`…/depth=50/scheme=offset` ÷ `…/scheme=keyset`", Label: "pg: OFFSET / keyset page at depth 50 %", Unit: "×", Target: "≥ 1000× at 1e6", Sized: true,
		get: benchRatio("Store/backend=pg/op=page-depth/n=%d/page=50/depth=50/scheme=offset", "Store/backend=pg/op=page-depth/n=%d/page=50/depth=50/scheme=keyset")},
	{Key: "pg-count-scan", Source: "`op=total/…/filter=none/impl=scan` ÷ `…/filter=none`", Label: "pg: count(*) / counters, total with no filter", Unit: "×", Sized: true,
		get: benchRatio("Store/backend=pg/op=total/n=%d/filter=none/impl=scan", "Store/backend=pg/op=total/n=%d/filter=none")},
	{Key: "pg-replace-indexes", Source: "`op=replace` ÷ `op=replace/…/indexes=none`", Label: "pg: Replace with / without the ordering indexes", Unit: "×", Target: "anchor ≈ 1.3–1.4×", Sized: true,
		get: benchRatio(fmt.Sprintf(replaceOp, "pg"), fmt.Sprintf(replaceOp, "pg")+"/indexes=none")},
	{Key: "pg-total-writers4", Source: "`TotalUnderWriters/…/writers=4/wake=on/filter=none/total=pair` ratio", Label: "pg: first page with / without its total, 4 writers flipping states by SQL", Unit: "×", Target: "≤ 1.25×", Sized: true,
		get: pgTotalRatio(4, "none")},
	{Key: "pg-total-writers16", Source: "`TotalUnderWriters/…/writers=16/wake=on/filter=none/total=pair` ratio", Label: "pg: first page with / without its total, 16 writers flipping states by SQL", Unit: "×", Target: "≤ 1.25×", Sized: true,
		get: pgTotalRatio(16, "none")},
	{Key: "pg-total-state-writers16", Source: "`TotalUnderWriters/…/writers=16/wake=on/filter=state/total=pair` ratio", Label: "pg: first page of working tasks with / without its total, 16 writers flipping states by SQL", Unit: "×", Target: "≤ 1.25×", Sized: true,
		get: pgTotalRatio(16, "state")},
	{Key: "pg-lifecycle-1", Source: "`Lifecycle/…/writers=1` ratio", Label: "pg: task lifecycle (create, 3 replaces), pgstore / plain SQL, 1 writer, 2e4 tasks", Unit: "×", Target: "≤ 1.25×",
		get: pgLifecycleRatio(1)},
	{Key: "pg-lifecycle-4", Source: "`Lifecycle/…/writers=4` ratio", Label: "pg: task lifecycle, pgstore / plain SQL, 4 writers", Unit: "×", Target: "≤ 1.25×",
		get: pgLifecycleRatio(4)},
	{Key: "pg-lifecycle-16", Source: "`Lifecycle/…/writers=16` ratio", Label: "pg: task lifecycle, pgstore / plain SQL, 16 writers (PostgreSQL and the writers share 2 cores)", Unit: "×", Target: "≤ 1.25×",
		get: pgLifecycleRatio(16)},
	{Key: "server-send-rps", Source: "`server/mem-jsonrpc-send-only.json`", Label: "server (mem, JSON-RPC): SendMessage round trips", Unit: "/s",
		get: serverFigure("mem", "jsonrpc", "send-only", false)},
	{Key: "server-send-cpu", Source: "`server/mem-jsonrpc-send-only.{json,cpu}`", Label: "server (mem, JSON-RPC): server CPU per SendMessage", Unit: "µs", Chart: true,
		get: serverFigure("mem", "jsonrpc", "send-only", true)},
	{Key: "server-list-rps", Source: "`server/mem-jsonrpc-list-only.json`", Label: "server (mem, JSON-RPC): ListTasks round trips", Unit: "/s",
		get: serverFigure("mem", "jsonrpc", "list-only", false)},
	{Key: "server-list-cpu", Source: "`server/mem-jsonrpc-list-only.{json,cpu}`", Label: "server (mem, JSON-RPC): server CPU per ListTasks", Unit: "µs", Chart: true,
		get: serverFigure("mem", "jsonrpc", "list-only", true)},
	{Key: "loadgen-mem", Source: "`loadgen/mem.json`", Label: "loadgen traversal-under-churn, mem", Unit: "ops/s", get: loadgenOps("mem")},
	{Key: "loadgen-pebble", Source: "`loadgen/pebble.json`", Label: "loadgen traversal-under-churn, pebble (fsync)", Unit: "ops/s", get: loadgenOps("pebble")},
	{Key: "loadgen-pg", Source: "`loadgen/pg.json`", Label: "loadgen traversal-under-churn, pg", Unit: "ops/s", get: loadgenOps("pg")},
}

// value is f for r: at the largest n that has it (n = 0 when not sized).
func (f figure) value(r *run) (v float64, n int, ok bool) {
	if !f.Sized {
		v, ok = f.get(r, 0)
		return v, 0, ok
	}
	for _, n := range slicesReverse(benchSizes) {
		if v, ok := f.get(r, n); ok {
			return v, n, true
		}
	}
	return 0, 0, false
}

// at is f for r at historyN (any n when not sized).
func (f figure) at(r *run) (float64, bool) {
	return f.get(r, historyN)
}

func slicesReverse(s []int) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// formatValue prints v in unit with sensible precision.
func formatValue(v float64, unit string) string {
	switch unit {
	case "×":
		return formatRatio(v) + "×"
	case "/s", "ops/s":
		return commas(math.Round(v)) + " " + unit
	}
	return formatSig(v) + " " + unit
}

// formatSig prints three significant digits, no exponent.
func formatSig(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1000:
		return commas(math.Round(v))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// commas prints an integer with thousands separators.
func commas(v float64) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', 0, 64)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if v < 0 {
		return "-" + string(out)
	}
	return string(out)
}
