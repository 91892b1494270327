package load

import (
	"flag"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0 = from the clock)")

func testSeed(t *testing.T) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", s, s)
	return s
}

// TestPickerFollowsWeights: draws follow each mix's weights, and a remote
// target's unsupported classes move their weight to create.
func TestPickerFollowsWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	const draws = 200000
	for _, name := range WorkloadNames() {
		m := Workloads[name]
		for _, remote := range []bool{false, true} {
			supported := func(Op) bool { return true }
			if remote {
				supported = func(op Op) bool { return remoteOps[op] }
			}
			p := newPicker(m, supported)
			want := map[Op]float64{}
			sum := 0
			for _, w := range m.Weights {
				sum += w
			}
			if p.total() != sum {
				t.Fatalf("%s remote=%v: total weight %d, want %d", name, remote, p.total(), sum)
			}
			for op, w := range m.Weights {
				if supported(op) {
					want[op] += float64(w) / float64(sum)
				} else {
					want[OpCreate] += float64(w) / float64(sum)
				}
			}
			got := map[Op]int{}
			for range draws {
				got[p.pick(rng.IntN(p.total()))]++
			}
			for op, frac := range want {
				f := float64(got[op]) / draws
				// 5 standard deviations of a binomial share.
				tol := 5 * math.Sqrt(frac*(1-frac)/draws)
				if math.Abs(f-frac) > tol {
					t.Errorf("%s remote=%v: %s drawn %.4f of the time, want %.4f ± %.4f", name, remote, op, f, frac, tol)
				}
			}
			for op := range got {
				if _, ok := want[op]; !ok {
					t.Errorf("%s remote=%v: drew %s, which has no weight", name, remote, op)
				}
				if !supported(op) {
					t.Errorf("%s remote=%v: drew unsupported %s", name, remote, op)
				}
			}
		}
	}
}

// TestPickerBoundaries: each class owns exactly its weight's range.
func TestPickerBoundaries(t *testing.T) {
	p := newPicker(Mix{Weights: map[Op]int{OpCreate: 2, OpGet: 3, OpList: 1}}, func(Op) bool { return true })
	want := []Op{OpCreate, OpCreate, OpGet, OpGet, OpGet, OpList}
	for r, op := range want {
		if got := p.pick(r); got != op {
			t.Errorf("pick(%d) = %s, want %s", r, got, op)
		}
	}
}

// TestSummarize: quantiles from the HDR histogram are within its precision
// of the exact ones, and counts, rates and errors add up.
func TestSummarize(t *testing.T) {
	rec := newOpRecorder()
	// 1..10000 µs, one each: the exact q-quantile is q*10000 µs.
	for i := 1; i <= 10000; i++ {
		class := ""
		if i%100 == 0 {
			class = ClassNotFound
		}
		rec.record(time.Duration(i)*time.Microsecond, time.Duration(i)*time.Microsecond, class)
	}
	rec.record(3*time.Second, 3*time.Second, ClassInternal)
	s := rec.snapshot(2 * time.Second)
	if s.Count != 10001 {
		t.Fatalf("count %d, want 10001", s.Count)
	}
	if math.Abs(s.OpsPerSec-5000.5) > 1e-9 {
		t.Errorf("ops/s %v, want 5000.5", s.OpsPerSec)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", s.P50Ms, 5.0}, {"p95", s.P95Ms, 9.5}, {"p99", s.P99Ms, 9.9}, {"p99.9", s.P999Ms, 9.99}, {"max", s.MaxMs, 3000},
	} {
		if math.Abs(c.got-c.want)/c.want > 0.002 {
			t.Errorf("%s = %v ms, want %v ms ± 0.2%%", c.name, c.got, c.want)
		}
	}
	if s.Errors[ClassNotFound] != 100 || s.Errors[ClassInternal] != 1 || s.ErrorCount() != 101 {
		t.Errorf("errors %v, want not_found=100 internal=1", s.Errors)
	}
	// The interval starts afresh; the whole-run view keeps everything.
	h, _, e := rec.takeInterval()
	if h.TotalCount() != 10001 || e != 101 {
		t.Errorf("interval: %d ops %d errors, want 10001 and 101", h.TotalCount(), e)
	}
	rec.record(time.Millisecond, time.Millisecond, "")
	if h, _, e := rec.takeInterval(); h.TotalCount() != 1 || e != 0 {
		t.Errorf("second interval: %d ops %d errors, want 1 and 0", h.TotalCount(), e)
	}
	if got := rec.snapshot(time.Second).Count; got != 10002 {
		t.Errorf("whole run %d ops, want 10002", got)
	}
	// An hour is in range (a paced run an hour behind its schedule says
	// so); beyond the range values are clamped, not dropped.
	rec.record(time.Hour, time.Hour, "")
	if got := rec.snapshot(time.Second); got.Count != 10003 || math.Abs(got.MaxMs-3.6e6) > 3.6e6*0.001 {
		t.Errorf("after a 1h sample: count %d max %v ms, want 3,600,000 ±0.1%%", got.Count, got.MaxMs)
	}
	rec.record(5*time.Hour, 5*time.Hour, "")
	if got := rec.snapshot(time.Second); got.Count != 10004 || got.MaxMs < 7.19e6 || got.MaxMs > 7.21e6 {
		t.Errorf("after a 5h sample: count %d max %v ms, want the 2h cap", got.Count, got.MaxMs)
	}
}

// TestPauseQuantiles: quantiles of a pause histogram are the upper bounds
// of their buckets, the open last bucket gives its lower bound, and an
// empty histogram gives zeros.
func TestPauseQuantiles(t *testing.T) {
	buckets := []float64{0, 1e-5, 1e-4, 1e-3, 1e-2, math.Inf(1)}
	for _, c := range []struct {
		counts             []uint64
		n                  uint64
		p50, p99, maxPause float64
	}{
		{[]uint64{0, 0, 0, 0, 0}, 0, 0, 0, 0},
		{[]uint64{0, 98, 1, 1, 0}, 100, 0.1, 1, 10},
		{[]uint64{0, 50, 49, 0, 1}, 100, 0.1, 1, 10},
		{[]uint64{10, 0, 0, 0, 0}, 10, 0.01, 0.01, 0.01},
	} {
		n, p50, p99, mx := pauseQuantiles(c.counts, buckets)
		if n != c.n || p50 != c.p50 || p99 != c.p99 || mx != c.maxPause {
			t.Errorf("%v: n %d p50 %v p99 %v max %v ms, want %d %v %v %v", c.counts, n, p50, p99, mx, c.n, c.p50, c.p99, c.maxPause)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{engine.ErrInvalidPageToken, ClassInvalidArgument},
		{a2a.ErrInvalidParams, ClassInvalidArgument},
		{engine.ErrNotFound, ClassNotFound},
		{a2a.ErrTaskNotFound, ClassNotFound},
		{a2a.ErrTaskNotCancelable, ClassNotCancelable},
		{engine.ErrRevisionConflict, ClassConflict},
		{engine.ErrAlreadyExists, ClassAlreadyExists},
		{engine.ErrInternal, ClassInternal},
		{a2a.ErrInternalError, ClassInternal},
		{errTransport, ClassTransport},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestTraversalChecker: each kind of violation is caught, and a clean
// traversal reports none.
func TestTraversalChecker(t *testing.T) {
	tk := newTracker()
	for _, id := range []a2a.TaskID{"a", "b", "c", "d"} {
		tk.added(id, "ctx")
	}
	start := tk.now()
	tk.begin("d", "ctx") // d is written during the traversal: may be missing
	cur := func(ts int64, id a2a.TaskID) engine.Cursor { return engine.Cursor{UpdatedAt: ts, ID: id} }

	clean := newTraversal(1, 1, "", start)
	clean.page(page{ids: []a2a.TaskID{"c", "b"}, cursors: []engine.Cursor{cur(9, "c"), cur(8, "b")}, next: engine.EncodeToken(cur(8, "b"))})
	clean.page(page{ids: []a2a.TaskID{"a"}, cursors: []engine.Cursor{cur(7, "a")}})
	clean.finish(tk)
	if len(clean.out) != 0 {
		t.Fatalf("clean traversal: %v", clean.out)
	}

	bad := newTraversal(1, 2, "", start)
	bad.page(page{ids: []a2a.TaskID{"c", "b"}, cursors: []engine.Cursor{cur(9, "c"), cur(8, "b")}, next: engine.EncodeToken(cur(8, "b"))})
	bad.page(page{ids: []a2a.TaskID{"b"}, cursors: []engine.Cursor{cur(8, "b")}})
	bad.finish(tk)
	kinds := map[string]int{}
	for _, v := range bad.out {
		kinds[v.Kind]++
		if v.Seed != 1 || v.Traversal != 2 {
			t.Errorf("violation without seed/traversal: %+v", v)
		}
	}
	if kinds["repeat"] != 1 || kinds["cursor-order"] != 1 || kinds["missing"] != 1 {
		t.Errorf("violations %v, want one repeat, one cursor-order, one missing (a): %v", kinds, bad.out)
	}

	// Remote traversals have only token boundaries.
	remote := newTraversal(1, 3, "", start)
	remote.page(page{ids: []a2a.TaskID{"c"}, next: engine.EncodeToken(cur(9, "c"))})
	remote.page(page{ids: []a2a.TaskID{"b"}, next: engine.EncodeToken(cur(9, "c"))})
	if len(remote.out) != 1 || remote.out[0].Kind != "cursor-order" {
		t.Errorf("remote boundary not descending: %v", remote.out)
	}
}

// TestProgressLine: the interval line has the throughput, per-class
// quantiles and error count of the interval just ended, then starts afresh.
func TestProgressLine(t *testing.T) {
	r := &runner{rec: map[Op]*opRecorder{}, start: time.Now()}
	for _, op := range AllOps {
		r.rec[op] = newOpRecorder()
	}
	for range 100 {
		r.rec[OpGet].record(2*time.Millisecond, 2*time.Millisecond, "")
	}
	r.rec[OpCreate].record(40*time.Microsecond, 40*time.Microsecond, ClassNotFound)
	line := r.progressLine(time.Second)
	for _, want := range []string{"101 ops/s", "errors 1", "get 2.0/2.0", "create 0.040/0.040"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
	if line := r.progressLine(time.Second); !strings.Contains(line, " 0 ops/s") || strings.Contains(line, "get ") {
		t.Errorf("second interval should be empty: %q", line)
	}
}

// TestPacedProgressLine: a paced run's progress line — the soak's
// per-minute line — gives each class's p50/p99 from its send and how far
// the run is behind its schedule, not response times that are all the
// schedule's lag. The soak of results/raw/2026-12-02c (8 workers, whose
// traversals walk a growing store) offered 20 of its 50 operations/s, so
// it fell 0.6 s further behind every second (some 1,080 s at its end),
// and every percentile of its create, cancel, traverse and total rows
// read that lag (held at the old 100 s cap: 100,059 ms), while its pages,
// timed from their own send, read 14 ms at p50.
func TestPacedProgressLine(t *testing.T) {
	r := &runner{rec: map[Op]*opRecorder{}, start: time.Now(), cfg: Config{Rate: 50}, tracker: newTracker(), gcStart: readGC()}
	for _, op := range AllOps {
		r.rec[op] = newOpRecorder()
	}
	r.lag.observe(300 * time.Second)
	for range 100 {
		r.rec[OpCreate].record(300*time.Second, 3*time.Millisecond, "")
		r.rec[OpPage].record(14*time.Millisecond, 14*time.Millisecond, "")
	}
	line := r.progressLine(time.Minute)
	for _, want := range []string{"behind 300.0s", "p50/p99 ms from send: create 3.0/3.0  page 14.0/14.0"} {
		if !strings.Contains(line, want) {
			t.Errorf("paced progress line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "300000") {
		t.Errorf("paced progress line %q shows the lag as a latency", line)
	}
	// The whole run's table keeps response times from the schedule (up to
	// 2 h: the lag itself, never a cap) and its schedule: line the send.
	res := r.result(time.Minute)
	if s := res.Ops[OpCreate]; s.P50Ms < 299e3 || s.P50Ms > 301e3 || s.ServiceP50Ms < 2.99 || s.ServiceP50Ms > 3.01 {
		t.Errorf("create p50 %v ms from the schedule, %v ms from the send: want 300,000 and 3", s.P50Ms, s.ServiceP50Ms)
	}
}

// TestScheduleReport: a paced run that fell behind says by how much and
// prints the service times beside the response times, which count from the
// schedule; one on schedule prints no such line.
func TestScheduleReport(t *testing.T) {
	r := &runner{rec: map[Op]*opRecorder{}, start: time.Now(), cfg: Config{Rate: 50}, tracker: newTracker(), gcStart: readGC()}
	for _, op := range AllOps {
		r.rec[op] = newOpRecorder()
	}
	r.lag.observe(-time.Millisecond) // ahead: waits, starts on time
	r.lag.observe(90 * time.Second)
	r.lag.observe(30 * time.Second)
	for range 100 {
		r.rec[OpCreate].record(90*time.Second, 3*time.Millisecond, "")
	}
	res := r.result(time.Minute)
	if res.Schedule == nil || res.Schedule.MaxLagMs != 90e3 || res.Schedule.EndLagMs != 30e3 {
		t.Fatalf("schedule %+v, want max 90 s, end 30 s", res.Schedule)
	}
	if s := res.Ops[OpCreate]; s.P50Ms < 89e3 || s.ServiceP50Ms < 2.99 || s.ServiceP50Ms > 3.01 {
		t.Errorf("create p50 %v ms, service p50 %v ms: want ~90,000 and 3", s.P50Ms, s.ServiceP50Ms)
	}
	var b strings.Builder
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"schedule: behind the rate by up to 90.0 s (30.0 s at the end)", "create 3.00/3.00", "total 3.00/3.00"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	res.Schedule = &ScheduleStats{MaxLagMs: 900}
	b.Reset()
	if err := res.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "schedule:") {
		t.Errorf("a run 0.9 s behind at worst reported as behind:\n%s", b.String())
	}
}
