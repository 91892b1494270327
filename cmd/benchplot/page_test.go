package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// copyPage copies results/README.md (the published page, prose and
// markers) into a temporary output directory.
func copyPage(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	b, err := os.ReadFile("../../results/README.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "README.md"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPageFromFixture (make results-check): the generator runs end to end
// on the tiny committed fixture run (results/testdata/runs) against the
// real page, fills every section, writes every chart, each legible (no text
// outside its picture, none over another or over a bar: checkSVG), and the
// page it writes shows no chart it did not write.
func TestPageFromFixture(t *testing.T) {
	out := copyPage(t)
	written, err := generatePage("../../results/testdata/runs", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range pageCharts {
		if !slices.Contains(written, c.file) {
			t.Errorf("%s was not written from the fixture", c.file)
			continue
		}
		svg, err := os.ReadFile(filepath.Join(out, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(svg, []byte("<?xml")) || !bytes.Contains(svg, []byte("<svg")) {
			t.Errorf("%s is not an SVG", c.file)
		}
		requireLegible(t, filepath.Join(out, c.file))
	}
	page, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sectionNames {
		body := section(t, page, name)
		if strings.TrimSpace(body) == "" {
			t.Errorf("section %s is empty", name)
		}
	}
	// Figures the fixture holds show up where they belong.
	for name, want := range map[string][]string{
		"headline": {"fixture mode", "mem: light page of 50", "| 1e4 |", "server CPU per SendMessage", "at 1e6 tasks (default GOGC) |  | 7.25 % | ≤ 10 %"},
		"server":   {"| mem | SendMessage | jsonrpc |", "| mem | ListTasks | grpc |", "| pg | SendMessage | jsonrpc |", "PostgreSQL CPU"},
		"cpu": {"**a2astore mem, SendMessage** (jsonrpc)", "**a2astore mem, ListTasks** (jsonrpc)", "| encoding |", "| runtime/GC |",
			"| SendMessage | jsonrpc | a2a-go InMemory |", "| ListTasks | jsonrpc | a2astore mem |"},
		"loadgen":   {"| mem |", "| pebble |"},
		"retention": {"| mem | 1e3 | 2,499,185 | 0.2 | 3.55 | 500 |", "| pebble | 1e3 | 3.42 | 3.04 | 4.61 | 3.65 | 1,000 |"},
		"history":   {"e87b0fa (imported)", "(fixture)"},
		"charts":    {"![history](history.svg)", "![wire-latency](wire-latency.svg)", "![lifecycle](lifecycle.svg)"},
	} {
		body := section(t, page, name)
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("section %s lacks %q:\n%s", name, w, body)
			}
		}
	}
	checkOwnerShares(t, section(t, page, "cpu"), 2)
	// The PostgreSQL cluster's CPU is shown for pg rows only.
	for _, line := range strings.Split(section(t, page, "server"), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 12 || (cells[1] != " pg " && cells[1] != " mem ") {
			continue
		}
		if hasDB := strings.TrimSpace(cells[10]) != "—"; hasDB != (cells[1] == " pg ") {
			t.Errorf("PostgreSQL CPU cell %q in row %s", cells[10], line)
		}
	}
	// A second generation over its own output changes nothing.
	if _, err := generatePage("../../results/testdata/runs", out); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(page, again) {
		t.Error("regenerating the page changed it")
	}
}

func section(t *testing.T, page []byte, name string) string {
	t.Helper()
	begin := "<!-- BEGIN generated:" + name + " -->\n"
	end := "<!-- END generated:" + name + " -->\n"
	_, rest, ok := strings.Cut(string(page), begin)
	if !ok {
		t.Fatalf("no section %s", name)
	}
	body, _, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatalf("section %s is not closed", name)
	}
	return body
}

// TestCommittedPageIsCurrent: results/README.md and its charts are what the
// generator makes of the committed runs (results/runs), so a new run
// committed without regenerating the page, or a hand edit inside a
// generated section, fails.
func TestCommittedPageIsCurrent(t *testing.T) {
	out := copyPage(t)
	// Links on the page are relative to results/: generate as if out were
	// results/ by linking the runs (and the raw files imported runs name) in.
	for _, dir := range []string{"runs", "raw", "runs-scale"} {
		abs, err := filepath.Abs("../../results/" + dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); dir == "runs-scale" && os.IsNotExist(err) {
			continue // no scale run recorded yet
		}
		if err := os.Symlink(abs, filepath.Join(out, dir)); err != nil {
			t.Fatal(err)
		}
	}
	written, err := generatePage(filepath.Join(out, "runs"), out)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(written, "README.md") {
		if f == "README.md" || strings.HasSuffix(f, ".svg") {
			got, err := os.ReadFile(filepath.Join(out, f))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile("../../results/" + f)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("results/%s is not what `make results-page` generates from results/runs: run it and commit the result", f)
			}
		}
	}
}

// TestCommittedChartsLegible (make results-check): every chart committed in
// results/ has its texts inside the picture, none over another or over a
// bar (checkSVG, with text extents estimated from the font size).
func TestCommittedChartsLegible(t *testing.T) {
	files, err := filepath.Glob("../../results/*.svg")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no charts in results/")
	}
	requireLegible(t, files...)
}

// TestCheckPageCatches: each guard of checkPage and replaceSections fails
// the page it exists for.
func TestCheckPageCatches(t *testing.T) {
	sections := map[string]string{"headline": "| figure | 1 |\n"}
	good := "# p\n\n<!-- BEGIN generated:headline -->\nold\n<!-- END generated:headline -->\n\n![c](c.svg)\n"
	page, err := replaceSections([]byte(good), sections)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPage(page, []string{"c.svg"}); err != nil {
		t.Fatalf("a generated page fails the check: %v", err)
	}
	for _, tc := range []struct {
		name, page string
		written    []string
		want       string
	}{
		{"hand-typed table", good + "\n| speed | 12 µs |\n", []string{"c.svg"}, "outside the generated sections holds a figure"},
		{"chart not generated", good + "\n![old](old.svg)\n", []string{"c.svg"}, "did not write"},
		{"chart generation skipped", good, nil, "did not write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := replaceSections([]byte(tc.page), sections)
			if err != nil {
				t.Fatal(err)
			}
			err = checkPage(page, tc.written)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("check: %v, want an error with %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, page, want string }{
		{"section missing", "# p\n", "missing"},
		{"unknown section", good + "<!-- BEGIN generated:x -->\n<!-- END generated:x -->\n", "unknown"},
		{"unclosed", "<!-- BEGIN generated:headline -->\nold\n", "not closed"},
		{"twice", good + good, "twice"},
		{"END first", "<!-- END generated:headline -->\n", "without its BEGIN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := replaceSections([]byte(tc.page), sections)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("replace: %v, want an error with %q", err, tc.want)
			}
		})
	}
	// Table-free prose and tables without digits pass.
	if err := checkPage([]byte("| a | b |\n|---|---|\nprose with 12 µs\n"), nil); err != nil {
		t.Fatal(err)
	}
}

// TestLifecycleChart: pgstore lifecycle benchmarks, when present, are drawn
// as lifecycles/s of each path (1e6 / us/lc-<impl>) by writers, and only
// they.
func TestLifecycleChart(t *testing.T) {
	in := "goos: linux\npkg: x\n" +
		"BenchmarkLifecycle/backend=pg/op=lifecycle/n=20000/writers=1-2 100 3000000 ns/op 1000 us/lc-pgstore 800 us/lc-plain 500 us/lc-nocounts\n" +
		"BenchmarkLifecycle/backend=pg/op=lifecycle/n=20000/writers=4-2 100 1000000 ns/op 400 us/lc-pgstore 250 us/lc-plain 200 us/lc-nocounts\n" +
		"BenchmarkCountWrites/backend=pg/op=replace/n=100000/writers=16/counts=none-2 100 300000 ns/op\n"
	d, err := read(strings.NewReader(in), "x")
	if err != nil {
		t.Fatal(err)
	}
	b := lifecycleSeries(d)
	want := map[string]plotter.XYs{
		"pgstore":                            {{X: 1, Y: 1000}, {X: 4, Y: 2500}},
		"pgstore, counter triggers disabled": {{X: 1, Y: 2000}, {X: 4, Y: 5000}},
		"plain SQL into a copy of the table": {{X: 1, Y: 1250}, {X: 4, Y: 4000}},
	}
	if !reflect.DeepEqual(b.xys, want) || !slices.Equal(b.writers, []float64{1, 4}) {
		t.Errorf("lines %v (writers %v), want %v", b.xys, b.writers, want)
	}
	ch, err := lifecycle(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := saveChart(ch, t.TempDir(), "lifecycle.svg", false); err != nil {
		t.Error(err)
	}
	if _, err := lifecycle(&data{vals: map[string]map[string][]float64{}}); err == nil {
		t.Error("a chart with no lifecycle results")
	}
}

// TestServerCPU: CPU per request comes from the tick file and the run's
// completed requests; a malformed tick file is an error, not a blank.
func TestServerCPU(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "x.cpu")
	for _, tc := range []struct {
		text string
		sec  float64
		ok   bool
		bad  bool
	}{{"100 350 100", 2.5, true, false}, {"1 2", 0, false, true}, {"5 4 100", 0, false, true}, {"1 2 0", 0, false, true}} {
		if err := os.WriteFile(f, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		sec, ok, err := readCPU(f)
		if (err != nil) != tc.bad || ok != tc.ok || sec != tc.sec {
			t.Errorf("%q: %v %v %v", tc.text, sec, ok, err)
		}
	}
	if _, ok, err := readCPU(filepath.Join(dir, "none.cpu")); ok || err != nil {
		t.Errorf("a missing tick file: ok=%v err=%v, want no figure and no error", ok, err)
	}
}

// TestReadRunsSkipsPartial: a run in progress (<id>.partial) is left out of
// the history; any other directory without run.json is an error, and so is
// a run.json without its required fields.
func TestReadRunsSkipsPartial(t *testing.T) {
	dir := t.TempDir()
	mk := func(name, runJSON string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if runJSON != "" {
			if err := os.WriteFile(filepath.Join(dir, name, "run.json"), []byte(runJSON), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("a", `{"commit": "abc", "mode": "quick", "started": "2026-12-01T10:00:00Z"}`)
	mk("b.partial", "")
	runs, err := readRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != "a" {
		t.Fatalf("runs %v, want only a", runs)
	}
	mk("c", "")
	if _, err := readRuns(dir); err == nil {
		t.Fatal("a run without run.json was read")
	}
	if err := os.RemoveAll(filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	mk("d", `{"commit": "abc"}`)
	if _, err := readRuns(dir); err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("a run.json without mode and start: %v", err)
	}
}

// checkOwnerShares: the cpu section has want owner tables, and each
// table's CPU shares add up to 100 %.
func checkOwnerShares(t *testing.T, body string, want int) {
	t.Helper()
	tables := 0
	for _, table := range strings.Split(body, "| owner | CPU share |")[1:] {
		tables++
		sum := 0.0
		for _, line := range strings.Split(table, "\n")[2:] {
			cells := strings.Split(line, "|")
			if len(cells) < 5 {
				break
			}
			v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(cells[2]), " %"), 64)
			if err != nil {
				t.Fatalf("share cell %q: %v", cells[2], err)
			}
			sum += v
		}
		if sum < 99.5 || sum > 100.5 {
			t.Errorf("owner shares add up to %.1f %%:\n%s", sum, table)
		}
	}
	if tables != want {
		t.Errorf("%d owner tables, want %d:\n%s", tables, want, body)
	}
}

// TestCPUSectionWithoutProfiles: a run recorded before profiles were
// taken (and without InMemory rows) gets a sentence, not a failure.
func TestCPUSectionWithoutProfiles(t *testing.T) {
	got := cpuSection(&run{Server: []serverRun{{Backend: "mem", Transport: "jsonrpc", Workload: "send-only"}}}, "runs/x")
	for _, want := range []string{"no CPU profiles", "no rows of the server on a2a-go's InMemory"} {
		if !strings.Contains(got, want) {
			t.Errorf("section without profiles lacks %q:\n%s", want, got)
		}
	}
}

// TestPGTotalRatio: the totals-under-writers figures are the median page
// with its total over the median page without, at the n, writers and
// filter named, and absent without both.
func TestPGTotalRatio(t *testing.T) {
	const name = "BenchmarkTotalUnderWriters/backend=pg/op=first_page/n=100000/writers=%d/wake=on/filter=%s/total=%t-2 100 %d ns/op\n"
	in := "goos: linux\npkg: x\n" +
		fmt.Sprintf(name, 16, "none", false, 2000000) + fmt.Sprintf(name, 16, "none", true, 3000000) +
		fmt.Sprintf(name, 16, "none", false, 2000000) + fmt.Sprintf(name, 16, "none", true, 2000000) +
		fmt.Sprintf(name, 16, "none", true, 2600000) +
		fmt.Sprintf(name, 16, "state", true, 9000000) + fmt.Sprintf(name, 4, "none", true, 1000000)
	d, err := read(strings.NewReader(in), "x")
	if err != nil {
		t.Fatal(err)
	}
	r := &run{PG: d}
	if v, ok := pgTotalRatio(16, "none")(r, 100000); !ok || v != 1.3 {
		t.Errorf("16 writers, no filter: %v %v, want 1.3 (medians 2.6 / 2 ms)", v, ok)
	}
	for _, c := range []struct {
		k      int
		filter string
		n      int
	}{{16, "state", 100000}, {4, "none", 100000}, {16, "none", 10000}} {
		if v, ok := pgTotalRatio(c.k, c.filter)(r, c.n); ok {
			t.Errorf("%+v: %v without both samples", c, v)
		}
	}
	if _, ok := pgTotalRatio(16, "none")(&run{}, 100000); ok {
		t.Error("a figure from a run without pgstore.txt")
	}
	// A run with the side-by-side pair: its median ratio, not the
	// separate runs' ratio.
	const pair = "BenchmarkTotalUnderWriters/backend=pg/op=first_page/n=100000/writers=16/wake=on/filter=none/total=pair-2 100 %d ns/op %v ratio\n"
	d, err = read(strings.NewReader(in+fmt.Sprintf(pair, 4000000, 1.1)+fmt.Sprintf(pair, 4000000, 0.9)+fmt.Sprintf(pair, 4000000, 1.05)), "x")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := pgTotalRatio(16, "none")(&run{PG: d}, 100000); !ok || v != 1.05 {
		t.Errorf("16 writers, no filter, with the pair: %v %v, want 1.05 (the pair's median ratio)", v, ok)
	}
}

// The lifecycle rows read BenchmarkLifecycle's median ratio for their
// writer count at the largest table size; the Pebble floor rows read
// BenchmarkReplaceFloor's from pebblestore.txt.
func TestLifecycleAndPebbleFloorRatios(t *testing.T) {
	const lc = "BenchmarkLifecycle/backend=pg/op=lifecycle/n=%d/writers=%d-2 100 1000 ns/op %v ratio\n"
	in := "goos: linux\npkg: x\n" + fmt.Sprintf(lc, 20000, 4, 1.5) + fmt.Sprintf(lc, 20000, 4, 1.3) + fmt.Sprintf(lc, 20000, 4, 1.4) +
		fmt.Sprintf(lc, 100000, 16, 1.9) + fmt.Sprintf(lc, 20000, 16, 1.2)
	d, err := read(strings.NewReader(in), "x")
	if err != nil {
		t.Fatal(err)
	}
	r := &run{PG: d}
	for _, c := range []struct {
		k    int
		want float64
		ok   bool
	}{{4, 1.4, true}, {16, 1.9, true}, {1, 0, false}} {
		if v, ok := pgLifecycleRatio(c.k)(r, 0); ok != c.ok || v != c.want {
			t.Errorf("%d writers: %v %v, want %v %v", c.k, v, ok, c.want, c.ok)
		}
	}
	const floor = "BenchmarkReplaceFloor-2 20000 50000 ns/op %v ratio %v ratio-keys\n"
	d, err = read(strings.NewReader("goos: linux\npkg: x\n"+fmt.Sprintf(floor, 2.5, 1.1)+fmt.Sprintf(floor, 2.2, 0.9)+fmt.Sprintf(floor, 2.8, 1.2)), "x")
	if err != nil {
		t.Fatal(err)
	}
	r = &run{Pebble: d}
	if v, ok := pebbleFloorRatio("ratio")(r, 0); !ok || v != 2.5 {
		t.Errorf("ratio %v %v, want 2.5", v, ok)
	}
	if v, ok := pebbleFloorRatio("ratio-keys")(r, 0); !ok || v != 1.1 {
		t.Errorf("ratio-keys %v %v, want 1.1", v, ok)
	}
	if _, ok := pebbleFloorRatio("ratio")(&run{PG: d}, 0); ok {
		t.Error("a floor figure from a run without pebblestore.txt")
	}
}

// A run is loaded when the machine was busy as it started; the load at
// its end, which its own last steps raise, does not mark it.
func TestRunLoaded(t *testing.T) {
	for _, c := range []struct {
		before, after string
		want          bool
	}{
		{"0.45 2.40 1.98", "4.75 4.01 3.21", false},
		{"2.50 1.00 1.00", "0.10 0.10 0.10", true},
		{"2.00 9.00 9.00", "9.00 9.00 9.00", false}, // at the core count, not above
		{"", "9.00 9.00 9.00", false},
	} {
		r := &run{Meta: runMeta{LoadBefore: c.before, LoadAfter: c.after, CPUs: 2}}
		if got := r.Loaded(); got != c.want {
			t.Errorf("before %q, after %q: loaded %v, want %v", c.before, c.after, got, c.want)
		}
	}
}
