package main

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/a2astore/a2astore/loadgen/load"
)

// Each section's text is Markdown, ending in a newline, between its markers.

func headlineSection(r *run, rel string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Generated from run [`%s`](%s/) (%s mode) at commit `%s`, %s, %.0f min; load average %s before, %s after, on %d CPUs",
		r.ID, rel, r.Meta.Mode, r.Meta.Commit, r.Meta.Started.UTC().Format("2006-01-02 15:04 MST"),
		r.Meta.Finished.Sub(r.Meta.Started).Minutes(), r.Meta.LoadBefore, r.Meta.LoadAfter, r.Meta.CPUs)
	if r.Loaded() {
		b.WriteString(" — **the machine was loaded: absolute figures are inflated and noisy**")
	}
	b.WriteString(".")
	if r.Meta.Note != "" {
		fmt.Fprintf(&b, " %s", r.Meta.Note)
	}
	fmt.Fprintf(&b, " Commands: [`commands.txt`](%s/commands.txt).\n\n", rel)
	b.WriteString("| figure | n | value | target | from |\n|---|---:|---:|---|---|\n")
	for _, f := range figures {
		v, n, ok := f.value(r)
		cell, ns := "—", "—"
		if ok {
			cell = formatValue(v, f.Unit)
			if n > 0 {
				ns = short(n)
			}
		}
		if !f.Sized {
			ns = ""
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.Label, ns, cell, f.Target, f.Source)
	}
	return b.String()
}

func runSection(r *run, rel string) string {
	var b strings.Builder
	b.WriteString("| | |\n|---|---|\n")
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "| %s | %s |\n", k, v)
		}
	}
	row("run", fmt.Sprintf("`%s` (%s mode)", r.ID, r.Meta.Mode))
	row("commit", "`"+r.Meta.Commit+"`")
	row("started / finished (UTC)", r.Meta.Started.UTC().Format("2006-01-02 15:04:05")+" / "+r.Meta.Finished.UTC().Format("15:04:05"))
	row("load average before / after", r.Meta.LoadBefore+" / "+r.Meta.LoadAfter)
	row("CPU", fmt.Sprintf("%d × %s", r.Meta.CPUs, r.Meta.CPUModel))
	row("memory", r.Meta.MemTotal)
	row("kernel", r.Meta.Kernel)
	row("Go", r.Meta.Go)
	row("PostgreSQL", r.Meta.Postgres)
	row("raw files", fmt.Sprintf("[`%s/`](%s/): `bench.txt`, `pgstore.txt`, `loadgen/`, `server/`, `steps.log`, `commands.txt`", rel, rel))
	return b.String()
}

func peersSection(r *run) string {
	if r.Bench == nil {
		return "The newest run has no benchmark output.\n"
	}
	var b strings.Builder
	b.WriteString("| comparison (same run, same fixture, same process) | ratio | target |\n|---|---:|---|\n")
	for _, x := range ratios(r.Bench) {
		fmt.Fprintf(&b, "| %s | %s× | %s |\n", x.label, formatRatio(x.value), x.target)
	}
	return b.String()
}

var (
	backendOrder   = []string{"mem", "pebble", "pg"}
	transportOrder = []string{"jsonrpc", "http", "grpc"}
	workloadMethod = map[string]string{"send-only": "SendMessage", "list-only": "ListTasks"}
)

func orderOf(order []string, s string) int {
	if i := slices.Index(order, s); i >= 0 {
		return i
	}
	return len(order)
}

// sortedServer is the run's server results in table order.
func sortedServer(r *run) []serverRun {
	s := slices.Clone(r.Server)
	slices.SortStableFunc(s, func(a, b serverRun) int {
		if d := orderOf(backendOrder, a.Backend) - orderOf(backendOrder, b.Backend); d != 0 {
			return d
		}
		if d := strings.Compare(a.Workload, b.Workload); d != 0 {
			return -d // send-only first
		}
		return orderOf(transportOrder, a.Transport) - orderOf(transportOrder, b.Transport)
	})
	return s
}

func serverSection(r *run) string {
	if len(r.Server) == 0 {
		return "The newest run has no server runs.\n"
	}
	var b strings.Builder
	first := r.Server[0].Res
	fmt.Fprintf(&b, "loadgen on loopback, %d closed-loop workers, %.1f s per row, seed %d; the server's CPU is its process's user + system time over the row's run; PostgreSQL's is the whole cluster's (postmaster, backends, reaped children).\n\n",
		first.Concurrency, first.ElapsedSec, first.Seed)
	b.WriteString("| backend | method | transport | round trips/s | p50 ms | p95 ms | p99 ms | p99.9 ms | server CPU µs/request | PostgreSQL CPU µs/request | errors |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, s := range sortedServer(r) {
		t := s.Res.Total
		cpu := "—"
		if v, ok := s.CPUPerRequest(); ok {
			cpu = formatSig(v)
		}
		dbcpu := "—"
		if v, ok := s.DBCPUPerRequest(); ok {
			dbcpu = formatSig(v)
		}
		method := workloadMethod[s.Workload]
		if method == "" {
			method = s.Workload
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Backend, method, s.Transport,
			commas(t.OpsPerSec), load.FormatMillis(t.P50Ms, 2), load.FormatMillis(t.P95Ms, 2), load.FormatMillis(t.P99Ms, 2), load.FormatMillis(t.P999Ms, 2), cpu, dbcpu, fmtErrs(t.Errors))
	}
	return b.String()
}

func fmtErrs(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func loadgenSection(r *run) string {
	if len(r.Loadgen) == 0 {
		return "The newest run has no loadgen runs.\n"
	}
	var b strings.Builder
	var any *load.Result
	for _, be := range backendOrder {
		if res, ok := r.Loadgen[be]; ok {
			any = res
			break
		}
	}
	if any != nil {
		fmt.Fprintf(&b, "`loadgen -workload %s -concurrency %d -seed %d`, %.0f s per backend, %d initial tasks; every traversal checked live (L7: each task exactly once, cursors in order).\n\n",
			any.Workload, any.Concurrency, any.Seed, any.ElapsedSec, any.Initial)
	}
	b.WriteString("| backend | ops | ops/s | p50 ms | p99 ms | create p99 ms | page p99 ms | traversals checked | violations | GC CPU |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	names := slices.Sorted(maps.Keys(r.Loadgen))
	slices.SortStableFunc(names, func(a, b string) int { return orderOf(backendOrder, a) - orderOf(backendOrder, b) })
	for _, be := range names {
		res := r.Loadgen[be]
		gc := "—"
		if res.GC != nil {
			gc = fmt.Sprintf("%.1f %%", 100*res.GC.CPUShare)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n", be,
			commas(float64(res.Total.Count)), commas(res.Total.OpsPerSec), load.FormatMillis(res.Total.P50Ms, 2), load.FormatMillis(res.Total.P99Ms, 2),
			load.FormatMillis(res.Ops[load.OpCreate].P99Ms, 2), load.FormatMillis(res.Ops[load.OpPage].P99Ms, 2),
			commas(float64(res.Traversals)), res.ViolationCount, gc)
	}
	return b.String()
}

// historyKeys are the figures of the history table, in column order.
var historyKeys = []string{"mem-page-light", "mem-replace", "pebble-page-light", "pg-page-light", "a2a-inmemory", "server-send-rps", "server-send-cpu", "loadgen-mem"}

func figureByKey(k string) figure {
	for _, f := range figures {
		if f.Key == k {
			return f
		}
	}
	panic("benchplot: no figure " + k)
}

func historySection(runs []*run, out string) string {
	var b strings.Builder
	b.WriteString("Store figures at n = 1e4 (the largest size quick runs have); every recorded run, oldest first. A run marked loaded started with the 1-minute load average above the core count (the load after includes the run's own last steps).\n\n")
	b.WriteString("| run | mode | started (UTC) | load before / after |")
	for _, k := range historyKeys {
		f := figureByKey(k)
		fmt.Fprintf(&b, " %s (%s) |", shortLabel(f), f.Unit)
	}
	b.WriteString("\n|---|---|---|---|" + strings.Repeat("---:|", len(historyKeys)) + "\n")
	for _, r := range runs {
		mode := r.Meta.Mode
		if r.Loaded() {
			mode += ", loaded"
		}
		fmt.Fprintf(&b, "| [`%s`](%s/) | %s | %s | %s / %s |", r.Label(), relDir(out, r.Dir), mode,
			r.Meta.Started.UTC().Format("2006-01-02 15:04"), r.Meta.LoadBefore, r.Meta.LoadAfter)
		for _, k := range historyKeys {
			f := figureByKey(k)
			cell := "—"
			if v, ok := f.at(r); ok {
				cell = strings.TrimSuffix(formatValue(v, f.Unit), " "+f.Unit)
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// shortLabel is a figure's label for a column head.
func shortLabel(f figure) string {
	return map[string]string{
		"mem-page-light":    "mem light page",
		"mem-replace":       "mem Replace",
		"pebble-page-light": "pebble light page",
		"pg-page-light":     "pg light page",
		"a2a-inmemory":      "InMemory / memstore",
		"server-send-rps":   "SendMessage round trips",
		"server-send-cpu":   "server CPU per SendMessage",
		"server-list-cpu":   "server CPU per ListTasks",
		"mem-page-floor":    "mem page / floor",
		"mem-page-pair":     "mem page / floor (one loop)",
		"pebble-replace":    "pebble Replace",
		"loadgen-mem":       "loadgen mem",
	}[f.Key]
}

func chartsSection(charts []chartFile) string {
	var b strings.Builder
	for _, c := range charts {
		fmt.Fprintf(&b, "%s:\n\n![%s](%s)\n\n", c.caption, strings.TrimSuffix(c.file, ".svg"), c.file)
	}
	return b.String()
}

// relDir is dir relative to out, with slashes (for links on the page).
func relDir(out, dir string) string {
	rel, err := filepath.Rel(out, dir)
	if err != nil {
		return filepath.ToSlash(dir)
	}
	return filepath.ToSlash(rel)
}

// retentionSection tabulates BenchmarkRetain (removal throughput, the cost
// of finding a batch) and BenchmarkRetainIsolation (a read-heavy load's
// p99 with and without the retention service) of the newest run.
func retentionSection(r *run) string {
	if r.Bench == nil {
		return "The newest run has no benchmark output.\n"
	}
	var b strings.Builder
	b.WriteString("| backend | n | remove: tasks/s | remove: ms per batch | find: µs per batch | find: examined per batch |\n|---|---:|---:|---:|---:|---:|\n")
	rows := 0
	for _, be := range backendOrder {
		for _, n := range benchSizes {
			k := min(500, n/2)
			remove := fmt.Sprintf("Retain/backend=%s/op=remove/n=%d/batch=%d", be, n, k)
			find := fmt.Sprintf("Retain/backend=%s/op=find/n=%d/batch=%d", be, n, k)
			tps, ok1 := r.Bench.median(remove, "tasks/s")
			rsec, _ := r.Bench.median(remove, "sec/op")
			fsec, ok2 := r.Bench.median(find, "sec/op")
			ex, _ := r.Bench.median(find, "examined/op")
			if !ok1 && !ok2 {
				continue
			}
			rows++
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", be, short(n), orDash(ok1, commas(tps)), orDash(ok1, formatSig(rsec*1e3)),
				orDash(ok2, formatSig(micros(fsec))), orDash(ok2, formatSig(ex)))
		}
	}
	if rows == 0 {
		return "The newest run has no BenchmarkRetain output.\n"
	}
	b.WriteString("\n| backend | n | get p99 ms, retention off | on | list p99 ms, off | on | removed while on |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, be := range backendOrder {
		for _, n := range benchSizes {
			name := func(on string) string { return fmt.Sprintf("RetainIsolation/backend=%s/n=%d/retain=%s", be, n, on) }
			getOff, ok := r.Bench.median(name("off"), "get-p99-ms")
			if !ok {
				continue
			}
			getOn, _ := r.Bench.median(name("on"), "get-p99-ms")
			listOff, _ := r.Bench.median(name("off"), "list-p99-ms")
			listOn, _ := r.Bench.median(name("on"), "list-p99-ms")
			removed, _ := r.Bench.median(name("on"), "removed")
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", be, short(n), formatSig(getOff), formatSig(getOn), formatSig(listOff), formatSig(listOn), commas(removed))
		}
	}
	return b.String()
}

func orDash(ok bool, s string) string {
	if !ok {
		return "—"
	}
	return s
}
