package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// keys splits a benchmark name's key=value parts (the first part, the
// benchmark, is under "").
func keys(name string) map[string]string {
	m := map[string]string{}
	for i, p := range strings.Split(name, "/") {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			if i == 0 {
				m[""] = p
			}
			continue
		}
		m[k] = v
	}
	return m
}

// throughput is a benchmark's writes/s, or 1/(sec/op) without that metric.
func throughput(d *data, name string) (float64, bool) {
	if v, ok := d.median(name, "writes/s"); ok {
		return v, true
	}
	if v, ok := d.median(name, "sec/op"); ok && v > 0 {
		return 1 / v, true
	}
	return 0, false
}

// byWriters is a throughput by concurrent writers: one line per label,
// in the order first seen.
type byWriters struct {
	order   []string
	xys     map[string]plotter.XYs
	writers []float64 // the writer counts seen
}

func (b *byWriters) add(label string, writers int, v float64) {
	if b.xys == nil {
		b.xys = map[string]plotter.XYs{}
	}
	if _, ok := b.xys[label]; !ok {
		b.order = append(b.order, label)
	}
	b.xys[label] = append(b.xys[label], plotter.XY{X: float64(writers), Y: v})
	if !slices.Contains(b.writers, float64(writers)) {
		b.writers = append(b.writers, float64(writers))
	}
}

// chart draws the lines: x logarithmic, labelled at the writer counts
// measured; y linear from 0.
func (b *byWriters) chart(title, yLabel, none, good string) (*chart, error) {
	var lines []any
	for _, l := range b.order {
		lines = append(lines, l, b.xys[l])
	}
	p, err := linePlot(title, "concurrent writers, connections (log scale)", yLabel, lines, none)
	if err != nil {
		return nil, err
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = valueTicks(slices.Sorted(slices.Values(b.writers))...)
	p.Y.Min = 0
	p.Y.Tick.Marker = commaTicks{}
	return &chart{p, 9 * vg.Inch, 4.5 * vg.Inch, good}, nil
}

// writesCounters: pgstore's BenchmarkCountWrites, writes/s by writers, one
// line per (op, counts); creates of many owners only.
func writesCounters(d *data) (*chart, error) {
	var b byWriters
	for _, name := range d.names {
		k := keys(name)
		if k[""] != "CountWrites" || k["counts"] == "" || k["writers"] == "" {
			continue
		}
		w, err := strconv.Atoi(k["writers"])
		if err != nil {
			continue
		}
		v, ok := throughput(d, name)
		if !ok {
			continue
		}
		if k["owners"] == "1" {
			continue // the one-owner skew: in summary.md, not drawn (it crowds the chart)
		}
		b.add(fmt.Sprintf("%s, counters %s", k["op"], k["counts"]), w, v)
	}
	return b.chart("PostgreSQL writes with and without the counter triggers", "writes/s, median", "no CountWrites results",
		"the counters as installed (hot) against none and the release before (sharded), at every writer count")
}

// lifecycleImpls are BenchmarkLifecycle's three paths (its us/lc-<impl>
// metrics), as the legend names them.
var lifecycleImpls = []struct{ impl, label string }{
	{"pgstore", "pgstore"},
	{"nocounts", "pgstore, counter triggers disabled"},
	{"plain", "plain SQL into a copy of the table"},
}

// lifecycleSeries is pgstore's BenchmarkLifecycle as lifecycles/s (1e6 /
// its us/lc-<impl> metrics: wall time per lifecycle) by writers, one line
// per path (and per n when it ran at several).
func lifecycleSeries(d *data) *byWriters {
	ns := map[string]bool{}
	for _, name := range d.names {
		if k := keys(name); k[""] == "Lifecycle" {
			ns[k["n"]] = true
		}
	}
	var b byWriters
	for _, name := range d.names {
		k := keys(name)
		w, err := strconv.Atoi(k["writers"])
		if k[""] != "Lifecycle" || err != nil {
			continue
		}
		for _, impl := range lifecycleImpls {
			us, ok := d.median(name, "us/lc-"+impl.impl)
			if !ok || us <= 0 {
				continue
			}
			label := impl.label
			if len(ns) > 1 {
				label += ", n = " + k["n"]
			}
			b.add(label, w, 1e6/us)
		}
	}
	return &b
}

func lifecycle(d *data) (*chart, error) {
	return lifecycleSeries(d).chart("PostgreSQL task lifecycles (a create and three replaces)", "lifecycles/s, median",
		"no BenchmarkLifecycle results (us/lc-* metrics) in pgstore.txt",
		"pgstore's line near plain SQL's: at most 1.25× its time per lifecycle (the target)")
}

// wireLatency: p50 and p99 of each server row, by backend/transport, for
// SendMessage and ListTasks (log scale).
func wireLatency(r *run, _ []*run) (*chart, error) {
	rows := sortedServer(r)
	if len(rows) == 0 {
		return nil, errors.New("the run has no server results")
	}
	var cats []string
	idx := map[string]int{}
	for _, s := range rows {
		c := s.Backend + "/" + s.Transport
		if _, ok := idx[c]; !ok {
			idx[c] = len(cats)
			cats = append(cats, c)
		}
	}
	p := newPlot("a2astore-server round trips on loopback (echo agent)", "backend / transport", "latency, ms (log scale)")
	i := 0
	for _, w := range []string{"send-only", "list-only"} {
		for _, q := range []struct {
			name string
			get  func(s serverRun) float64
		}{{"p50", func(s serverRun) float64 { return s.Res.Total.P50Ms }}, {"p99", func(s serverRun) float64 { return s.Res.Total.P99Ms }}} {
			var xys plotter.XYs
			for _, s := range rows {
				if s.Workload == w && q.get(s) > 0 {
					off := -0.2 + 0.4*float64(i%2)
					if w == "list-only" {
						off += 0.1
					}
					xys = append(xys, plotter.XY{X: float64(idx[s.Backend+"/"+s.Transport]) + off/2, Y: q.get(s)})
				}
			}
			if len(xys) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle.Color = plotutil.Color(i)
			sc.GlyphStyle.Shape = plotutil.Shape(i)
			sc.GlyphStyle.Radius = vg.Points(3)
			p.Add(sc)
			name := workloadMethod[w]
			if name == "" {
				name = w
			}
			p.Legend.Add(name+" "+q.name, sc)
			i++
		}
	}
	if i == 0 {
		return nil, errors.New("no latencies")
	}
	p.NominalX(cats...)
	logAxis(&p.Y, false)
	return &chart{p, vg.Length(3.6+1.3*float64(len(cats))) * vg.Inch, 4.5 * vg.Inch, "low points, p99 close to p50 (a short tail)"}, nil
}

// historyRunWidth is a run's share of the history chart's x axis: 10 pt
// labels at 60° stay apart above 14 pt.
const historyRunWidth = vg.Length(18) // points

// historyChart: the µs figures of figures marked Chart, at historyN, one
// point per run that has them (x = run, oldest first).
func historyChart(_ *run, runs []*run) (*chart, error) {
	var lines []any
	for _, f := range figures {
		if !f.Chart {
			continue
		}
		var xys plotter.XYs
		for i, r := range runs {
			if v, ok := f.at(r); ok && v > 0 {
				xys = append(xys, plotter.XY{X: float64(i), Y: v})
			}
		}
		if len(xys) > 0 {
			lines = append(lines, shortLabel(f), xys)
		}
	}
	p, err := linePlot("Tracked figures by run (store figures at n = 1e4)", "run, oldest first (commit; mode when not full)", "µs per operation, median (log scale)", lines, "no tracked figures in any run")
	if err != nil {
		return nil, err
	}
	var labels []string
	for _, r := range runs {
		labels = append(labels, r.Label())
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.5, float64(len(runs))-0.5
	// Steep, each label ends at its run: a run's share of the axis (at
	// least historyRunWidth) parts neighbouring labels by more than their
	// height, however many runs, and the picture keeps a page's width.
	p.X.Tick.Label.Rotation = math.Pi / 3
	p.X.Tick.Label.XAlign = text.XRight
	p.X.Tick.Label.YAlign = text.YTop
	p.X.Padding = vg.Points(4)
	logAxis(&p.Y, false)
	w := min(max(8*vg.Inch, vg.Length(len(runs))*historyRunWidth+4.5*vg.Inch), 14*vg.Inch)
	return &chart{p, w, max(6.5*vg.Inch, w/2), "lines flat or falling from run to run; a rise is a regression to explain"}, nil
}
