// Command benchplot turns one file of a2astore benchmark results (as
// written by `make bench`) into SVG charts and a Markdown summary of
// medians and peer ratios, for results/README.md:
//
//	page-vs-n.svg       light page of 50 from a random cursor vs n, per backend (log-log)
//	depth-vs-latency.svg pg page at depth 0..90%: keyset token vs the old OFFSET scheme
//	writes-indexes.svg  pg Create and Replace with and without the two ordering indexes
//	peer-ratios.svg     cost ratios of each peer pair, same run
//	summary.md          the ratios and every benchmark's medians
//
// Results are read with golang.org/x/perf/benchfmt; medians come from
// benchmath. Charts are laid out and checked for legibility as layout.go
// and svgcheck.go describe.
//
// Usage:
//
//	benchplot [-o dir] results.txt
//	benchplot -runs results/runs [-o results]   # the page mode of make results (page.go)
package main

import (
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

func main() {
	out := flag.String("o", "results", "output directory")
	png := flag.Bool("png", false, "also write each chart as PNG (for a quick look)")
	runs := flag.String("runs", "", "page mode: read the recorded runs in this directory (results/runs), write the newest's charts and summary.md into -o and rewrite the generated sections of -o/README.md")
	flag.Parse()
	if *runs != "" {
		if flag.NArg() != 0 {
			fmt.Fprintln(os.Stderr, "usage: benchplot -runs results/runs [-o results]")
			os.Exit(2)
		}
		alsoPNG = *png
		files, err := generatePage(*runs, *out)
		if err != nil {
			fail(err)
		}
		fmt.Printf("benchplot: wrote %s in %s\n", strings.Join(files, ", "), *out)
		return
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: benchplot [-o dir] results.txt")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fail(err)
	}
	defer f.Close()
	d, err := read(f, flag.Arg(0))
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	for _, c := range []struct {
		file string
		make func(*data) (*chart, error)
	}{
		{"page-vs-n.svg", pageVsN},
		{"depth-vs-latency.svg", depthVsLatency},
		{"writes-indexes.svg", writesIndexes},
		{"peer-ratios.svg", peerRatios},
	} {
		ch, err := c.make(d)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchplot: %s: %v (skipped)\n", c.file, err)
			continue
		}
		if err := saveChart(ch, *out, c.file, *png); err != nil {
			fail(err)
		}
	}
	sf, err := os.Create(filepath.Join(*out, "summary.md"))
	if err != nil {
		fail(err)
	}
	summary(sf, d, filepath.Base(flag.Arg(0)))
	if err := sf.Close(); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchplot:", err)
	os.Exit(1)
}

// data holds every value by benchmark name (without the GOMAXPROCS
// suffix) and unit.
type data struct {
	vals  map[string]map[string][]float64
	names []string // in file order
}

var procs = regexp.MustCompile(`-\d+$`)

func read(r io.Reader, file string) (*data, error) {
	d := &data{vals: map[string]map[string][]float64{}}
	rd := benchfmt.NewReader(r, file)
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			return nil, rec
		case *benchfmt.Result:
			name := procs.ReplaceAllString(rec.Name.String(), "")
			if d.vals[name] == nil {
				d.vals[name] = map[string][]float64{}
				d.names = append(d.names, name)
			}
			for _, v := range rec.Values {
				d.vals[name][v.Unit] = append(d.vals[name][v.Unit], v.Value)
			}
		}
	}
	return d, rd.Err()
}

// median returns the median of name's unit values.
func (d *data) median(name, unit string) (float64, bool) {
	vs := d.vals[name][unit]
	if len(vs) == 0 {
		return 0, false
	}
	s := benchmath.NewSample(slices.Clone(vs), &benchmath.DefaultThresholds)
	return benchmath.AssumeNothing.Summary(s, 0.95).Center, true
}

// sizes returns the n values present for names built by name(n).
func (d *data) sizes(name func(n int) string) []int {
	var ns []int
	for _, n := range []int{1e3, 1e4, 1e5, 1e6} {
		if _, ok := d.median(name(n), "sec/op"); ok {
			ns = append(ns, n)
		}
	}
	return ns
}

func micros(sec float64) float64 { return sec * 1e6 }

func pageName(backend, impl string) func(n int) string {
	return func(n int) string {
		s := fmt.Sprintf("Store/backend=%s/op=page/n=%d/page=50/proj=light", backend, n)
		if impl != "" {
			s += "/impl=" + impl
		}
		return s
	}
}

func pageVsN(d *data) (*chart, error) {
	var lines []any
	for _, s := range []struct{ label, backend, impl string }{
		{"mem (memstore)", "mem", ""},
		{"pebble (disk)", "pebble", ""},
		{"pg (PostgreSQL)", "pg", ""},
		{"floor: bare B-tree + copies", "mem", "btree"},
	} {
		name := pageName(s.backend, s.impl)
		var xys plotter.XYs
		for _, n := range d.sizes(name) {
			v, _ := d.median(name(n), "sec/op")
			xys = append(xys, plotter.XY{X: float64(n), Y: micros(v)})
		}
		if len(xys) > 0 {
			lines = append(lines, s.label, xys)
		}
	}
	p, err := linePlot("Light page of 50 from a random cursor, by store size", "tasks in the store, n (log scale)", "µs per page, median (log scale)", lines, "no op=page results")
	if err != nil {
		return nil, err
	}
	logAxis(&p.X, true)
	logAxis(&p.Y, false)
	return &chart{p, 9 * vg.Inch, 4.5 * vg.Inch, "flat lines (a page costs the same at n = 1e6 as at 1e3), and mem within 1.5× of the floor"}, nil
}

// linePlot is a line chart with points of lines (label, plotter.XYs
// pairs, as plotutil.AddLinePoints takes them); the caller sets its axes.
// Without lines it fails with the message none.
func linePlot(title, xLabel, yLabel string, lines []any, none string) (*plot.Plot, error) {
	if len(lines) == 0 {
		return nil, errors.New(none)
	}
	p := newPlot(title, xLabel, yLabel)
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	return p, nil
}

func depthName(n, depth int, scheme string) string {
	return fmt.Sprintf("Store/backend=pg/op=page-depth/n=%d/page=50/depth=%d/scheme=%s", n, depth, scheme)
}

func depthVsLatency(d *data) (*chart, error) {
	var lines []any
	depths := []int{0, 10, 50, 90}
	for _, scheme := range []string{"keyset", "offset"} {
		for _, n := range d.sizes(func(n int) string { return depthName(n, 0, scheme) }) {
			var xys plotter.XYs
			for _, depth := range depths {
				if v, ok := d.median(depthName(n, depth, scheme), "sec/op"); ok {
					xys = append(xys, plotter.XY{X: float64(depth), Y: micros(v)})
				}
			}
			lines = append(lines, fmt.Sprintf("%s, n = %s", scheme, short(n)), xys)
		}
	}
	p, err := linePlot("PostgreSQL page of 50 by depth: keyset token vs OFFSET", "depth of the page's start, % of the list", "µs per page, median (log scale)", lines, "no pg op=page-depth results")
	if err != nil {
		return nil, err
	}
	p.X.Tick.Marker = valueTicks(0, 10, 50, 90)
	logAxis(&p.Y, false)
	return &chart{p, 9 * vg.Inch, 4.5 * vg.Inch, "keyset lines flat and low at every depth and n; OFFSET's climb with depth and n"}, nil
}

func short(n int) string {
	e := int(math.Round(math.Log10(float64(n))))
	if int(math.Pow10(e)) == n {
		return "1e" + strconv.Itoa(e)
	}
	return strconv.Itoa(n)
}

func writesIndexes(d *data) (*chart, error) {
	p := newPlot("PostgreSQL writes with and without the two ordering indexes", "operation and tasks in the store (n)", "µs per write, median")
	var labels []string
	var with, without plotter.Values
	for _, op := range []string{"create", "replace"} {
		for _, n := range []int{1e3, 1e4, 1e5, 1e6} {
			base := fmt.Sprintf("Store/backend=pg/op=%s/n=%d", op, n)
			w, ok1 := d.median(base, "sec/op")
			wo, ok2 := d.median(base+"/indexes=none", "sec/op")
			if !ok1 || !ok2 {
				continue
			}
			labels = append(labels, fmt.Sprintf("%s %s", op, short(n)))
			with = append(with, micros(w))
			without = append(without, micros(wo))
		}
	}
	if len(labels) == 0 {
		return nil, fmt.Errorf("no pg indexes=none results")
	}
	width := vg.Points(18)
	for i, s := range []struct {
		label string
		vals  plotter.Values
	}{{"with both ordering indexes", with}, {"without (dropped)", without}} {
		b, err := plotter.NewBarChart(s.vals, width)
		if err != nil {
			return nil, err
		}
		b.Color = plotutil.Color(i)
		b.Offset = (vg.Length(i) - 0.5) * width
		p.Add(b)
		p.Legend.Add(s.label, b)
	}
	p.NominalX(labels...)
	p.Y.Tick.Marker = commaTicks{}
	p.Y.Max = 1.1 * math.Max(slices.Max(with), slices.Max(without)) // room above the tallest bar
	// An inch and a quarter per pair of bars: room for its label beside
	// the widest tick labels (at HEAD's figures an inch let "replace 1e3"
	// and "replace 1e4" overlap).
	w := vg.Length(math.Max(8, 3.2+1.25*float64(len(labels)))) * vg.Inch
	return &chart{p, w, 4.5 * vg.Inch, "the two bars of each pair level: the ordering indexes cost writes little (anchor: 1.3–1.4×)"}, nil
}

// ratio is one peer comparison: peer cost / a2astore cost, same run.
type ratio struct {
	label       string
	peer, store string // benchmark names
	target      string // the target, for the summary
}

// ratios lists the peer comparisons at the largest n present.
func ratios(d *data) []struct {
	ratio
	value float64
} {
	var out []struct {
		ratio
		value float64
	}
	largest := func(name func(n int) string) int {
		ns := d.sizes(name)
		if len(ns) == 0 {
			return 0
		}
		return ns[len(ns)-1]
	}
	add := func(r ratio) {
		p, ok1 := d.median(r.peer, "sec/op")
		s, ok2 := d.median(r.store, "sec/op")
		if ok1 && ok2 && s > 0 {
			out = append(out, struct {
				ratio
				value float64
			}{r, p / s})
		}
	}
	lf := func(n int) string {
		return fmt.Sprintf("Store/backend=mem/op=list-first/n=%d/page=50/impl=a2a-inmemory", n)
	}
	if n := largest(lf); n > 0 {
		add(ratio{fmt.Sprintf("a2a-go InMemory / memstore, first page + total, n=%s", short(n)),
			lf(n), fmt.Sprintf("Store/backend=mem/op=list-first/n=%d/page=50", n), "≥ 1000×"})
	}
	if n := largest(func(n int) string { return depthName(n, 50, "offset") }); n > 0 {
		for _, depth := range []int{10, 50, 90} {
			t := ""
			if depth == 50 {
				t = "≥ 1000× at n=1e6"
			}
			add(ratio{fmt.Sprintf("pg OFFSET / keyset, depth %d%%, n=%s", depth, short(n)),
				depthName(n, depth, "offset"), depthName(n, depth, "keyset"), t})
		}
	}
	for _, scheme := range []struct{ name, label string }{
		{"or-cursor", "OR-expanded cursor"},
		{"lookup", "boundary lookup + OR cursor (a2a-python shape)"},
	} {
		if n := largest(func(n int) string { return depthName(n, 50, scheme.name) }); n > 0 {
			add(ratio{fmt.Sprintf("pg %s / keyset, depth 50%%, n=%s", scheme.label, short(n)),
				depthName(n, 50, scheme.name), depthName(n, 50, "keyset"), ""})
		}
	}
	for _, be := range []string{"mem", "pg"} {
		ctx := func(n int) string {
			return fmt.Sprintf("Store/backend=%s/op=page-context/n=%d/page=50/impl=noctx", be, n)
		}
		if n := largest(ctx); n > 0 {
			add(ratio{fmt.Sprintf("%s without / with context index, context page, n=%s", be, short(n)),
				ctx(n), fmt.Sprintf("Store/backend=%s/op=page-context/n=%d/page=50", be, n), ""})
		}
	}
	for _, op := range []string{"replace", "create"} {
		name := func(n int) string { return fmt.Sprintf("Store/backend=pg/op=%s/n=%d/indexes=none", op, n) }
		if n := largest(name); n > 0 {
			// Inverted: the cost of keeping the indexes.
			add(ratio{fmt.Sprintf("pg %s with / without ordering indexes, n=%s", op, short(n)),
				fmt.Sprintf("Store/backend=pg/op=%s/n=%d", op, n), name(n), "anchor ≈ 1.3–1.4× (≈30% TPS loss)"})
		}
	}
	scan := func(n int) string { return fmt.Sprintf("Store/backend=pg/op=total/n=%d/filter=none/impl=scan", n) }
	if n := largest(scan); n > 0 {
		add(ratio{fmt.Sprintf("pg count(*) / counters, total with no filter, n=%s", short(n)),
			scan(n), fmt.Sprintf("Store/backend=pg/op=total/n=%d/filter=none", n), ""})
	}
	if n := largest(pageName("mem", "btree")); n > 0 {
		add(ratio{fmt.Sprintf("memstore light page / bare B-tree floor, n=%s", short(n)),
			pageName("mem", "")(n), pageName("mem", "btree")(n), "≤ 1.5×"})
	}
	return out
}

// peerRatios: one horizontal bar per ratio from 1× (log scale), its
// comparison written above it and its value at its end, so that no label
// has to share the width of the bars.
func peerRatios(d *data) (*chart, error) {
	rs := ratios(d)
	if len(rs) == 0 {
		return nil, fmt.Errorf("no peer results")
	}
	p := newPlot("Cost ratios within one run (medians)", "ratio, × (log scale)", "")
	var vals plotter.Values
	var names, values plotter.XYLabels
	lo, hi := 0.0, 0.0
	for i, r := range rs {
		v := math.Log10(r.value)
		lo, hi = math.Min(lo, v), math.Max(hi, v)
		vals = append(vals, v)
		names.XYs = append(names.XYs, plotter.XY{Y: float64(i)})
		names.Labels = append(names.Labels, r.label)
		values.XYs = append(values.XYs, plotter.XY{X: math.Max(v, 0), Y: float64(i)})
		values.Labels = append(values.Labels, formatRatio(r.value)+"×")
	}
	thick := vg.Points(12)
	bars, err := plotter.NewBarChart(vals, thick)
	if err != nil {
		return nil, err
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{R: 60, G: 110, B: 180, A: 255}
	lo, hi = math.Floor(lo), math.Ceil(hi)
	for i := range names.XYs {
		names.XYs[i].X = lo
	}
	above, err := plotter.NewLabels(names)
	if err != nil {
		return nil, err
	}
	above.Offset = vg.Point{Y: thick/2 + 2}
	atEnd, err := plotter.NewLabels(values)
	if err != nil {
		return nil, err
	}
	atEnd.Offset = vg.Point{X: 4}
	for i := range atEnd.TextStyle {
		atEnd.TextStyle[i].YAlign = text.YCenter
	}
	p.Add(bars, above, atEnd)
	p.HideY()
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		ticks = append(ticks, plot.Tick{Value: e, Label: tickLabel(decimal(1, int(e)), 1, int(e), false) + "×"})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = lo-0.15, hi // the first tick's label inside the picture (no y axis to its left)
	good := "long bars for the alternatives a2astore avoids; about 1× for its indexes' cost and against the floor"
	return &chart{p, 10 * vg.Inch, vg.Length(1.4+0.42*float64(len(rs))) * vg.Inch, good}, nil
}

// summary writes the ratios and every benchmark's medians as Markdown.
func summary(w io.Writer, d *data, source string) {
	fmt.Fprintf(w, "# Summary of %s\n\nGenerated by `go run ./cmd/benchplot`. Medians over the runs (benchmath); ratios are peer / a2astore within this one run.\n\n", source)
	fmt.Fprintln(w, "## Peer ratios\n\n| comparison | ratio | target |\n|---|---:|---|")
	for _, r := range ratios(d) {
		fmt.Fprintf(w, "| %s | %s× | %s |\n", r.label, formatRatio(r.value), r.target)
	}
	fmt.Fprintln(w, "\n## All benchmarks (medians)\n\n| benchmark | µs/op | examined/page | counted/op | B/op | allocs/op | bytes/task | runs |\n|---|---:|---:|---:|---:|---:|---:|---:|")
	cell := func(name, unit string, scale float64) string {
		v, ok := d.median(name, unit)
		if !ok {
			return ""
		}
		return strconv.FormatFloat(v*scale, 'g', 4, 64)
	}
	for _, name := range d.names {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %d |\n", strings.TrimPrefix(name, "Store/"),
			cell(name, "sec/op", 1e6), cell(name, "examined/page", 1), cell(name, "counted/op", 1),
			cell(name, "B/op", 1), cell(name, "allocs/op", 1), cell(name, "bytes/task", 1), len(d.vals[name]["sec/op"]))
	}
}

// formatRatio prints three significant digits without exponents.
func formatRatio(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
