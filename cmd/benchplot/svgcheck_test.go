package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// checkSVGFile returns the problems checkSVG finds in file.
func checkSVGFile(t *testing.T, file string) []string {
	t.Helper()
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	problems, err := checkSVG(fh)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return problems
}

// requireLegible fails t with every problem checkSVG finds in the files.
func requireLegible(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		for _, p := range checkSVGFile(t, f) {
			t.Errorf("%s: %s", filepath.Base(f), p)
		}
	}
}

// TestCheckCatchesTheOldCharts: the charts of results/ as they were before
// the check (testdata/before, generated at 1d30806) fail it with the
// defects issue 33 saw in them rendered.
func TestCheckCatchesTheOldCharts(t *testing.T) {
	for file, want := range map[string][]string{
		"history.svg": {`"e87b0fa (imported)" overlaps "75d8044 (imported)"`, `"75d8044 (imported)" overlaps "a92d62a (quick)"`,
			`"mem: light page of 50, random cursor" overlaps "mem: Replace moving a task to the head"`},
		"page-vs-n.svg":    {`"1e+06" is not inside the picture`},
		"peer-ratios.svg":  {`"pg boundary lookup + OR cursor (a2a-python shape) / keyset, depth 50%, n=1e5: 55.1×" runs over a filled shape`},
		"wire-latency.svg": {`"pg/grpc" is not inside the picture`, `"SendMessage p50" overlaps "SendMessage p99"`},
		"lifecycle.svg":    {`"Lifecycle/backend=pg/op=lifecycle/n=20000/writers=4: 531/s" runs over a filled shape`},
	} {
		got := strings.Join(checkSVGFile(t, filepath.Join("testdata/before", file)), "\n")
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the check does not report %s; it reports:\n%s", file, w, got)
			}
		}
	}
}

// TestCheckSVG: the check on small pictures, one defect each.
func TestCheckSVG(t *testing.T) {
	const head = `<?xml version="1.0"?><svg width="200pt" height="100pt" viewBox="0 0 200 100"><g transform="scale(1, -1) translate(0, -100)">`
	text := func(x, y float64, s string) string {
		return `<text x="` + ftoa(x) + `" y="` + ftoa(-y) + `" transform="scale(1, -1)" style="font-family:Liberation Serif;font-size:10px">` + s + `</text>`
	}
	for _, tc := range []struct{ name, body, want string }{
		{"apart", text(10, 80, "one") + text(10, 50, "two") + text(120, 80, "three"), ""},
		{"side by side", text(10, 80, "one two") + text(40, 80, "three"), `"one two" overlaps "three"`},
		{"stacked too close", text(10, 80, "one") + text(10, 72, "two"), `"one" overlaps "two"`},
		{"past the right edge", text(180, 50, "clipped"), `"clipped" is not inside the picture`},
		{"past the left edge", `<text x="5" y="-50" transform="scale(1, -1)" style="font-size:10px;text-anchor:end">end</text>`, `"end" is not inside`},
		{"below the bottom", text(10, 1, "low"), `"low" is not inside`},
		{"rotated inside", `<g transform="rotate(90)">` + `<text x="20" y="12" transform="scale(1, -1)" style="font-size:10px">up the side</text></g>`, ""},
		{"rotated past the top", `<g transform="rotate(90)">` + `<text x="60" y="12" transform="scale(1, -1)" style="font-size:10px">up the side</text></g>`, "is not inside"},
		{"over a bar", `<path d="M30,40L30,60L150,60L150,40Z" style="fill:#3C6EB4" />` + text(10, 45, "a long label"), `"a long label" runs over a filled shape`},
		{"beside a bar", `<path d="M80,40L80,60L150,60L150,40Z" style="fill:#3C6EB4" />` + text(10, 45, "label"), ""},
		{"over a line", `<path d="M30,40L150,40" style="fill:none;stroke:#000000" />` + text(10, 38, "a long label"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, err := checkSVG(strings.NewReader(head + tc.body + "</g></svg>"))
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(problems, "\n")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := checkSVG(strings.NewReader(head + `<g transform="skewX(3)"></g></g></svg>`)); err == nil {
		t.Error("a transform the check cannot read passed")
	}
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
