package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/bulkload"
	"github.com/a2astore/a2astore/engine/storemetrics"
	"github.com/a2astore/a2astore/internal/backends"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/taskgen"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/taskiter"
)

// maxViolations bounds the violations kept in a Result (all are counted).
const maxViolations = 100

// Result is a finished run.
type Result struct {
	Target      string  `json:"target"`
	Transport   string  `json:"transport,omitempty"`
	Workload    string  `json:"workload"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"`
	Log         bool    `json:"log,omitempty"` // the store kept its task log (Config.Log)
	Seed        uint64  `json:"seed"`
	Initial     int     `json:"initial_tasks"`
	// Load is how the initial tasks were written.
	Load     *LoadStats `json:"load,omitempty"`
	PageSize int        `json:"page_size"`

	Start      time.Time `json:"start"`
	ElapsedSec float64   `json:"elapsed_sec"`

	Ops   map[Op]OpStats `json:"ops"`
	Total OpStats        `json:"total"`

	Traversals     int64       `json:"traversals"`      // completed and checked
	TraversalPages int64       `json:"traversal_pages"` // pages they read
	ExactlyOnce    int64       `json:"exactly_once_checked"`
	CursorChecks   int64       `json:"cursor_checks"` // cursor comparisons (per task embedded, per page boundary remote)
	ViolationCount int64       `json:"violation_count"`
	Violations     []Violation `json:"violations,omitempty"` // the first 100
	LiveTasks      int         `json:"live_tasks_at_end"`

	// Push is what the push receiver saw (Config.PushReceiver); with a
	// push URL and no receiver only the URL is set.
	Push *PushStats `json:"push,omitempty"`

	// Schedule says how far a paced run (Rate > 0) fell behind its
	// schedule; nil when unpaced.
	Schedule *ScheduleStats `json:"schedule,omitempty"`

	// GC is the collector's work during the run, in this process: set for
	// embedded targets only (then it is the store's process).
	GC *GCStats `json:"gc,omitempty"`

	Machine Machine `json:"machine"`
}

// LoadStats is how the initial data set was written: embedded, through
// the store's bulk path (engine/bulkload: its engine.Importer in batches,
// Create without one), resuming a stopped load of the same data set;
// remote, by SendMessage from the workers.
type LoadStats struct {
	Path        string  `json:"path"` // import, create, or send (remote)
	Written     int     `json:"written"`
	Found       int     `json:"found"` // already in the store: a stopped load's
	Sec         float64 `json:"sec"`
	TasksPerSec float64 `json:"tasks_per_sec"`
}

// Machine describes where the run happened.
type Machine struct {
	GOOS     string `json:"goos"`
	GOARCH   string `json:"goarch"`
	CPUs     int    `json:"cpus"`
	LoadAvg  string `json:"loadavg_at_end,omitempty"` // /proc/loadavg
	Hostname string `json:"hostname,omitempty"`
}

// Elapsed is the measured duration.
func (r *Result) Elapsed() time.Duration { return time.Duration(r.ElapsedSec * float64(time.Second)) }

// Err reports why the run failed its checks: invariant violations or
// internal errors. nil = clean.
func (r *Result) Err() error {
	var errs []error
	if r.ViolationCount > 0 {
		errs = append(errs, fmt.Errorf("%d live-traversal violations (seed %d)", r.ViolationCount, r.Seed))
	}
	if n := r.Total.Errors[ClassInternal]; n > 0 {
		errs = append(errs, fmt.Errorf("%d internal errors (seed %d)", n, r.Seed))
	}
	if p := r.Push; p != nil && p.violations() > 0 {
		errs = append(errs, fmt.Errorf("push: %d order violations, %d malformed deliveries, %d losses", p.OrderViolations, p.Malformed, p.Losses))
	}
	return errors.Join(errs...)
}

// runner is one run's state.
type runner struct {
	cfg     Config
	mix     Mix
	pick    picker
	seed    uint64
	tgt     target
	tracker *tracker
	metrics *metrics
	rec     map[Op]*opRecorder
	push    *pushRun // nil without a push workload
	// store is the embedded store itself, under the decorators (nil
	// remote): the initial data goes to it through the bulk path.
	store  engine.Store
	ids    *callers
	loaded *LoadStats

	opsIssued  atomic.Int64 // slots claimed
	nextID     atomic.Int64 // embedded task numbers
	traversals atomic.Int64
	pagesRead  atomic.Int64
	checked    atomic.Int64
	compared   atomic.Int64
	stopping   atomic.Bool
	lag        lagGauge // how far a paced run is behind its schedule
	start      time.Time
	gcStart    gcSample // the collector's counters at start

	vmu struct {
		sync.Mutex
		count int64
		list  []Violation
	}
}

// Run executes one load run. The error is for runs that could not be done
// (invalid Config, store or server unreachable, initial data not loaded);
// a run that completed returns its Result, whose Err reports violations and
// internal errors. Canceling ctx stops the run early; the Result covers what
// ran.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, mix: Workloads[cfg.Workload], tracker: newTracker(), rec: map[Op]*opRecorder{}}
	r.seed = cfg.Seed
	if r.seed == 0 {
		r.seed = uint64(time.Now().UnixNano())
	}
	if r.mix.PageSize == 0 {
		r.mix.PageSize = cfg.PageSize
	}
	if cfg.Callers > 1 {
		// No one caller sees every task: traversals are of one context,
		// whose tasks all belong to the caller that walks it (Callers).
		r.mix.TraverseByContext = 1
	}
	for _, op := range AllOps {
		r.rec[op] = newOpRecorder()
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	r.metrics = newMetrics(reg, cfg.Workload, cfg.Target, r.tracker)
	var err error

	if r.push, err = startPush(&r.cfg, r.seed, r.metrics.push); err != nil {
		return nil, err
	}
	defer r.push.close()
	closeTarget, err := r.open(ctx, reg)
	if err != nil {
		return nil, err
	}
	defer closeTarget()
	r.pick = newPicker(r.mix, r.tgt.supports)

	if cfg.MetricsAddr != "" {
		stop, err := serveMetrics(cfg.MetricsAddr, reg)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	if err := r.load(ctx); err != nil {
		return nil, fmt.Errorf("initial data (seed %d): %w", r.seed, err)
	}
	res := r.run(ctx)
	if r.push != nil {
		res.Push = r.push.finish(ctx, r.cfg.PushGrace)
	}
	return res, nil
}

func serveMetrics(addr string, reg *prometheus.Registry) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, nil
}

// open connects the target; embedded stores are wrapped in storemetrics and
// their backend collectors registered in reg. With caller identities an
// embedded store must record owners: it is driven through an authz
// dispatcher under OwnerPolicy, each call as its caller.
func (r *runner) open(ctx context.Context, reg prometheus.Registerer) (func(), error) {
	cfg := &r.cfg
	if cfg.Remote() {
		rt, err := dialRemote(ctx, cfg)
		if err != nil {
			return nil, err
		}
		rt.push = r.push
		r.tgt = rt
		return func() { _ = rt.close() }, nil
	}
	s, rm := cfg.Store, func() {}
	if s == nil {
		bcfg := backends.Config{Name: cfg.Target, PGDSN: cfg.DSN, PGReplicas: cfg.Replicas, Log: cfg.Log}
		if cfg.Target == "pebble" {
			bcfg.PebbleDir = cfg.Dir
			if bcfg.PebbleDir == "" {
				tmp, err := os.MkdirTemp("", "loadgen-pebble-")
				if err != nil {
					return nil, err
				}
				bcfg.PebbleDir, rm = tmp, func() { _ = os.RemoveAll(tmp) }
			}
			bcfg.Pebble = pebblestore.Options{NoSync: cfg.PebbleNoSync, Logger: pebblelog.Quiet{Errors: os.Stderr}}
		}
		b, err := backends.Open(ctx, bcfg)
		if err != nil {
			rm()
			return nil, err
		}
		reg.MustRegister(b.Collectors...)
		s = b.Store
	}
	ids := newCallers(cfg)
	if _, ok := s.(engine.OwnerStore); ids.any() && !ok {
		if c, ok := s.(io.Closer); ok && cfg.Store == nil {
			_ = c.Close()
		}
		rm()
		return nil, fmt.Errorf("caller identities on target %s: %w", cfg.Target, errNoOwners)
	}
	r.store, r.ids = s, ids
	m := storemetrics.New(s, storemetrics.Options{Backend: cfg.Target})
	reg.MustRegister(m)
	r.tgt = storeTarget{s: m, ids: ids}
	if ids.any() {
		r.tgt = storeTarget{s: authz.New(m, authz.OwnerPolicy{}), ids: ids}
	}
	if cfg.Store != nil {
		return func() {}, nil // the caller's store: the caller closes it
	}
	return func() { _ = m.Close(); rm() }, nil // closes the backend through the decorator
}

// errNoOwners is the error of caller identities on an embedded store that
// does not record task owners (not an engine.OwnerStore).
var errNoOwners = errors.New("the store does not record task owners (not an engine.OwnerStore)")

// load writes the initial data set: embedded, through the bulk path;
// remote, by creates from Concurrency workers.
func (r *runner) load(ctx context.Context) error {
	n := max(r.cfg.Initial, 0)
	r.nextID.Store(int64(n))
	if r.store != nil {
		return r.loadBulk(ctx, n)
	}
	began := time.Now()
	err := r.loadRemote(ctx, n)
	sec := time.Since(began).Seconds()
	r.loaded = &LoadStats{Path: "send", Written: n, Sec: sec, TasksPerSec: float64(n) / max(sec, 1e-9)}
	return err
}

// loadBulk writes task 0..n-1 of the run's data set (one generator, so a
// run with the same seed and shape makes the same tasks and resumes a
// stopped load) into the embedded store through engine/bulkload, each
// owned by the caller of its context, and registers them with the tracker.
func (r *runner) loadBulk(ctx context.Context, n int) error {
	gen := taskgen.New(r.shape(1000))
	res, err := bulkload.Load(ctx, r.store, bulkload.Config{
		N: n,
		Task: func(i int) (*a2a.Task, string) {
			task := gen.Task(i)
			owner := r.ids.forContext(task.ContextID)
			r.ids.created(task.ID, owner)
			r.tracker.added(task.ID, task.ContextID)
			return task, owner
		},
		Progress:      r.cfg.Progress,
		ProgressEvery: r.cfg.ProgressInterval,
	})
	r.loaded = &LoadStats{Path: res.Path, Written: res.Written, Found: res.Found, Sec: res.Elapsed.Seconds(), TasksPerSec: res.Rate()}
	return err
}

// loadRemote creates the initial data set with Concurrency workers.
func (r *runner) loadRemote(ctx context.Context, n int) error {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		emu  sync.Mutex
		errs []error
	)
	for w := range r.cfg.Concurrency {
		wg.Go(func() {
			gen := taskgen.New(r.shape(uint64(w) + 1000))
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				task := gen.Task(int(i))
				id, err := r.tgt.create(ctx, task)
				if err != nil {
					emu.Lock()
					errs = append(errs, fmt.Errorf("create %s: %w", task.ID, err))
					emu.Unlock()
					return
				}
				r.tracker.added(id, task.ContextID)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// shape is the configured Shape with a seed derived from the run's.
func (r *runner) shape(stream uint64) taskgen.Shape {
	s := r.cfg.Shape
	if s.Seed == 0 {
		s.Seed = r.seed ^ (stream * 0x9e3779b97f4a7c15)
		if s.Seed == 0 {
			s.Seed = 1
		}
	}
	return s
}

// run drives the workers until the op count, the duration or ctx ends it.
func (r *runner) run(ctx context.Context) *Result {
	// Operations in flight finish on their own context: only the caller's
	// ctx cuts them; the duration and op count stop new ones.
	opCtx := ctx
	r.gcStart = readGC()
	r.start = time.Now()
	var timer *time.Timer
	if r.cfg.Duration > 0 {
		timer = time.AfterFunc(r.cfg.Duration, func() { r.stopping.Store(true) })
		defer timer.Stop()
	}
	stopProgress := r.progress()
	var wg sync.WaitGroup
	for w := range r.cfg.Concurrency {
		wg.Go(func() { r.worker(opCtx, uint64(w)) })
	}
	wg.Wait()
	elapsed := time.Since(r.start)
	stopProgress()
	return r.result(elapsed)
}

// claim reserves the next operation slot; false = stop. With a Rate it
// waits for the slot's scheduled time and returns it.
func (r *runner) claim(ctx context.Context) (time.Time, bool) {
	if r.stopping.Load() || ctx.Err() != nil {
		return time.Time{}, false
	}
	n := r.opsIssued.Add(1)
	if r.cfg.Ops > 0 && n > r.cfg.Ops {
		r.stopping.Store(true)
		return time.Time{}, false
	}
	if r.cfg.Rate <= 0 {
		return time.Now(), true
	}
	at := r.start.Add(time.Duration(float64(n-1) / r.cfg.Rate * float64(time.Second)))
	d := time.Until(at)
	r.lag.observe(-d)
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
	return at, true
}

// worker is one closed-loop (or paced) client.
func (r *runner) worker(ctx context.Context, w uint64) {
	rng := rand.New(rand.NewPCG(r.seed, w+1))
	gen := taskgen.New(r.shape(w + 1))
	total := r.pick.total()
	msgN := 0
	for {
		at, ok := r.claim(ctx)
		if !ok {
			return
		}
		op := r.pick.pick(rng.IntN(total))
		r.metrics.inFlight.Inc()
		sent := time.Now()
		err := r.do(ctx, op, rng, gen, &msgN)
		r.metrics.inFlight.Dec()
		if errors.Is(err, errAbandoned) || ctxDone(ctx, err) {
			return
		}
		r.observe(op, time.Since(at), time.Since(sent), err)
	}
}

var errAbandoned = errors.New("traversal abandoned at the end of the run")

// observe records one operation: d from its scheduled start, svc from its
// send (the same in an unpaced run).
func (r *runner) observe(op Op, d, svc time.Duration, err error) {
	class := Classify(err)
	r.rec[op].record(d, svc, class)
	outcome := class
	if outcome == "" {
		outcome = "ok"
	}
	r.metrics.duration.WithLabelValues(string(op), outcome).Observe(d.Seconds())
}

// do runs one operation.
func (r *runner) do(ctx context.Context, op Op, rng *rand.Rand, gen *taskgen.Gen, msgN *int) error {
	switch op {
	case OpCreate:
		n := int(r.nextID.Add(1))
		task := gen.Task(n)
		if r.tgt.assignsIDs() {
			id, err := r.tgt.create(ctx, task)
			if err == nil {
				r.tracker.added(id, task.ContextID)
			}
			return err
		}
		r.tracker.begin(task.ID, task.ContextID)
		_, err := r.tgt.create(ctx, task)
		r.tracker.end(task.ID, err == nil, false)
		return err
	case OpList:
		contextID := ""
		if rng.IntN(2) == 0 {
			contextID = taskgen.ContextID(gen.Context())
		}
		_, err := r.tgt.list(ctx, contextID, "", r.mix.PageSize, true)
		return err
	case OpTraverse:
		contextID := ""
		if rng.Float64() < r.mix.TraverseByContext {
			contextID = taskgen.ContextID(gen.Context())
		}
		return r.traverse(ctx, contextID)
	}
	id, contextID, ok := r.tracker.pick(rng.Uint64())
	if !ok {
		return nil
	}
	if op == OpGet {
		return r.tgt.get(ctx, id)
	}
	r.tracker.begin(id, contextID)
	var err error
	switch op {
	case OpReplace:
		task := gen.Task(rng.IntN(1 << 20))
		task.ID, task.ContextID = id, contextID
		for _, m := range task.History {
			m.TaskID, m.ContextID = id, contextID
		}
		err = r.tgt.replace(ctx, task)
	case OpAppend:
		*msgN++
		msg := gen.Message(id, *msgN)
		msg.ID = fmt.Sprintf("%s-%d", msg.ID, rng.Uint64())
		err = r.tgt.appendHistory(ctx, id, msg)
	case OpCancel:
		err = r.tgt.cancel(ctx, id)
	case OpDelete:
		err = r.tgt.delete(ctx, id)
	}
	r.tracker.end(id, false, op == OpDelete && err == nil)
	return err
}

// traverse walks every page of one list, checking L7 as it goes.
func (r *runner) traverse(ctx context.Context, contextID string) error {
	n := r.traversals.Add(1)
	tr := newTraversal(r.seed, n, contextID, r.tracker.now())
	for p, err := range taskiter.Walk("", func(token string) (page, string, error) {
		if r.stopping.Load() && r.cfg.Duration > 0 && time.Since(r.start) > r.cfg.Duration+5*time.Second {
			r.metrics.traversals.WithLabelValues("abandoned").Inc()
			return page{}, "", errAbandoned
		}
		t0 := time.Now()
		p, err := r.tgt.list(ctx, contextID, token, r.mix.PageSize, false)
		if !ctxDone(ctx, err) {
			d := time.Since(t0)
			r.observe(OpPage, d, d, err)
		}
		return p, p.next, err
	}) {
		if err != nil {
			r.traversals.Add(-1)
			return err
		}
		tr.page(p)
	}
	tr.finish(r.tracker)
	r.pagesRead.Add(int64(tr.pages))
	r.metrics.pages.Observe(float64(tr.pages))
	r.checked.Add(int64(tr.seen.len()))
	r.compared.Add(int64(tr.compared))
	if len(tr.out) == 0 {
		r.metrics.traversals.WithLabelValues("ok").Inc()
		return nil
	}
	r.metrics.traversals.WithLabelValues("violated").Inc()
	r.vmu.Lock()
	defer r.vmu.Unlock()
	for _, v := range tr.out {
		if r.cfg.Progress != nil && r.vmu.count < maxViolations {
			fmt.Fprintln(r.cfg.Progress, "\nVIOLATION", v)
		}
		r.metrics.violations.WithLabelValues(v.Kind).Inc()
		r.vmu.count++
		if len(r.vmu.list) < maxViolations {
			r.vmu.list = append(r.vmu.list, v)
		}
	}
	return nil
}

// result assembles the Result.
func (r *runner) result(elapsed time.Duration) *Result {
	res := &Result{
		Target: r.cfg.Target, Workload: r.cfg.Workload, Concurrency: r.cfg.Concurrency, Rate: r.cfg.Rate, Log: r.cfg.Log,
		Seed: r.seed, Initial: max(r.cfg.Initial, 0), Load: r.loaded, PageSize: r.mix.PageSize,
		Start: r.start, ElapsedSec: elapsed.Seconds(), Ops: map[Op]OpStats{},
		Traversals: r.traversals.Load(), TraversalPages: r.pagesRead.Load(), ExactlyOnce: r.checked.Load(), CursorChecks: r.compared.Load(),
		LiveTasks: r.tracker.live(), Machine: machine(),
	}
	if r.cfg.Remote() {
		res.Transport = r.cfg.Transport
	} else {
		res.GC = readGC().since(r.gcStart)
	}
	if r.cfg.Rate > 0 {
		res.Schedule = r.lag.stats()
	}
	all, service := newHist(), newHist()
	errs := map[string]int64{}
	for _, op := range AllOps {
		s := r.rec[op].snapshot(elapsed)
		if s.Count == 0 {
			continue
		}
		res.Ops[op] = s
		if op != OpPage { // pages are inside traversals: counted once, as the traversal
			r.rec[op].merged(all, service)
			for k, v := range s.Errors {
				errs[k] += v
			}
		}
	}
	// A failed page fails its traversal, which is counted with that error
	// class: the page row's errors are not added again.
	res.Total = withService(summarize(all, elapsed, errs), service)
	r.vmu.Lock()
	res.ViolationCount, res.Violations = r.vmu.count, r.vmu.list
	r.vmu.Unlock()
	return res
}

func machine() Machine {
	m := Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.TrimSpace(string(b))
	}
	m.Hostname, _ = os.Hostname()
	return m
}

// progress prints a status line every interval until the returned func is
// called.
func (r *runner) progress() func() {
	w := r.cfg.Progress
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(r.cfg.ProgressInterval)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				if r.cfg.ProgressTTY {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case now := <-t.C:
				line := r.progressLine(now.Sub(last))
				last = now
				if r.cfg.ProgressTTY {
					fmt.Fprint(w, "\r\033[K"+line)
				} else {
					fmt.Fprintln(w, line)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// progressLine summarizes the interval just ended. A paced run (Rate)
// gives its p50/p99 from each operation's send and how far it is behind
// its schedule: the response times it records count from the schedule,
// so once behind they would show the lag, the same for every class.
func (r *runner) progressLine(interval time.Duration) string {
	var b strings.Builder
	var ops, errs int64
	parts := []string{}
	for _, op := range AllOps {
		h, svc, e := r.rec[op].takeInterval()
		if h.TotalCount() == 0 {
			continue
		}
		if op != OpPage {
			ops += h.TotalCount()
		}
		errs += e
		if r.cfg.Rate > 0 {
			h = svc
		}
		p50, p99 := float64(h.ValueAtQuantile(50))/1e6, float64(h.ValueAtQuantile(99))/1e6
		parts = append(parts, fmt.Sprintf("%s %s/%s", op, FormatMillis(p50, 1), FormatMillis(p99, 1)))
	}
	r.vmu.Lock()
	viol := r.vmu.count
	r.vmu.Unlock()
	fmt.Fprintf(&b, "%6.1fs %8.0f ops/s  errors %d  violations %d", time.Since(r.start).Seconds(), float64(ops)/interval.Seconds(), errs, viol)
	if r.push != nil && r.push.book != nil {
		fmt.Fprintf(&b, "  push %d", r.push.deliveries())
	}
	if r.cfg.Rate > 0 {
		fmt.Fprintf(&b, "  behind %.1fs  p50/p99 ms from send: %s", float64(r.lag.last.Load())/1e9, strings.Join(parts, "  "))
		return b.String()
	}
	fmt.Fprintf(&b, "  p50/p99 ms: %s", strings.Join(parts, "  "))
	return b.String()
}
