package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2astore/a2astore/loadgen/load"
)

// A recorded run is a directory results/runs/<id>/ written by results/run.sh
// (`make results`):
//
//	run.json          runMeta: commit, mode, start and end, load before/after, machine
//	commands.txt      the exact commands of the run, in order
//	steps.log         start and end time of each step
//	bench.txt         go test ./bench output (benchfmt)
//	pgstore.txt       pgstore's write benchmarks (counters; lifecycle when present)
//	pebblestore.txt   pebblestore's Replace beside its bare-Pebble floor
//	loadgen/<b>.json  embedded loadgen run per backend (load.Result)
//	gc/<name>.json    embedded loadgen run for the collector's share
//	                  (mem-read-heavy: read-heavy at a million tasks)
//	server/<b>-<t>-<w>.json  loadgen against a2astore-server (backend b,
//	                  transport t, workload w)
//	server/<b>-<t>-<w>.cpu   the server process's CPU ticks before and after
//	                  that loadgen run, and the clock tick: "before after hz"
//	server/pg-<t>-<w>.dbcpu  the same for the PostgreSQL cluster
//	server/<b>-jsonrpc-<w>.pprof  a CPU profile of the server during most of
//	                  that run (mem and pg, and the peer below; cpuowners.go)
//	server/a2a_inmemory-jsonrpc-<w>.{json,cpu,pprof}  the same rows against
//	                  the server serving from a2a-go's taskstore.InMemory
//	                  (-a2a-inmemory), kept apart from the backends (run.Peer)
//
// Every file but run.json is optional: a run imported from an older raw file
// (mode "imported") has only bench.txt, and a figure a run lacks is left blank.

// runMeta is run.json.
type runMeta struct {
	Commit     string    `json:"commit"`      // 12 hex digits, "-dirty" when the tree had changes
	Mode       string    `json:"mode"`        // full, quick, imported or fixture
	Started    time.Time `json:"started"`     // UTC
	Finished   time.Time `json:"finished"`    // UTC
	LoadBefore string    `json:"load_before"` // /proc/loadavg, first three fields
	LoadAfter  string    `json:"load_after"`
	CPUs       int       `json:"cpus"`
	CPUModel   string    `json:"cpu_model"`
	MemTotal   string    `json:"mem_total"`
	Kernel     string    `json:"kernel"`
	Go         string    `json:"go"`
	Postgres   string    `json:"postgres"`
	Note       string    `json:"note,omitempty"` // e.g. "machine shared with other jobs"
	// BenchFile, for an imported run, is its raw benchmark file relative
	// to the run directory (e.g. ../../raw/e87b0fa72768.txt) instead of
	// bench.txt.
	BenchFile string `json:"bench_file,omitempty"`
}

// serverRun is one loadgen run against a2astore-server.
type serverRun struct {
	Backend, Transport, Workload string
	Res                          *load.Result
	CPUSec                       float64 // server process CPU (user+system) during the run
	HasCPU                       bool
	DBCPUSec                     float64 // pg: the PostgreSQL cluster's CPU during the run
	HasDBCPU                     bool
	CPU                          *cpuSplit // the server's CPU profile by owner; nil without one
}

// DBCPUPerRequest is the database's CPU time per completed request, in µs
// (pg: the PostgreSQL processes serving the server's connections).
func (s serverRun) DBCPUPerRequest() (float64, bool) {
	if !s.HasDBCPU || s.Res.Total.Count == 0 {
		return 0, false
	}
	return s.DBCPUSec / float64(s.Res.Total.Count) * 1e6, true
}

// CPUPerRequest is the server's CPU time per completed request, in µs.
func (s serverRun) CPUPerRequest() (float64, bool) {
	if !s.HasCPU || s.Res.Total.Count == 0 {
		return 0, false
	}
	return s.CPUSec / float64(s.Res.Total.Count) * 1e6, true
}

// run is one recorded run, read.
type run struct {
	ID      string // directory name
	Dir     string
	Meta    runMeta
	Bench   *data // nil without bench.txt
	PG      *data // nil without pgstore.txt
	Pebble  *data // nil without pebblestore.txt
	Loadgen map[string]*load.Result
	GC      map[string]*load.Result // gc/<name>.json
	Server  []serverRun
	Peer    []serverRun // the server on a2a-go's InMemory (peerBackend)
}

// Label names the run on the page and in charts: its commit, and the mode
// when it is not a full run.
func (r *run) Label() string {
	c := strings.TrimSuffix(r.Meta.Commit, "-dirty")
	if len(c) > 7 {
		c = c[:7]
	}
	if strings.HasSuffix(r.Meta.Commit, "-dirty") {
		c += "+"
	}
	if r.Meta.Mode != "full" {
		c += " (" + r.Meta.Mode + ")"
	}
	return c
}

// Loaded reports whether the machine was busy when the run started
// (1-minute load average above its core count). The load after is not
// read: a full run ends with its server rows, which run PostgreSQL, the
// server and loadgen at once and load the 2 cores by themselves, so it
// would mark every full run.
func (r *run) Loaded() bool {
	f := strings.Fields(r.Meta.LoadBefore)
	if len(f) == 0 {
		return false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return err == nil && r.Meta.CPUs > 0 && v > float64(r.Meta.CPUs)
}

// readRuns reads every run under dir (results/runs), oldest first by start
// time. A run in progress or interrupted is <id>.partial (run.sh renames
// it when complete) and is ignored; any other directory without run.json is
// an error.
func readRuns(dir string) ([]*run, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var runs []*run
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if strings.HasSuffix(e.Name(), ".partial") {
			fmt.Fprintf(os.Stderr, "benchplot: %s: a run in progress or interrupted (ignored)\n", e.Name())
			continue
		}
		r, err := readRun(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", e.Name(), err)
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no runs in %s", dir)
	}
	slices.SortStableFunc(runs, func(a, b *run) int { return a.Meta.Started.Compare(b.Meta.Started) })
	return runs, nil
}

func readRun(dir string) (*run, error) {
	r := &run{ID: filepath.Base(dir), Dir: dir, Loadgen: map[string]*load.Result{}, GC: map[string]*load.Result{}}
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &r.Meta); err != nil {
		return nil, fmt.Errorf("run.json: %w", err)
	}
	if r.Meta.Commit == "" || r.Meta.Mode == "" || r.Meta.Started.IsZero() {
		return nil, errors.New("run.json: commit, mode and started are required")
	}
	benchFile := filepath.Join(dir, "bench.txt")
	if r.Meta.BenchFile != "" {
		benchFile = filepath.Join(dir, filepath.FromSlash(r.Meta.BenchFile))
		if _, err := os.Stat(benchFile); err != nil {
			return nil, fmt.Errorf("run.json bench_file: %w", err)
		}
	}
	if r.Bench, err = readBenchFile(benchFile); err != nil {
		return nil, err
	}
	if r.PG, err = readBenchFile(filepath.Join(dir, "pgstore.txt")); err != nil {
		return nil, err
	}
	if r.Pebble, err = readBenchFile(filepath.Join(dir, "pebblestore.txt")); err != nil {
		return nil, err
	}
	for sub, m := range map[string]map[string]*load.Result{"loadgen": r.Loadgen, "gc": r.GC} {
		files, _ := filepath.Glob(filepath.Join(dir, sub, "*.json"))
		for _, f := range files {
			res, err := readResult(f)
			if err != nil {
				return nil, err
			}
			m[strings.TrimSuffix(filepath.Base(f), ".json")] = res
		}
	}
	sv, _ := filepath.Glob(filepath.Join(dir, "server", "*.json"))
	for _, f := range sv {
		parts := strings.SplitN(strings.TrimSuffix(filepath.Base(f), ".json"), "-", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s: want server/<backend>-<transport>-<workload>.json", f)
		}
		res, err := readResult(f)
		if err != nil {
			return nil, err
		}
		s := serverRun{Backend: parts[0], Transport: parts[1], Workload: parts[2], Res: res}
		if s.CPUSec, s.HasCPU, err = readCPU(strings.TrimSuffix(f, ".json") + ".cpu"); err != nil {
			return nil, err
		}
		if s.DBCPUSec, s.HasDBCPU, err = readCPU(strings.TrimSuffix(f, ".json") + ".dbcpu"); err != nil {
			return nil, err
		}
		if s.CPU, err = readProfile(strings.TrimSuffix(f, ".json") + ".pprof"); err != nil {
			return nil, err
		}
		if s.Backend == peerBackend {
			r.Peer = append(r.Peer, s)
			continue
		}
		r.Server = append(r.Server, s)
	}
	return r, nil
}

// openOptional opens path; a missing file is nil, no error (a figure the
// run does not have).
func openOptional(path string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return f, err
}

// readBenchFile reads a benchfmt file; a missing file is nil, no error.
func readBenchFile(path string) (*data, error) {
	f, err := openOptional(path)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, path)
}

func readResult(path string) (*load.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res load.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &res, nil
}

// readCPU reads "before after hz" (clock ticks of utime+stime from
// /proc/<pid>/stat, and CLK_TCK); a missing file is "no figure".
func readCPU(path string) (float64, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, false, fmt.Errorf("%s: want \"before after hz\", got %q", path, b)
	}
	var v [3]float64
	for i, s := range f {
		if v[i], err = strconv.ParseFloat(s, 64); err != nil {
			return 0, false, fmt.Errorf("%s: %w", path, err)
		}
	}
	if v[2] <= 0 || v[1] < v[0] {
		return 0, false, fmt.Errorf("%s: bad ticks %q", path, b)
	}
	return (v[1] - v[0]) / v[2], true, nil
}
