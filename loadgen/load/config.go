package load

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// Op is an operation class: the unit latencies and errors are reported by.
type Op string

// Operation classes.
const (
	OpCreate   Op = "create"   // new task (remote: SendMessage to the synthetic agent)
	OpGet      Op = "get"      // read one task
	OpReplace  Op = "replace"  // unconditional Replace with a new status (embedded only)
	OpAppend   Op = "append"   // AppendHistory of a new message (embedded only)
	OpCancel   Op = "cancel"   // Cancel (remote: CancelTask)
	OpDelete   Op = "delete"   // Delete (embedded only)
	OpList     Op = "list"     // first page of a list, by context half the time, with totals
	OpTraverse Op = "traverse" // a full checked traversal; latency is the whole walk
	OpPage     Op = "page"     // one page inside a traversal (recorded, never drawn)
)

// AllOps lists the classes in report order.
var AllOps = []Op{OpCreate, OpGet, OpReplace, OpAppend, OpCancel, OpDelete, OpList, OpTraverse, OpPage}

// remoteOps are the classes a remote A2A server supports: its write path is
// SendMessage (create) and CancelTask; Replace, AppendHistory and Delete have
// no A2A method.
var remoteOps = map[Op]bool{OpCreate: true, OpGet: true, OpCancel: true, OpList: true, OpTraverse: true, OpPage: true}

// Mix is a workload: relative weights of the operation classes a worker
// draws from, and how traversals and lists are shaped.
type Mix struct {
	Name    string
	Doc     string
	Weights map[Op]int
	// TraverseByContext is the share (0..1) of traversals filtered to one
	// (skew-drawn, so usually hot) context; the rest walk every task.
	TraverseByContext float64
	// PageSize for lists and traversals; 0 = Config.PageSize.
	PageSize int
}

// Workloads are the named mixes. Weights are per operation drawn; a traversal
// counts as one operation however many pages it reads.
var Workloads = map[string]Mix{
	"write-heavy": {
		Name: "write-heavy",
		Doc:  "mostly mutations: 30% create, 20% replace, 15% append, 5% cancel, 5% delete, 20% get, 4% list, 1% traverse",
		Weights: map[Op]int{OpCreate: 30, OpReplace: 20, OpAppend: 15, OpCancel: 5, OpDelete: 5,
			OpGet: 20, OpList: 4, OpTraverse: 1},
		TraverseByContext: 0.9,
	},
	"read-heavy": {
		Name: "read-heavy",
		Doc:  "mostly reads: 60% get, 25% list, 1% traverse, 14% writes (create, replace, append, cancel)",
		Weights: map[Op]int{OpGet: 60, OpList: 25, OpTraverse: 1,
			OpCreate: 5, OpReplace: 5, OpAppend: 3, OpCancel: 1},
		TraverseByContext: 0.9,
	},
	"traversal-under-churn": {
		Name: "traversal-under-churn",
		Doc:  "checked traversals beside heavy churn: 10% traverse (3 in 4 of one context), 90% create/replace/append/cancel/delete",
		Weights: map[Op]int{OpTraverse: 10,
			OpCreate: 25, OpReplace: 30, OpAppend: 20, OpCancel: 5, OpDelete: 10},
		TraverseByContext: 0.75,
	},
	"send-only": {
		Name:    "send-only",
		Doc:     "100% create (remote: SendMessage round trips, no traversals): the server's write path alone",
		Weights: map[Op]int{OpCreate: 100},
	},
	"list-only": {
		Name:    "list-only",
		Doc:     "100% first pages with totals, by context half the time (remote: ListTasks round trips)",
		Weights: map[Op]int{OpList: 100},
	},
	"list-deep": {
		Name: "list-deep",
		Doc:  "deep pagination: 40% full traversals of everything at page size 100, 40% first pages, 20% writes",
		Weights: map[Op]int{OpTraverse: 40, OpList: 40,
			OpCreate: 10, OpReplace: 5, OpAppend: 5},
		TraverseByContext: 0,
		PageSize:          100,
	},
}

// WorkloadNames returns the names of Workloads, sorted.
func WorkloadNames() []string {
	var n []string
	for k := range Workloads {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Transports a remote target can be reached over.
var Transports = []string{"jsonrpc", "http", "grpc"}

// Config is one load run. The zero value is valid: traversal-under-churn on
// an in-memory store, 8 workers, 10,000 operations over 2,000 initial tasks.
type Config struct {
	// Target is "mem" (default), "pebble", "pg", or the base URL of an
	// a2astore server (http://host:port; its agent card is read from there),
	// or several, comma-separated, of servers that behave as one (a
	// -cluster deployment): calls go to each in turn, and the checks hold
	// across them.
	Target string
	// Dir is the Pebble directory (Target "pebble"); "" = a temporary
	// directory removed afterwards.
	Dir string
	// PebbleNoSync acknowledges Pebble writes before fsync. Default false.
	PebbleNoSync bool
	// Log opens an embedded store with its task log (K7) on, the log
	// a2astore-server keeps: the initial load writes each task's Create
	// entry and every write its entry; loadgen trims none. Default false.
	Log bool
	// DSN is the PostgreSQL connection string (Target "pg").
	DSN string
	// Replicas are DSNs of hot standbys of DSN's primary that the store's
	// Get and List may run on (Target "pg"; pgstore.Options.Replicas).
	Replicas []string
	// Transport for a remote Target: jsonrpc (default), http or grpc.
	Transport string
	// Caller is the identity every call carries, for a server that
	// authorizes by caller (a2astore-server -policy owner) or, embedded, an
	// authz dispatcher under OwnerPolicy over the store, which then owns
	// the tasks it creates (the store must record owners: an
	// engine.OwnerStore). "" = none: no dispatcher.
	Caller string
	// Callers, when above 1, spreads the run over that many identities,
	// Caller-1 … Caller-N (Caller default "loadgen"): each context belongs
	// to one of them, so a task is created, read, changed, canceled and
	// listed by the same caller, who owns it, and traversals walk one
	// context at a time (no caller sees every task).
	Callers int
	// CallerHeader is the header carrying the identity. Default
	// "X-A2astore-Caller".
	CallerHeader string
	// Store, if set, is the embedded store to drive (Target is then only a
	// label, default "custom"). The caller closes it.
	Store engine.Store

	// Workload names a mix in Workloads. Default "traversal-under-churn".
	Workload string
	// Concurrency is the number of workers (closed loop: each issues its next
	// operation when the previous one returns). Default 8.
	Concurrency int
	// Rate, when > 0, paces operations at this many per second in total
	// (open loop); latency is then measured from each operation's scheduled
	// start, so queueing behind a slow store counts. Default 0: closed loop.
	Rate float64
	// Duration stops the run after this long. Ops stops it after that many
	// operations. When both are zero, Ops is 10,000. When both are set, the
	// first reached stops the run.
	Duration time.Duration
	Ops      int64
	// Seed makes the run reproducible (data set, operation draws). 0 = from
	// the clock; the seed used is in Result.Seed.
	Seed uint64

	// Initial is the number of tasks written before the run. Default 2,000
	// (500 for a remote target). Negative: none. An embedded store gets
	// them through its bulk path (engine/bulkload: the store's
	// engine.Importer, Create without one), and a store holding a stopped
	// load of the same Seed and Shape has it completed; a remote target by
	// SendMessage from the workers.
	Initial int
	// Shape of the initial and created tasks (contexts, skew, history and
	// artifacts); Shape.Seed is derived from Seed when 0.
	Shape taskgen.Shape
	// PageSize for lists and traversals (1..100). Default 50.
	PageSize int

	// PushReceiver, if set, is the address of a built-in webhook receiver
	// (a remote target only): it records each push delivery by task,
	// checks the A2A-Task-Revision order (a revision received after a
	// higher one is an order violation, one received twice a duplicate)
	// and, after the run, the losses: tasks loadgen saw terminal whose
	// terminal event did not arrive within PushGrace. Loopback only
	// unless PushReceiverPublic.
	PushReceiver       string
	PushReceiverPublic bool
	// PushURL, if set, is the webhook every task loadgen creates is
	// configured with (SendMessage configuration.taskPushNotificationConfig).
	// Default: the receiver's URL when PushReceiver is set.
	PushURL string
	// PushGrace is how long the receiver waits after the run for the
	// terminal events still owed. Default 30s; negative: no wait.
	PushGrace time.Duration
	// PushDown, when > 0, makes the receiver refuse connections (its
	// listener and connections closed) for PushDown at the end of every
	// PushEvery, then listen again on the same address.
	PushDown  time.Duration
	PushEvery time.Duration

	// MetricsAddr, if set, serves loadgen's Prometheus metrics (and, for an
	// embedded target, the store's) at http://MetricsAddr/metrics.
	MetricsAddr string
	// Registry, if set, receives the metrics instead of a fresh registry.
	Registry *prometheus.Registry

	// Progress receives a status line every ProgressInterval (default 1s);
	// nil = none. With ProgressTTY the line is rewritten in place.
	Progress         io.Writer
	ProgressInterval time.Duration
	ProgressTTY      bool
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.Target == "" {
		c.Target = "mem"
		if c.Store != nil {
			c.Target = "custom"
		}
	}
	if c.Transport == "" {
		c.Transport = "jsonrpc"
	}
	if c.CallerHeader == "" {
		c.CallerHeader = "X-A2astore-Caller"
	}
	if c.Workload == "" {
		c.Workload = "traversal-under-churn"
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.Duration <= 0 && c.Ops <= 0 {
		c.Ops = 10000
	}
	if c.Initial == 0 {
		c.Initial = 2000
		if c.Remote() {
			c.Initial = 500
		}
	}
	if c.PageSize == 0 {
		c.PageSize = 50
	}
	if c.PushGrace == 0 {
		c.PushGrace = 30 * time.Second
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = time.Second
	}
}

// Remote reports whether Target is a server URL.
func (c *Config) Remote() bool {
	return strings.HasPrefix(c.Target, "http://") || strings.HasPrefix(c.Target, "https://")
}

// Targets returns the server URLs of a remote Target.
func (c *Config) Targets() []string { return strings.Split(c.Target, ",") }

// Validate reports a configuration that cannot run.
func (c *Config) Validate() error {
	var errs []error
	if _, ok := Workloads[c.Workload]; !ok {
		errs = append(errs, fmt.Errorf("unknown workload %q (want one of %s)", c.Workload, strings.Join(WorkloadNames(), ", ")))
	}
	switch {
	case c.Store != nil:
	case c.Remote():
		for _, u := range c.Targets() {
			if _, err := url.Parse(u); err != nil || !(strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) {
				errs = append(errs, fmt.Errorf("target %q: not an http(s) URL", u))
			}
		}
		if !slices.Contains(Transports, c.Transport) {
			errs = append(errs, fmt.Errorf("unknown transport %q (want jsonrpc, http or grpc)", c.Transport))
		}
	case c.Target == "mem", c.Target == "pebble":
	case c.Target == "pg":
		if c.DSN == "" {
			errs = append(errs, errors.New("target pg needs a DSN"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown target %q (want mem, pebble, pg or http://host:port)", c.Target))
	}
	if c.PageSize < 1 || c.PageSize > 100 {
		errs = append(errs, fmt.Errorf("page size %d out of 1..100", c.PageSize))
	}
	if c.Rate < 0 {
		errs = append(errs, errors.New("negative rate"))
	}
	if c.Callers < 0 {
		errs = append(errs, errors.New("negative number of callers"))
	}
	if c.Log && (c.Remote() || c.Store != nil) {
		errs = append(errs, errors.New("the task log is for a store loadgen opens (mem, pebble, pg): a server, or a store handed in, keeps its own log or none"))
	}
	return errors.Join(append(errs, c.validatePush()...)...)
}

// validatePush checks the push workload and receiver settings.
func (c *Config) validatePush() []error {
	var errs []error
	if (c.PushReceiver != "" || c.PushURL != "") && !c.Remote() {
		errs = append(errs, errors.New("push notifications need a remote target (an a2astore server)"))
	}
	if c.PushReceiver != "" && !c.PushReceiverPublic && !isLoopback(c.PushReceiver) {
		errs = append(errs, fmt.Errorf("push receiver %q: not a loopback address", c.PushReceiver))
	}
	if u, err := url.Parse(c.PushURL); c.PushURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		errs = append(errs, fmt.Errorf("push URL %q: not an http(s) URL", c.PushURL))
	}
	if c.PushDown > 0 && (c.PushReceiver == "" || c.PushEvery <= c.PushDown) {
		errs = append(errs, errors.New("push down windows need a receiver and a period longer than the window"))
	}
	return errs
}

// picker draws operation classes with a Mix's weights.
type picker struct {
	ops []Op
	cum []int // cumulative weights
}

// newPicker keeps the classes the target supports; the weight of the others
// goes to create (remote targets), so the write share stays the same.
func newPicker(m Mix, supported func(Op) bool) picker {
	var p picker
	moved := 0
	for _, op := range AllOps {
		w := m.Weights[op]
		if w <= 0 {
			continue
		}
		if !supported(op) {
			moved += w
			continue
		}
		p.ops = append(p.ops, op)
		p.cum = append(p.cum, w)
	}
	if moved > 0 {
		if i := slices.Index(p.ops, OpCreate); i >= 0 {
			p.cum[i] += moved
		} else {
			p.ops = append(p.ops, OpCreate)
			p.cum = append(p.cum, moved)
		}
	}
	for i := 1; i < len(p.cum); i++ {
		p.cum[i] += p.cum[i-1]
	}
	return p
}

// pick maps r, uniform in [0, total), to a class.
func (p picker) pick(r int) Op {
	i, _ := slices.BinarySearch(p.cum, r+1)
	return p.ops[i]
}

func (p picker) total() int { return p.cum[len(p.cum)-1] }
