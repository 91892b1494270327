package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScaleSection (make results-check): from the committed fixture scale
// run (results/testdata/runs-scale), the page's section "scale" holds a row
// per operation and backend, the footprint table and a legible chart per
// operation; without a recorded scale run it says so and writes no chart.
func TestScaleSection(t *testing.T) {
	out := copyPage(t)
	written, err := generatePage("../../results/testdata/runs", out)
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	body := section(t, page, "scale")
	for _, o := range scaleOps {
		if !strings.Contains(strings.Join(written, " "), o.file) {
			t.Errorf("%s was not written", o.file)
			continue
		}
		requireLegible(t, filepath.Join(out, o.file))
		if !strings.Contains(body, "]("+o.file+")") {
			t.Errorf("the section does not show %s", o.file)
		}
	}
	for _, want := range []string{
		"| Light page of 50 from a random cursor | mem |", "| Light page of 50 from a random cursor | pg |",
		"| Replace (moves the task to the head) | pebble |", "| pg | 1e4 |", "| 1e3 | 1e4 |",
		"≤ 1.5× its floor at n", "≤ 1.25× its smallest n", "fixture",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("section scale lacks %q:\n%s", want, body)
		}
	}

	// No runs-scale beside the runs: the section says none, no chart.
	runs := filepath.Join(t.TempDir(), "runs")
	abs, err := filepath.Abs("../../results/testdata/runs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, runs); err != nil {
		t.Fatal(err)
	}
	out = copyPage(t)
	written, err = generatePage(runs, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range written {
		if strings.HasPrefix(f, "scale-") {
			t.Errorf("%s written without a scale run", f)
		}
	}
	if page, err = os.ReadFile(filepath.Join(out, "README.md")); err != nil {
		t.Fatal(err)
	}
	if body := section(t, page, "scale"); !strings.Contains(body, "No scale run is recorded yet") {
		t.Errorf("section scale without a run:\n%s", body)
	}
}

// TestHistoryChartReads (make results-check): the history chart of 40
// runs is a picture, not a strip — at most 14 in wide and at least half as
// tall as wide — and its "Good:" line lies at least 6 pt below every other
// text (the first run's slanted label ran into it).
func TestHistoryChartReads(t *testing.T) {
	var runs []*run
	for i := range 40 {
		line := fmt.Sprintf("Benchmark%s-2 1 %d ns/op\n", fmt.Sprintf(fmt.Sprintf(lightPage, "mem"), historyN), 5000+100*i)
		d, err := read(strings.NewReader(line), "fake")
		if err != nil {
			t.Fatal(err)
		}
		mode := "full"
		if i == 0 {
			mode = "imported"
		}
		runs = append(runs, &run{Meta: runMeta{Commit: fmt.Sprintf("%012x", 0xe87b0fa72768+i), Mode: mode}, Bench: d})
	}
	ch, err := historyChart(nil, runs)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "history.svg")
	if err := saveChart(ch, filepath.Dir(file), "history.svg", false); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	texts, _, w, h, err := svgItems(f)
	if err != nil {
		t.Fatal(err)
	}
	if w > 14*72 || h < w/2 {
		t.Errorf("history chart is %.0f × %.0f pt for %d runs: want at most %d pt wide and at least half as tall", w, h, len(runs), 14*72)
	}
	var good *svgText
	for i := range texts {
		if strings.HasPrefix(texts[i].s, "Good:") {
			good = &texts[i]
		}
	}
	if good == nil {
		t.Fatal("no Good: line")
	}
	_, top, _, _ := good.bounds()
	for _, tx := range texts {
		if _, _, _, bottom := tx.bounds(); tx.s != good.s && bottom > top-6 {
			t.Errorf("%q ends at y %.1f, within 6 pt of the Good: line at %.1f", tx.s, bottom, top)
		}
	}
}

// TestScaleRowMarksFaults: a figure measured with more than scaleFaulty
// page faults an operation is marked, one with fewer or none is not.
func TestScaleRowMarksFaults(t *testing.T) {
	s := scaleSeries{backend: "pebble", at: map[int]float64{1000: 10, 10000: 12, 100000: 11},
		faults: map[int]float64{1000: 0.01, 10000: 0.4}}
	var b strings.Builder
	if !scaleRow(&b, "Light page", s, []int{1000, 10000, 100000}, false) {
		t.Errorf("a figure at 0.4 faults/op not reported as marked: %s", b.String())
	}
	if row := b.String(); !strings.Contains(row, "| 12.0 µs † |") || strings.Count(row, "†") != 1 {
		t.Errorf("want only the 1e4 figure marked: %s", row)
	}
	b.Reset()
	s.faults = nil
	if scaleRow(&b, "Light page", s, []int{1000, 10000, 100000}, false) || strings.Contains(b.String(), "†") {
		t.Errorf("a row without faults/op marked: %s", b.String())
	}
}
