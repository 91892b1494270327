package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// Limits are the gate's thresholds.
type Limits struct {
	// Geomean is the largest accepted rise of the geometric mean over all
	// tracked benchmarks (0.10 = +10%), when the U test on the per-run
	// geomeans also finds the difference significant.
	Geomean float64
	// Single is the largest accepted rise of one benchmark's median, when
	// the Mann-Whitney U test also finds the difference significant.
	Single float64
	// Alpha is the significance level of that test.
	Alpha float64
	// Unit is the measurement compared (benchfmt's tidied unit).
	Unit string
	// Match, if set, keeps only benchmarks whose full name matches.
	Match *regexp.Regexp
}

// Row is one benchmark's comparison.
type Row struct {
	Name       string
	Base, Head float64 // medians
	Ratio      float64 // Head / Base
	P          float64 // U-test p-value
	N1, N2     int
	Failed     bool // beyond Single and significant
}

// Verdict is the outcome of a comparison.
type Verdict struct {
	Rows     []Row
	Geomean  float64 // head/base ratio of the medians of the per-run geomeans
	BaseRuns []float64
	HeadRuns []float64 // the per-run geomeans (value / base median)
	GeomeanP float64   // U-test p-value of the per-run geomeans
	Failed   bool
	Reasons  []string
}

// samples reads benchmark results in the Go benchmark format and returns
// the values of unit by full benchmark name.
func samples(r io.Reader, fileName, unit string, match *regexp.Regexp) (map[string][]float64, error) {
	out := map[string][]float64{}
	rd := benchfmt.NewReader(r, fileName)
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			return nil, rec
		case *benchfmt.Result:
			name := rec.Name.String()
			if match != nil && !match.MatchString(name) {
				continue
			}
			if v, ok := rec.Value(unit); ok {
				out[name] = append(out[name], v)
			}
		}
	}
	return out, rd.Err()
}

// Compare reads base and head results and judges head against base.
//
// The k-th result of a benchmark in a file is taken as its k-th run (make
// bench-compare runs each binary with -count 1, alternately). Besides each
// benchmark's own comparison, every run gets one composite figure: the
// geometric mean over the benchmarks of value / base median. Those
// per-run geomeans form two samples compared like any benchmark, so a
// geomean regression must be both large and significant — a burst of load
// from other processes during one run moves one sample, not the verdict.
func Compare(base, head io.Reader, lim Limits) (*Verdict, error) {
	b, err := samples(base, "base", lim.Unit, lim.Match)
	if err != nil {
		return nil, err
	}
	h, err := samples(head, "head", lim.Unit, lim.Match)
	if err != nil {
		return nil, err
	}
	th := benchmath.DefaultThresholds
	th.CompareAlpha = lim.Alpha
	v := &Verdict{}
	for name, bv := range b {
		hv, ok := h[name]
		if !ok {
			continue
		}
		bs := benchmath.NewSample(slices.Clone(bv), &th)
		hs := benchmath.NewSample(slices.Clone(hv), &th)
		bm := benchmath.AssumeNothing.Summary(bs, 0.95).Center
		hm := benchmath.AssumeNothing.Summary(hs, 0.95).Center
		if bm <= 0 || hm <= 0 {
			continue
		}
		cmp := benchmath.AssumeNothing.Compare(bs, hs)
		row := Row{Name: name, Base: bm, Head: hm, Ratio: hm / bm, P: cmp.P, N1: cmp.N1, N2: cmp.N2}
		row.Failed = row.Ratio > 1+lim.Single && cmp.P < lim.Alpha
		if row.Failed {
			v.Failed = true
			v.Reasons = append(v.Reasons, fmt.Sprintf("%s: %+.1f%% (p=%.3f)", name, (row.Ratio-1)*100, cmp.P))
		}
		v.Rows = append(v.Rows, row)
	}
	if len(v.Rows) == 0 {
		return nil, fmt.Errorf("benchgate: no benchmark with unit %s in both base and head", lim.Unit)
	}
	slices.SortFunc(v.Rows, func(x, y Row) int { return strings.Compare(x.Name, y.Name) })

	bg, hg := runGeomeans(b, v.Rows), runGeomeans(h, v.Rows)
	if len(bg) == 0 || len(hg) == 0 {
		return nil, fmt.Errorf("benchgate: no run holds every compared benchmark")
	}
	v.BaseRuns, v.HeadRuns = slices.Clone(bg), slices.Clone(hg)
	bs, hs := benchmath.NewSample(bg, &th), benchmath.NewSample(hg, &th)
	v.Geomean = benchmath.AssumeNothing.Summary(hs, 0.95).Center / benchmath.AssumeNothing.Summary(bs, 0.95).Center
	cmp := benchmath.AssumeNothing.Compare(bs, hs)
	v.GeomeanP = cmp.P
	if v.Geomean > 1+lim.Geomean && cmp.P < lim.Alpha {
		v.Failed = true
		v.Reasons = append(v.Reasons, fmt.Sprintf("geomean %+.1f%% over %d benchmarks (p=%.3f) exceeds %+.1f%%",
			(v.Geomean-1)*100, len(v.Rows), cmp.P, lim.Geomean*100))
	}
	return v, nil
}

// runGeomeans returns, for each run k holding every compared benchmark,
// the geometric mean over the benchmarks of value_k / base median.
func runGeomeans(vals map[string][]float64, rows []Row) []float64 {
	runs := -1
	for _, r := range rows {
		if runs < 0 || len(vals[r.Name]) < runs {
			runs = len(vals[r.Name])
		}
	}
	out := make([]float64, 0, runs)
	for k := range runs {
		sum := 0.0
		for _, r := range rows {
			sum += math.Log(vals[r.Name][k] / r.Base)
		}
		out = append(out, math.Exp(sum/float64(len(rows))))
	}
	return out
}

// Print writes the verdict as a table.
func (v *Verdict) Print(w io.Writer, lim Limits) {
	width := 0
	for _, r := range v.Rows {
		width = max(width, len(r.Name))
	}
	fmt.Fprintf(w, "%-*s  %12s  %12s  %8s  %6s\n", width, "benchmark ("+lim.Unit+", medians)", "base", "head", "delta", "p")
	for _, r := range v.Rows {
		mark := ""
		if r.Failed {
			mark = "  REGRESSION"
		}
		fmt.Fprintf(w, "%-*s  %12.4g  %12.4g  %+7.1f%%  %6.3f%s\n", width, r.Name, r.Base, r.Head, (r.Ratio-1)*100, r.P, mark)
	}
	fmt.Fprintf(w, "geomean %+.1f%% (p=%.3f) over %d benchmarks (limits, each at p<%.2f: geomean %+.0f%%, single %+.0f%%)\n",
		(v.Geomean-1)*100, v.GeomeanP, len(v.Rows), lim.Alpha, lim.Geomean*100, lim.Single*100)
	runs := func(xs []float64) string {
		var parts []string
		for _, x := range xs {
			parts = append(parts, fmt.Sprintf("%.3f", x))
		}
		return strings.Join(parts, " ")
	}
	fmt.Fprintf(w, "per-run geomeans (value / base median): base %s; head %s\n", runs(v.BaseRuns), runs(v.HeadRuns))
	if v.Failed {
		fmt.Fprintln(w, "FAIL:")
		for _, r := range v.Reasons {
			fmt.Fprintln(w, "  "+r)
		}
	} else {
		fmt.Fprintln(w, "PASS")
	}
}

func openBoth(basePath, headPath string) (io.ReadCloser, io.ReadCloser, error) {
	b, err := os.Open(basePath)
	if err != nil {
		return nil, nil, err
	}
	h, err := os.Open(headPath)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return b, h, nil
}
