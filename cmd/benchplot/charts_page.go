package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
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

// writesCounters: pgstore's BenchmarkCountWrites, writes/s by writers, one
// line per (op, counts); creates of many owners only.
func writesCounters(d *data) (*plot.Plot, vg.Length, vg.Length, error) {
	series := map[string]plotter.XYs{}
	var order []string
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
		op := k["op"]
		if k["owners"] == "1" {
			continue // the one-owner skew: in summary.md, not drawn (it crowds the chart)
		}
		label := fmt.Sprintf("%s, counters %s", op, k["counts"])
		if _, ok := series[label]; !ok {
			order = append(order, label)
		}
		series[label] = append(series[label], plotter.XY{X: float64(w), Y: v})
	}
	var lines []any
	for _, l := range order {
		lines = append(lines, l, series[l])
	}
	p, err := linePlot("PostgreSQL writes with and without the counter triggers", "concurrent writers (connections)", "writes/s (median)", true, lines, "no CountWrites results")
	if err != nil {
		return nil, 0, 0, err
	}
	p.Y.Max *= 10
	p.Legend.Left = false
	return p, 8 * vg.Inch, 5 * vg.Inch, nil
}

// lifecycle: every pgstore benchmark whose name has "Lifecycle" in it
// (BenchmarkLifecycle, BenchmarkWriteLifecycle…), its writes/s (or
// operations/s), as horizontal bars.
func lifecycle(d *data) (*plot.Plot, vg.Length, vg.Length, error) {
	var vals plotter.Values
	var labels []string
	for _, name := range d.names {
		if !strings.Contains(keys(name)[""], "Lifecycle") {
			continue
		}
		v, ok := throughput(d, name)
		if !ok {
			continue
		}
		vals = append(vals, v)
		labels = append(labels, fmt.Sprintf("%s: %s/s", name, commas(v)))
	}
	if len(vals) == 0 {
		return nil, 0, 0, errors.New("no Lifecycle benchmarks in pgstore.txt")
	}
	p := plot.New()
	p.Title.Text = "PostgreSQL task lifecycle throughput"
	p.X.Label.Text = "writes/s (median)"
	bars, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return nil, 0, 0, err
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{R: 60, G: 140, B: 90, A: 255}
	p.Add(bars)
	p.NominalY(labels...)
	return p, 10 * vg.Inch, vg.Length(1.2+0.35*float64(len(vals))) * vg.Inch, nil
}

// wireLatency: p50 and p99 of each server row, by backend/transport, for
// SendMessage and ListTasks (log scale).
func wireLatency(r *run, _ []*run) (*plot.Plot, vg.Length, vg.Length, error) {
	rows := sortedServer(r)
	if len(rows) == 0 {
		return nil, 0, 0, errors.New("the run has no server results")
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
	p := plot.New()
	p.Title.Text = "a2astore-server round trips on loopback (echo agent)"
	p.X.Label.Text = "backend / transport"
	p.Y.Label.Text = "latency, ms (log scale)"
	logAxes(p, false, true)
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
				return nil, 0, 0, err
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
		return nil, 0, 0, errors.New("no latencies")
	}
	p.NominalX(cats...)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Max *= 4
	return p, vg.Length(2+0.9*float64(len(cats))) * vg.Inch, 4.5 * vg.Inch, nil
}

// historyChart: the µs figures of figures marked Chart, at historyN, one
// point per run that has them (x = run, oldest first).
func historyChart(_ *run, runs []*run) (*plot.Plot, vg.Length, vg.Length, error) {
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
			lines = append(lines, f.Label, xys)
		}
	}
	p, err := linePlot("Tracked figures by run (store figures at n = 1e4)", "run (commit; mode when not full)", "µs (median; log scale)", false, lines, "no tracked figures in any run")
	if err != nil {
		return nil, 0, 0, err
	}
	var labels []string
	for _, r := range runs {
		labels = append(labels, r.Label())
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.5, float64(len(runs))-0.5
	p.Y.Max = math.Max(p.Y.Max*30, p.Y.Min*10)
	return p, vg.Length(math.Max(7, 1.2*float64(len(runs)))) * vg.Inch, 5 * vg.Inch, nil
}
