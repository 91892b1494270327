package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The page's section "How the cost grows, 1e3 → 1e7" (#55) comes from the
// newest recorded scale run: results/runs-scale/<id>/ beside results/runs,
// written by results/scale.sh (`make results-scale`) with run.json and
// bench.txt as a run of results/runs has them, its benchmarks bench's
// BenchmarkScale. Without one the section says so and has no chart.

// scaleGood is what "good" means on every scale chart and in the table:
// the contract's page and total cost nothing more at 1e7 than at 1e3.
const (
	scaleDiskGood = 1.25 // pebble, pg: at most this × their own figure at the smallest n
	scaleMemGood  = 1.5  // mem: at most this × its bare floor at the same n
)

// scaleOp is one operation of the scale run: a chart and rows of the table.
type scaleOp struct {
	file, title string
	// name is the benchmark's name for a backend at n (benchfmt, without
	// "Benchmark").
	name func(backend string, n int) string
	// floor names mem's floor of the same n (impl=btree; sec/op) and
	// pebble's (impl=pair; floor-ns/page), "" for none.
	floor func(backend string, n int) (name, unit string)
	// only, when set, is the one backend measured; peer names a second
	// line of that backend (the OFFSET page), labelled peerLabel.
	only, peerLabel string
	peer            func(backend string, n int) string
}

var scaleBackends = []string{"mem", "pebble", "pg"}

func scaleName(format string) func(string, int) string {
	return func(backend string, n int) string { return fmt.Sprintf("Scale/backend=%s/"+format, backend, n) }
}

// pageFloors: mem's bare B-tree floor under both projections, pebble's
// bare-Pebble page under the light one.
func pageFloors(proj string) func(string, int) (string, string) {
	return func(backend string, n int) (string, string) {
		base := fmt.Sprintf("Scale/backend=%s/op=page/n=%d/page=50/proj=%s", backend, n, proj)
		switch {
		case backend == "mem":
			return base + "/impl=btree", "sec/op"
		case backend == "pebble" && proj == "light":
			return base + "/impl=pair", "floor-ns/page"
		}
		return "", ""
	}
}

var scaleOps = []scaleOp{
	{file: "scale-page-light.svg", title: "Light page of 50 from a random cursor",
		name: scaleName("op=page/n=%d/page=50/proj=light"), floor: pageFloors("light")},
	{file: "scale-page-full.svg", title: "Full page of 50 from a random cursor",
		name: scaleName("op=page/n=%d/page=50/proj=full"), floor: pageFloors("full")},
	{file: "scale-page-status.svg", title: "First page of a rare state (0.1 % of tasks)",
		name: scaleName("op=page-filtered/n=%d/page=50/filter=status")},
	{file: "scale-page-owner-status.svg", title: "First page of a rare state, one owner's",
		name: scaleName("op=page-filtered/n=%d/page=50/filter=owner+status")},
	{file: "scale-page-deep.svg", title: "Keyset page at depth 90 %",
		name: scaleName("op=page-depth/n=%d/page=50/depth=90/scheme=keyset")},
	{file: "scale-page-offset.svg", title: "PostgreSQL page at depth 50 %: keyset token and OFFSET",
		name: scaleName("op=page-depth/n=%d/page=50/depth=50/scheme=keyset"),
		only: "pg", peerLabel: "pg OFFSET", peer: scaleName("op=page-depth/n=%d/page=50/depth=50/scheme=offset")},
	{file: "scale-total-none.svg", title: "First page with its total, no filter",
		name: scaleName("op=page-total/n=%d/page=50/filter=none")},
	{file: "scale-total-context.svg", title: "First page with its total, by context",
		name: scaleName("op=page-total/n=%d/page=50/filter=context")},
	{file: "scale-total-owner.svg", title: "First page with its total, by owner",
		name: scaleName("op=page-total/n=%d/page=50/filter=owner")},
	{file: "scale-total-state.svg", title: "First page with its total, by state",
		name: scaleName("op=page-total/n=%d/page=50/filter=state")},
	{file: "scale-replace.svg", title: "Replace (moves the task to the head)", name: scaleName("op=replace/n=%d")},
	{file: "scale-create.svg", title: "Create", name: scaleName("op=create/n=%d")},
}

// readScaleRun returns the newest run under the runs-scale directory
// beside runsDir; nil when there is none.
func readScaleRun(runsDir string) (*run, error) {
	dir := filepath.Join(filepath.Dir(filepath.Clean(runsDir)), "runs-scale")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return e.IsDir() && !strings.HasSuffix(e.Name(), ".partial") }) {
		return nil, nil
	}
	runs, err := readRuns(dir)
	if err != nil {
		return nil, err
	}
	r := runs[len(runs)-1]
	if r.Bench == nil {
		return nil, fmt.Errorf("scale run %s has no bench.txt", r.ID)
	}
	return r, nil
}

// scaleSizes returns the sizes the run measured, ascending.
func scaleSizes(d *data) []int {
	var ns []int
	for _, name := range d.names {
		k := keys(name)
		if k[""] != "Scale" {
			continue
		}
		if n, err := strconv.Atoi(k["n"]); err == nil && !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return ns
}

// scaleSeries is one backend's figure of op by n, in µs.
type scaleSeries struct {
	backend string
	at      map[int]float64 // the store's
	floor   map[int]float64 // its floor's, when it has one
	faults  map[int]float64 // the store's minor page faults an operation, when recorded
}

// scaleFaulty is the faults/op above which the growth table marks a
// figure: it holds this machine's first touches of memory, not only the
// store's work (docs/lab.md, "The quiet-machine rule").
const scaleFaulty = 0.05

func (o scaleOp) series(d *data, ns []int) []scaleSeries {
	var out []scaleSeries
	for _, be := range scaleBackends {
		if o.only != "" && be != o.only {
			continue
		}
		s := scaleSeries{backend: be, at: map[int]float64{}, floor: map[int]float64{}, faults: map[int]float64{}}
		peer := scaleSeries{backend: o.peerLabel, at: map[int]float64{}}
		for _, n := range ns {
			if v, ok := d.median(o.name(be, n), "sec/op"); ok {
				s.at[n] = micros(v)
			}
			if v, ok := d.median(o.name(be, n), "faults/op"); ok {
				s.faults[n] = v
			}
			if o.peer != nil {
				if v, ok := d.median(o.peer(be, n), "sec/op"); ok {
					peer.at[n] = micros(v)
				}
			}
			if o.floor == nil {
				continue
			}
			if name, unit := o.floor(be, n); name != "" {
				if v, ok := d.median(name, unit); ok {
					if unit == "sec/op" {
						v = micros(v)
					} else {
						v /= 1e3 // ns
					}
					s.floor[n] = v
				}
			}
		}
		if len(s.at) > 0 {
			out = append(out, s)
		}
		if len(peer.at) > 0 {
			out = append(out, peer)
		}
	}
	return out
}

// limit is the good limit of s at n: 1.5× the floor for mem (none without
// a floor), 1.25× the figure at the smallest n for the others.
func (s scaleSeries) limit(n int, ns []int) (float64, bool) {
	if s.backend == "mem" {
		f, ok := s.floor[n]
		return scaleMemGood * f, ok
	}
	for _, m := range ns {
		if v, ok := s.at[m]; ok {
			return scaleDiskGood * v, true
		}
	}
	return 0, false
}

func points(m map[int]float64, ns []int) plotter.XYs {
	var xys plotter.XYs
	for _, n := range ns {
		if v, ok := m[n]; ok && v > 0 {
			xys = append(xys, plotter.XY{X: float64(n), Y: v})
		}
	}
	return xys
}

// scaleChart draws op: each backend's line, its floor (dotted) and its
// good limit (dashed), in the backend's colour; log–log.
func scaleChart(d *data, o scaleOp) (*chart, error) {
	ns := scaleSizes(d)
	ss := o.series(d, ns)
	if len(ss) == 0 {
		return nil, fmt.Errorf("no %s results", o.title)
	}
	p := newPlot(o.title+", by store size", "tasks in the store, n (log scale)", "µs per operation, median (log scale)")
	add := func(label string, xys plotter.XYs, c int, dashes []vg.Length, marks bool) error {
		if len(xys) == 0 {
			return nil
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, l.Dashes = plotutil.Color(c), dashes
		p.Add(l)
		if marks {
			sc.Color, sc.Shape = plotutil.Color(c), plotutil.Shape(c)
			p.Add(sc)
			p.Legend.Add(label, l, sc)
		} else {
			p.Legend.Add(label, l)
		}
		return nil
	}
	for i, s := range ss {
		if err := add(s.backend, points(s.at, ns), i, nil, true); err != nil {
			return nil, err
		}
		if err := add(s.backend+" floor", points(s.floor, ns), i, []vg.Length{vg.Points(1), vg.Points(2)}, false); err != nil {
			return nil, err
		}
		if s.backend == o.peerLabel {
			continue // a peer: no limit of its own
		}
		good := map[int]float64{}
		for _, n := range ns {
			if v, ok := s.limit(n, ns); ok && len(s.at) > 0 {
				good[n] = v
			}
		}
		label := fmt.Sprintf("%s good: ≤ %g× its 1e3", s.backend, scaleDiskGood)
		if s.backend == "mem" {
			label = fmt.Sprintf("mem good: ≤ %g× floor", scaleMemGood)
		}
		if err := add(label, points(good, ns), i, []vg.Length{vg.Points(5), vg.Points(3)}, false); err != nil {
			return nil, err
		}
	}
	logAxis(&p.X, true)
	logAxis(&p.Y, false)
	return &chart{p, 9 * vg.Inch, 4.5 * vg.Inch, "every line under its dashed limit (pebble, pg: 1.25× their smallest n; mem: 1.5× its floor)"}, nil
}

// scaleSection is the generated section "scale" and the charts written
// for it (files in out). Without a scale run: a line saying so.
func scaleSection(r *run, out string) (string, []chartFile, error) {
	if r == nil {
		return "No scale run is recorded yet: `make results-scale` records one under `runs-scale/` and this section is generated from it.\n", nil, nil
	}
	var b strings.Builder
	mins := r.Meta.Finished.Sub(r.Meta.Started).Minutes()
	fmt.Fprintf(&b, "Generated from scale run [`%s`](%s/) (%s mode) at commit `%s`, %s UTC, %.0f min; load average %s before, %s after, on %d CPUs. Commands: [`commands.txt`](%s/commands.txt), times of each backend and size: [`steps.log`](%s/steps.log).\n\n",
		r.ID, relDir(out, r.Dir), r.Meta.Mode, r.Meta.Commit, r.Meta.Started.UTC().Format("2006-01-02 15:04"), mins,
		r.Meta.LoadBefore, r.Meta.LoadAfter, r.Meta.CPUs, relDir(out, r.Dir), relDir(out, r.Dir))
	if r.Meta.Note != "" {
		fmt.Fprintf(&b, "Note: %s\n\n", r.Meta.Note)
	}
	d := r.Bench
	ns := scaleSizes(d)
	b.WriteString("| operation | backend |")
	for _, n := range ns {
		fmt.Fprintf(&b, " %s |", short(n))
	}
	b.WriteString(" largest n / smallest | good | met |\n|---|---|" + strings.Repeat("---:|", len(ns)) + "---:|---|---|\n")
	var charts []chartFile
	marked := false
	for _, o := range scaleOps {
		ch, err := scaleChart(d, o)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchplot: %s: %v (not on the page)\n", o.file, err)
			continue
		}
		if err := saveChart(ch, out, o.file, alsoPNG); err != nil {
			return "", nil, err
		}
		charts = append(charts, chartFile{o.file, o.title + ", 1e3 → 1e7: every backend, its floor and its limit (log–log)", nil})
		for _, s := range o.series(d, ns) {
			marked = scaleRow(&b, o.title, s, ns, s.backend == o.peerLabel) || marked
		}
	}
	if marked {
		fmt.Fprintf(&b, "\n† more than %g minor page faults an operation (`faults/op`): besides the store's work, the figure holds this machine's first touches of memory, 11–13 µs for each 4 KiB page touched ([the lab](../docs/lab.md#the-quiet-machine-rule)); the growth and met columns use the figures as measured.\n", scaleFaulty)
	}
	b.WriteString("\n" + footprintTable(d, ns) + "\n")
	b.WriteString(chartsSection(charts))
	return b.String(), charts, nil
}

// scaleRow is one operation's row for one backend: µs at each n (marked †
// above scaleFaulty faults an operation), the growth from the smallest n
// to the largest, and whether it is good. It reports whether it marked a
// figure.
func scaleRow(b *strings.Builder, title string, s scaleSeries, ns []int, peer bool) (marked bool) {
	fmt.Fprintf(b, "| %s | %s |", title, s.backend)
	var first, last float64
	var lastN int
	for _, n := range ns {
		v, ok := s.at[n]
		if !ok {
			b.WriteString(" — |")
			continue
		}
		if first == 0 {
			first = v
		}
		last, lastN = v, n
		mark := ""
		if s.faults[n] > scaleFaulty {
			mark, marked = " †", true
		}
		fmt.Fprintf(b, " %s%s |", formatValue(v, "µs"), mark)
	}
	growth := "—"
	if first > 0 {
		growth = formatRatio(last/first) + "×"
	}
	if peer {
		fmt.Fprintf(b, " %s | a peer | — |\n", growth)
		return marked
	}
	good, met := fmt.Sprintf("≤ %g× its smallest n", scaleDiskGood), "—"
	if s.backend == "mem" {
		good = fmt.Sprintf("≤ %g× its floor at n", scaleMemGood)
	}
	if lim, ok := s.limit(lastN, ns); ok && lastN > 0 {
		met = "no"
		if last <= lim {
			met = "yes"
		}
		if s.backend == "mem" {
			met += fmt.Sprintf(" (%s× floor)", formatRatio(last/s.floor[lastN]))
		}
	} else if s.backend == "mem" {
		good = "no floor measured"
	}
	fmt.Fprintf(b, " %s | %s | %s |\n", growth, good, met)
	return marked
}

// footprintTable: op=footprint per backend and n: bytes per task, mem's
// RSS, the bulk load's time and rate, Pebble's write amplification and
// compaction debt.
func footprintTable(d *data, ns []int) string {
	var b strings.Builder
	b.WriteString("| backend | n | bytes/task | RSS bytes/task | load | tasks/s loaded | write amp. | compaction debt |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	cell := func(name, unit, suffix string) string {
		v, ok := d.median(name, unit)
		if !ok {
			return "—"
		}
		return formatSig(v) + suffix
	}
	for _, be := range scaleBackends {
		for _, n := range ns {
			name := fmt.Sprintf("Scale/backend=%s/op=footprint/n=%d", be, n)
			if _, ok := d.median(name, "bytes/task"); !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", be, short(n), cell(name, "bytes/task", ""),
				cell(name, "rss-B/task", ""), cell(name, "load-s", " s"), cell(name, "load-tasks/s", ""),
				cell(name, "write-amp", ""), cell(name, "debt-B", " B"))
		}
	}
	return b.String()
}
