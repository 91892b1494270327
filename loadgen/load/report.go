package load

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the summary: one row per operation class with count,
// ops/s, latency quantiles and errors by class, then the checks.
func (r *Result) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "loadgen: target=%s", r.Target)
	if r.Transport != "" {
		fmt.Fprintf(w, " transport=%s", r.Transport)
	}
	fmt.Fprintf(w, " workload=%s concurrency=%d", r.Workload, r.Concurrency)
	if r.Rate > 0 {
		fmt.Fprintf(w, " rate=%.0f/s", r.Rate)
	}
	if r.Log {
		fmt.Fprint(w, " log=on")
	}
	fmt.Fprintf(w, " seed=%d initial=%d page=%d elapsed=%.2fs\n", r.Seed, r.Initial, r.PageSize, r.ElapsedSec)
	if l := r.Load; l != nil && l.Written+l.Found > 0 {
		fmt.Fprintf(w, "initial load: %d tasks by %s (%d written, %d found from a stopped load) in %.2fs, %.0f tasks/s\n",
			l.Written+l.Found, l.Path, l.Written, l.Found, l.Sec, l.TasksPerSec)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tcount\tops/s\tp50 ms\tp95 ms\tp99 ms\tp99.9 ms\tmax ms\terrors\t")
	row := func(name string, s OpStats) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, s.Count, s.OpsPerSec,
			FormatMillis(s.P50Ms, 2), FormatMillis(s.P95Ms, 2), FormatMillis(s.P99Ms, 2), FormatMillis(s.P999Ms, 2), FormatMillis(s.MaxMs, 2), fmtErrors(s.Errors))
	}
	for _, op := range AllOps {
		if s, ok := r.Ops[op]; ok {
			row(string(op), s)
		}
	}
	row("total", r.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	r.writeSchedule(w)
	fmt.Fprintf(w, "checks: %d traversals (%d pages, %d task appearances, %d cursor comparisons) checked live; %d violations; %d live tasks at end\n",
		r.Traversals, r.TraversalPages, r.ExactlyOnce, r.CursorChecks, r.ViolationCount, r.LiveTasks)
	for _, v := range r.Violations {
		fmt.Fprintln(w, "VIOLATION", v)
	}
	if r.ViolationCount > int64(len(r.Violations)) {
		fmt.Fprintf(w, "… and %d more violations\n", r.ViolationCount-int64(len(r.Violations)))
	}
	r.Push.write(w)
	if g := r.GC; g != nil {
		fmt.Fprintf(w, "gc: %d cycles, %d pauses p50 %s ms p99 %s ms max %s ms, %.2f s CPU (%.1f%%), live heap %.1f MiB at end\n",
			g.Cycles, g.Pauses, FormatMillis(g.PauseP50Ms, 2), FormatMillis(g.PauseP99Ms, 2), FormatMillis(g.PauseMaxMs, 2),
			g.CPUSec, 100*g.CPUShare, float64(g.HeapLive)/(1<<20))
	}
	_, err := fmt.Fprintf(w, "machine: %s/%s, %d CPUs, load average %s\n", r.Machine.GOOS, r.Machine.GOARCH, r.Machine.CPUs, r.Machine.LoadAvg)
	return err
}

// writeSchedule says, when a paced run fell behind its rate, by how much and
// what its operations cost from their send: the table's response times then
// hold the wait for a free worker.
func (r *Result) writeSchedule(w io.Writer) {
	if !r.Schedule.Behind() {
		return
	}
	fmt.Fprintf(w, "schedule: behind the rate by up to %.1f s (%.1f s at the end); the table counts from each scheduled start. From the send, p50/p99 ms:",
		r.Schedule.MaxLagMs/1e3, r.Schedule.EndLagMs/1e3)
	for _, op := range AllOps {
		if s, ok := r.Ops[op]; ok {
			fmt.Fprintf(w, " %s %s/%s", op, FormatMillis(s.ServiceP50Ms, 2), FormatMillis(s.ServiceP99Ms, 2))
		}
	}
	fmt.Fprintf(w, " total %s/%s\n", FormatMillis(r.Total.ServiceP50Ms, 2), FormatMillis(r.Total.ServiceP99Ms, 2))
}

// write prints the push line and the push violations, if any.
func (s *PushStats) write(w io.Writer) {
	if s == nil {
		return
	}
	if s.Receiver == "" {
		fmt.Fprintf(w, "push: webhook %s (no receiver: deliveries not checked)\n", s.URL)
		return
	}
	fmt.Fprintf(w, "push: %d deliveries to %d tasks, %d duplicates, %d order violations, %d malformed; %d tasks seen terminal, %d losses (grace %.0fs); %d down windows (%.0fs); terminal event after the task was seen terminal p50/p99 %s/%s ms\n",
		s.Deliveries, s.Tasks, s.Duplicates, s.OrderViolations, s.Malformed, s.Terminal, s.Losses, s.GraceSec, s.DownWindows, s.DownSec,
		FormatMillis(s.TerminalLagP50Ms, 2), FormatMillis(s.TerminalLagP99Ms, 2))
	for _, p := range s.Problems {
		fmt.Fprintln(w, "PUSH VIOLATION", p)
	}
	shown := s.LostTasks[:min(len(s.LostTasks), 10)]
	for _, id := range shown {
		fmt.Fprintf(w, "PUSH VIOLATION lost: task %s was seen terminal, its terminal event never arrived\n", id)
	}
	if n := s.Losses - int64(len(shown)); n > 0 {
		fmt.Fprintf(w, "… and %d more losses\n", n)
	}
}

// FormatMillis formats a latency in milliseconds: three decimals below 1 ms,
// mid decimals below 100 ms, none from there on (the summary table's
// format; cmd/benchplot prints loadgen results with it too).
func FormatMillis(ms float64, mid int) string {
	prec := 0
	switch {
	case ms < 1:
		prec = 3
	case ms < 100:
		prec = mid
	}
	return fmt.Sprintf("%.*f", prec, ms)
}

// fmtErrors is "-" or "not_found=3 internal=1" in class order.
func fmtErrors(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// WriteBench writes Go benchmark-format lines, one per operation class, so
// benchstat compares loadgen runs like `go test -bench` runs:
//
//	BenchmarkLoadgen/target=mem/workload=write-heavy/op=get  12345  2100 ns/op  4.10 p99-µs  5878 ops/s
//
// ns/op is the mean latency; a "total" line carries the run's throughput.
// An embedded run adds an op=gc line: the pauses as its count, their
// quantiles, the collector's CPU share and the live heap at the end. A
// run with the task log (Log) names its target target=mem+log, so that
// benchstat does not pool it with a run without.
func (r *Result) WriteBench(w io.Writer) error {
	target := r.Target
	if r.Transport != "" {
		target = "remote-" + r.Transport
	}
	if r.Log {
		target += "+log"
	}
	fmt.Fprintf(w, "goos: %s\ngoarch: %s\npkg: github.com/a2astore/a2astore/loadgen\n", r.Machine.GOOS, r.Machine.GOARCH)
	line := func(op string, s OpStats) {
		fmt.Fprintf(w, "BenchmarkLoadgen/target=%s/workload=%s/op=%s-%d\t%d\t%.0f ns/op\t%.1f p50-µs\t%.1f p99-µs\t%.1f p99.9-µs\t%.1f ops/s\t%d errors\n",
			target, r.Workload, op, r.Concurrency, s.Count, s.MeanMs*1e6, s.P50Ms*1e3, s.P99Ms*1e3, s.P999Ms*1e3, s.OpsPerSec, s.ErrorCount())
	}
	for _, op := range AllOps {
		if s, ok := r.Ops[op]; ok {
			line(string(op), s)
		}
	}
	line("total", r.Total)
	if g := r.GC; g != nil {
		fmt.Fprintf(w, "BenchmarkLoadgen/target=%s/workload=%s/op=gc-%d\t%d\t%.1f pause-p50-µs\t%.1f pause-p99-µs\t%.1f pause-max-µs\t%.2f gc-cpu-%%\t%d heap-live-bytes\n",
			target, r.Workload, r.Concurrency, g.Pauses, g.PauseP50Ms*1e3, g.PauseP99Ms*1e3, g.PauseMaxMs*1e3, 100*g.CPUShare, g.HeapLive)
	}
	return nil
}

// WriteJSONFile writes the whole Result as indented JSON.
func (r *Result) WriteJSONFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
