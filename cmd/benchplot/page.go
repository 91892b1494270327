package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The page mode (`benchplot -runs results/runs -o results`, run by
// `make results`): reads every recorded run, writes the charts and
// summary.md of the newest, and rewrites each generated section of
// <o>/README.md — the text between
//
//	<!-- BEGIN generated:NAME -->
//	<!-- END generated:NAME -->
//
// — from the runs. Hand-written prose stays; then the page is checked: every
// chart it links must be one this generation wrote, every section must be
// present, and no table outside a generated section may carry a figure (a
// digit), so no figure on the page is typed by hand. Every chart written is
// checked to be legible (saveChart, checkSVG).

// chartFile is a chart of the page and what draws it.
type chartFile struct {
	file, caption string
	make          func(newest *run, runs []*run) (*chart, error)
}

func benchChart(f func(*data) (*chart, error)) func(*run, []*run) (*chart, error) {
	return func(r *run, _ []*run) (*chart, error) {
		if r.Bench == nil {
			return nil, errors.New("the run has no bench.txt")
		}
		return f(r.Bench)
	}
}

// pageCharts, in page order.
var pageCharts = []chartFile{
	{"page-vs-n.svg", "Page cost vs n, per backend, with the bare B-tree floor (log–log)", benchChart(pageVsN)},
	{"peer-ratios.svg", "Every peer pair of the run as a ratio (log scale)", benchChart(peerRatios)},
	{"depth-vs-latency.svg", "PostgreSQL page by depth: keyset token vs OFFSET, at each n", benchChart(depthVsLatency)},
	{"writes-indexes.svg", "PostgreSQL Create and Replace with and without the two ordering indexes", benchChart(writesIndexes)},
	{"writes-counters.svg", "PostgreSQL writes/s with the counters (hot: one row per count, as installed; sharded: 16 rows, the release before) and without, by writers", pgChart(writesCounters)},
	{"lifecycle.svg", "PostgreSQL task lifecycles/s by writers: pgstore, pgstore without its counter triggers, and plain SQL (BenchmarkLifecycle)", pgChart(lifecycle)},
	{"wire-latency.svg", "a2astore-server round-trip latency percentiles per backend and transport", wireLatency},
	{"history.svg", "Tracked figures over the recorded runs (n = 1e4 for store figures)", historyChart},
}

func pgChart(f func(*data) (*chart, error)) func(*run, []*run) (*chart, error) {
	return func(r *run, _ []*run) (*chart, error) {
		if r.PG == nil {
			return nil, errors.New("the run has no pgstore.txt")
		}
		return f(r.PG)
	}
}

// saveChart writes ch as dir/file (an SVG), and beside it as PNG when
// png; it fails when the SVG has a text outside the picture or two
// texts, or a text and a bar, over each other (checkSVG).
func saveChart(ch *chart, dir, file string, png bool) error {
	path := filepath.Join(dir, file)
	if err := ch.save(path); err != nil {
		return err
	}
	if png {
		if err := ch.save(strings.TrimSuffix(path, ".svg") + ".png"); err != nil {
			return err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	problems, err := checkSVG(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s is not legible:\n\t%s", path, strings.Join(problems, "\n\t"))
	}
	return nil
}

// alsoPNG (-png) writes each chart as PNG beside the SVG too, for a quick
// look; the page links only the SVGs.
var alsoPNG bool

// sectionNames are the generated sections every page must hold.
var sectionNames = []string{"headline", "run", "peers", "server", "cpu", "loadgen", "history", "charts", "scale"}

// generatePage writes everything of the page mode into out; it returns the
// files written (relative to out).
func generatePage(runsDir, out string) ([]string, error) {
	runs, err := readRuns(runsDir)
	if err != nil {
		return nil, err
	}
	newest := runs[len(runs)-1]
	rel := relDir(out, newest.Dir)
	var written []string
	var charts []chartFile
	for _, c := range pageCharts {
		ch, err := c.make(newest, runs)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchplot: %s: %v (not on the page)\n", c.file, err)
			continue
		}
		if err := saveChart(ch, out, c.file, alsoPNG); err != nil {
			return nil, err
		}
		written = append(written, c.file)
		charts = append(charts, c)
	}
	scaleRun, err := readScaleRun(runsDir)
	if err != nil {
		return nil, err
	}
	scaleText, scaleCharts, err := scaleSection(scaleRun, out)
	if err != nil {
		return nil, err
	}
	for _, c := range scaleCharts {
		written = append(written, c.file)
	}
	if newest.Bench != nil {
		var buf bytes.Buffer
		summary(&buf, newest.Bench, rel+"/bench.txt")
		if newest.PG != nil {
			pgSummary(&buf, newest.PG, rel+"/pgstore.txt")
		}
		if err := os.WriteFile(filepath.Join(out, "summary.md"), buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		written = append(written, "summary.md")
	}
	sections := map[string]string{
		"headline":  headlineSection(newest, rel),
		"run":       runSection(newest, rel),
		"peers":     peersSection(newest),
		"server":    serverSection(newest),
		"cpu":       cpuSection(newest, rel),
		"loadgen":   loadgenSection(newest),
		"retention": retentionSection(newest),
		"history":   historySection(runs, out),
		"charts":    chartsSection(charts),
		"scale":     scaleText,
	}
	readme := filepath.Join(out, "README.md")
	page, err := os.ReadFile(readme)
	if err != nil {
		return nil, err
	}
	page, err = replaceSections(page, sections)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", readme, err)
	}
	if err := checkPage(page, written); err != nil {
		return nil, fmt.Errorf("%s: %w", readme, err)
	}
	if err := os.WriteFile(readme, page, 0o644); err != nil {
		return nil, err
	}
	return append(written, "README.md"), nil
}

var markerRE = regexp.MustCompile(`(?m)^<!-- (BEGIN|END) generated:([a-z0-9-]+) -->\n`)

// replaceSections rewrites each generated section of page with its text
// from sections; every name in sections must appear exactly once, and no
// other section may.
func replaceSections(page []byte, sections map[string]string) ([]byte, error) {
	var out bytes.Buffer
	seen := map[string]bool{}
	rest := page
	for {
		m := markerRE.FindSubmatchIndex(rest)
		if m == nil {
			out.Write(rest)
			break
		}
		kind, name := string(rest[m[2]:m[3]]), string(rest[m[4]:m[5]])
		if kind != "BEGIN" {
			return nil, fmt.Errorf("END generated:%s without its BEGIN", name)
		}
		text, ok := sections[name]
		if !ok {
			return nil, fmt.Errorf("unknown generated section %q", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("generated section %q appears twice", name)
		}
		seen[name] = true
		out.Write(rest[:m[1]])
		rest = rest[m[1]:]
		end := markerRE.FindSubmatchIndex(rest)
		if end == nil || string(rest[end[2]:end[3]]) != "END" || string(rest[end[4]:end[5]]) != name {
			return nil, fmt.Errorf("generated section %q is not closed by its END marker", name)
		}
		out.WriteString(text)
		out.Write(rest[end[0]:end[1]])
		rest = rest[end[1]:]
	}
	for _, name := range slices.Sorted(maps.Keys(sections)) {
		if !seen[name] {
			return nil, fmt.Errorf("generated section %q is missing (add its BEGIN/END markers)", name)
		}
	}
	return out.Bytes(), nil
}

var (
	imageRE = regexp.MustCompile(`!\[[^\]]*\]\(([^)\s]+)\)`)
	digitRE = regexp.MustCompile(`[0-9]`)
)

// checkPage fails when a chart the page shows was not written by this
// generation, or a table outside the generated sections holds a figure.
func checkPage(page []byte, written []string) error {
	var errs []error
	for _, m := range imageRE.FindAllSubmatch(page, -1) {
		if !slices.Contains(written, string(m[1])) {
			errs = append(errs, fmt.Errorf("the page shows %s, which the generator did not write", m[1]))
		}
	}
	inside := ""
	for i, line := range strings.Split(string(page), "\n") {
		if m := markerRE.FindStringSubmatch(line + "\n"); m != nil {
			if m[1] == "BEGIN" {
				inside = m[2]
			} else {
				inside = ""
			}
			continue
		}
		if inside == "" && strings.HasPrefix(strings.TrimSpace(line), "|") && digitRE.MatchString(line) {
			errs = append(errs, fmt.Errorf("line %d: a table outside the generated sections holds a figure: %s", i+1, line))
		}
	}
	return errors.Join(errs...)
}

// pgSummary appends the medians of pgstore's write benchmarks.
func pgSummary(w io.Writer, d *data, source string) {
	fmt.Fprintf(w, "\n## pgstore write benchmarks (%s)\n\n| benchmark | µs/op | writes/s | runs |\n|---|---:|---:|---:|\n", source)
	for _, name := range d.names {
		cell := func(unit string, scale float64) string {
			v, ok := d.median(name, unit)
			if !ok {
				return ""
			}
			return strconv.FormatFloat(v*scale, 'g', 4, 64)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d |\n", name, cell("sec/op", 1e6), cell("writes/s", 1), len(d.vals[name]["sec/op"]))
	}
}
