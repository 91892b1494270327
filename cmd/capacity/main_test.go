package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPageUpToDate: the generated section of docs/capacity.md is what the
// model computes from the committed runs (run go run ./cmd/capacity).
func TestPageUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	gen, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	want, err := splice(committed, gen)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) == string(committed) {
		return
	}
	w, c := strings.Split(string(want), "\n"), strings.Split(string(committed), "\n")
	for i := range min(len(w), len(c)) {
		if w[i] != c[i] {
			t.Fatalf("%s is out of date (first difference at line %d):\n  committed: %q\n  computed:  %q\nrun: go run ./cmd/capacity", page, i+1, c[i], w[i])
		}
	}
	t.Fatalf("%s is out of date (%d lines committed, %d computed); run: go run ./cmd/capacity", page, len(c), len(w))
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestFitPerTask: a store of fixed + n × each bytes gives those back, and
// the per-task figure at any n.
func TestFitPerTask(t *testing.T) {
	const fixed, each = 5e6, 300.0
	ns := []int{1e3, 1e4, 1e5}
	var per []float64
	for _, n := range ns {
		per = append(per, each+fixed/float64(n))
	}
	m := fitPerTask(ns, per)
	if !near(m.fixed, fixed) || !near(m.each, each) {
		t.Fatalf("fit = %+v, want fixed %v each %v", m, fixed, each)
	}
	if got, want := m.at(1e6), each+fixed/1e6; !near(got, want) {
		t.Errorf("at 1e6 = %v, want %v", got, want)
	}
}

// TestFitPerRequest: a cost growing by a constant per decade is fitted
// exactly; a falling one is taken as flat at its mean.
func TestFitPerRequest(t *testing.T) {
	ns := []int{1e3, 1e4, 1e5}
	m := fitPerRequest(ns, []float64{13, 15, 17})
	if !near(m.base, 7) || !near(m.perDecade, 2) {
		t.Fatalf("rising fit = %+v, want base 7, 2 per decade", m)
	}
	if got := m.at(1e6); !near(got, 19) {
		t.Errorf("rising at 1e6 = %v, want 19", got)
	}
	m = fitPerRequest(ns, []float64{30, 20, 25})
	if m.perDecade != 0 || !near(m.base, 25) {
		t.Fatalf("falling fit = %+v, want flat at the mean 25", m)
	}
}

func TestSig(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {1.2345, "1.23"}, {0.012345, "0.0123"}, {12.345, "12.3"}, {1234.5, "1,230"},
		{1066, "1,070"}, {1234567, "1,230,000"}, {-45.67, "-45.7"}, {999.6, "1,000"},
	} {
		if got := sig(c.v); got != c.want {
			t.Errorf("sig(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestSpliceNeedsMarkers: a page without its markers is an error, not a
// page silently left as it was.
func TestSpliceNeedsMarkers(t *testing.T) {
	if _, err := splice([]byte("no markers\n"), []byte("x\n")); err == nil {
		t.Error("splice of a page without markers succeeded")
	}
	if _, err := splice([]byte(beginMarker+"\nold\n"), []byte("x\n")); err == nil {
		t.Error("splice of a page without the end marker succeeded")
	}
	got, err := splice([]byte("a\n"+beginMarker+"\nold\n"+endMarker+"\nb\n"), []byte("new\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\n" + beginMarker + "\nnew\n" + endMarker + "\nb\n"; string(got) != want {
		t.Errorf("splice = %q, want %q", got, want)
	}
}

// TestCallMicrosPaced: a call costs its paced run's CPU plus the store's
// growth from the run's size to n by the scale model; a backend without
// a paced run costs the served rows' CPU.
func TestCallMicrosPaced(t *testing.T) {
	m := &model{
		request: map[string]perRequest{
			"pebble op=page-total/n=%d/page=50/filter=none":    {base: 10, perDecade: 2},
			"pebble op=page-total/n=%d/page=50/filter=context": {base: 20, perDecade: 4},
		},
		paced:  []pacedRow{{backend: "pebble", workload: "list-only", tasks: 1e4, calls: 1000, cpu: 1}},
		served: []servedRow{{backend: "mem", transport: "jsonrpc", workload: "list-only", requests: 100, serverCPU: 0.05}},
	}
	// 1,000 µs a call at 1e4; at 1e6 the two pages grow by 4 and 8 µs: 6 on average.
	if got, paced, err := m.callMicros("pebble", "list-only", 1e6); err != nil || !paced || !near(got, 1006) {
		t.Errorf("pebble at 1e6: %g µs (paced %v, %v), want 1006 paced", got, paced, err)
	}
	if got, paced, err := m.callMicros("mem", "list-only", 1e6); err != nil || paced || !near(got, 500) {
		t.Errorf("mem: %g µs (paced %v, %v), want the served rows' 500", got, paced, err)
	}
	if _, _, err := m.callMicros("pg", "list-only", 1e6); err == nil {
		t.Error("pg without a paced run or a served row: no error")
	}
}

// TestPredict: a deployment's cores add up its calls' served CPU, Pebble's
// disk is its sstables' model plus the log it keeps, mem's live heap is
// the store's model plus its task log's (logRun's row, which must be
// there), and a backend the model does not know is refused.
func TestPredict(t *testing.T) {
	m, err := load(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	d := deployment{backend: "pebble", tasks: 2e6, sends: 10, lists: 40}
	p, err := m.predict(d)
	if err != nil {
		t.Fatal(err)
	}
	want := (10*p.sendMicros + 40*p.listMicros) / 1e6
	if !near(p.cores(), want) || p.cores() <= 0 {
		t.Errorf("cores %g, want %g", p.cores(), want)
	}
	if want := m.footprint["pebble sst-B/task"].at(2e6)*2e6 + pebbleLog; !near(p.disk, want) {
		t.Errorf("disk %g, want %g", p.disk, want)
	}
	d.sends, d.lists = 20, 80
	if q, err := m.predict(d); err != nil || !near(q.cores(), 2*p.cores()) {
		t.Errorf("twice the calls: %g cores (%v), want %g", q.cores(), err, 2*p.cores())
	}
	if m.logHeap <= 0 {
		t.Fatalf("the task log's heap per task is %g: %s has no %s row", m.logHeap, logRun, logHeapName)
	}
	mem, err := m.predict(deployment{backend: "mem", tasks: 2e6, sends: 10, lists: 40})
	if err != nil {
		t.Fatal(err)
	}
	if want := (m.footprint["mem bytes/task"].at(2e6) + m.logHeap) * 2e6; !near(mem.heap, want) {
		t.Errorf("mem's live heap %g, want the store's and the log's %g", mem.heap, want)
	}
	if want := (m.footprint["mem rss-B/task"].at(2e6) + m.logHeap) * 2e6; !near(mem.rss, want) {
		t.Errorf("mem's resident set %g, want the store's and the log's %g", mem.rss, want)
	}
	if _, err := m.predict(deployment{backend: "sqlite", tasks: 1}); err == nil {
		t.Error("an unknown backend predicted")
	}
}

// TestReadPacedByCallsServed: a calibration row is classified by the
// calls it served; one that served both methods (a method asked at 0 a
// second and called anyway) is refused, not counted as the other.
func TestReadPacedByCallsServed(t *testing.T) {
	row := "run name=x backend=pebble tasks=10000 sends=%s lists=%s seconds=60 wall=60 sent=%d listed=%d server-cpu=6 db-cpu=0 disk-bytes=1 heap-bytes=0\n"
	write := func(t *testing.T, lines string) string {
		root := t.TempDir()
		dir := filepath.Join(root, pacedRun)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		return root
	}
	rows, err := readPaced(write(t, fmt.Sprintf(row, "50", "0", 3000, 0)+fmt.Sprintf(row, "0", "200", 0, 12000)))
	if err != nil || len(rows) != 2 || rows[0].workload != "send-only" || rows[1].workload != "list-only" ||
		!near(rows[0].cpuMicros(), 2000) || !near(rows[1].cpuMicros(), 500) {
		t.Fatalf("readPaced = %+v, %v; want a send-only row at 2,000 µs and a list-only one at 500", rows, err)
	}
	if rows, err := readPaced(write(t, fmt.Sprintf(row, "50", "0.0", 3000, 12000))); err == nil {
		t.Errorf("a row that served both methods was read as %+v", rows)
	}
}
