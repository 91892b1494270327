package pgcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pgstore"
)

// Options configures a Cluster. The zero value is valid except for
// TaskStore, which is required.
type Options struct {
	// Schema is the PostgreSQL schema of the cluster tables; the same as
	// the task store's. Default "public".
	Schema string
	// Instance names this instance in lease rows (lease_owner) and in the
	// notification connection's application_name. Default host:pid.
	Instance string
	// TaskStore is the task store without any authorization policy, used
	// by the cluster's own bookkeeping: resuming a task on a retry and
	// finishing as FAILED a task whose attempts are used up. Required.
	TaskStore taskstore.Store
	// Log is the same store as an engine.LogStore, opened with its log on
	// and notifying this cluster's channel (StoreOptions): event readers
	// follow the task log, which every task write extends in its own
	// transaction (K7). Required.
	Log LogStore
	// LeaseTimeout is how long a claimed work item stays with its instance
	// without a heartbeat; heartbeats come every third of it. A dead
	// instance's work is taken over within LeaseTimeout plus one rescue
	// interval (a quarter of it). Default 30 s.
	LeaseTimeout time.Duration
	// MaxAttempts is how many times an execution is started before its task
	// is finished as FAILED. Default 3.
	MaxAttempts int
	// RetryDelay is how long an execution item that failed waits before
	// its next attempt (cancel items retry at once). Default 1 s.
	RetryDelay time.Duration
	// PollInterval is the safety-net poll of readers and the work loop for
	// a notification that never came; the database wakes them otherwise.
	// Default 10 s.
	PollInterval time.Duration
	// Retention is how long finished work items, and the events of tasks
	// that ended, are kept. Default 1 h.
	Retention time.Duration
	// CleanInterval is how often the cleaner runs. Default Retention/10,
	// at most 1 min.
	CleanInterval time.Duration
	// Logger receives the cluster's warnings. Default slog.Default().
	Logger *slog.Logger
	// ObserveDelivery, when set, is called for each event a reader of this
	// instance delivers, with the time from the event's insert (the
	// database clock) to its delivery here: the event delivery latency
	// across instances. Default none.
	ObserveDelivery func(time.Duration)
	// Tracer, when set, runs each claimed execution and cancelation in a
	// span that continues the trace of the call that wrote its work item
	// (trace.go; SPEC H2). Work items carry the writer's W3C trace
	// context whether or not it is set. Default nil: no spans.
	Tracer trace.Tracer
}

// Defaults of Options.
const (
	DefaultLeaseTimeout = 30 * time.Second
	DefaultMaxAttempts  = 3
	DefaultRetryDelay   = time.Second
	DefaultPollInterval = 10 * time.Second
	DefaultRetention    = time.Hour
)

// cancelAttempts bounds the attempts of a cancel item, which retries at
// once when the execution wrote in between (a revision conflict).
const cancelAttempts = 20

// EnsureDefaults fills the zero fields.
func (o *Options) EnsureDefaults() {
	if o.Schema == "" {
		o.Schema = "public"
	}
	if o.Instance == "" {
		host, _ := os.Hostname()
		o.Instance = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if o.LeaseTimeout <= 0 {
		o.LeaseTimeout = DefaultLeaseTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.CleanInterval <= 0 {
		o.CleanInterval = min(o.Retention/10, time.Minute)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// ErrLeaseLost is the heartbeat error of an execution whose lease another
// instance took over: a2a-go stops the execution.
var ErrLeaseLost = errors.New("pgcluster: lease lost")

// ErrCanceled is the cause of an execution context canceled because its
// task was canceled (on any instance).
var ErrCanceled = errors.New("pgcluster: task canceled")

// ErrClosed is returned by a Cluster's queues after Close.
var ErrClosed = errors.New("pgcluster: closed")

// Cluster is one instance's share of the cluster: its work queue, its
// event queue and the background services (notification listener, lease
// rescuer, cleaner). Create it with New, hand WorkQueue and QueueManager
// to a2asrv.WithClusterMode, Close it before the pool.
type Cluster struct {
	pool *pgxpool.Pool
	opts Options
	sql  statements

	events  *eventManager
	work    *workQueue
	queue   workqueue.Queue
	stats   Stats
	closed  chan struct{}
	closeMu sync.Once
	// workClosed stops the work loop (StopWork) before Close.
	workClosed chan struct{}
	workOnce   sync.Once

	listener *listener
	rescuer  *rescuer
	cleaner  *cleaner

	// epoch is the origin of the lease clock (now).
	epoch time.Time
	// skew is added to the clock of the lease checks (tests
	// simulate a stalled instance with it).
	skew atomic.Int64
	// onIdle, when set (tests), is called when a reader has read every
	// stored event and waits to be woken.
	onIdle func(a2a.TaskID)
	// beforeReconnect, when set (tests), is called by the listener before
	// it connects again after losing its connection.
	beforeReconnect atomic.Pointer[func()]
	// beforeComplete, when set (tests), is called at each attempt to
	// complete a work item; an error fails the attempt.
	beforeComplete atomic.Pointer[func() error]
	// beforeExecution, when set (tests), is called when a claimed
	// execution reaches a2a-go's before-execution callback.
	beforeExecution atomic.Pointer[func(a2a.TaskID)]
	// afterHandOverLook, when set (tests), is called by HandOver once it
	// has taken its list of running executions.
	afterHandOverLook atomic.Pointer[func()]
	// awaitingCancel, when set (tests), is called when an execution
	// waits for a cancelation of its task running here (awaitCancel).
	awaitingCancel atomic.Pointer[func(a2a.TaskID)]
	// awaitingWrite, when set (tests), is called when HandOver waits
	// for a store write of an execution it hands over (awaitWrite).
	awaitingWrite atomic.Pointer[func(a2a.TaskID)]
}

// now is the clock of the lease checks (K4): the time since epoch on the
// monotonic clock, never the wall clock — a wall clock stepped back (an
// NTP correction) would extend this instance's own view of its leases
// past their expiry in the database, and let a stalled execution write
// after another instance took its task over.
func (c *Cluster) now() time.Duration { return time.Since(c.epoch) + time.Duration(c.skew.Load()) }

// Stats are the cluster's counters since New, for metrics.
type Stats struct {
	Claimed          atomic.Int64 // work items claimed by this instance
	Takeovers        atomic.Int64 // expired leases this instance's rescuer returned to the queue
	Retries          atomic.Int64 // failed work items this instance returned for another attempt
	GaveUp           atomic.Int64 // tasks this instance finished as FAILED after MaxAttempts
	GiveUpsSetAside  atomic.Int64 // work items whose give-up failed and this instance's rescuer set aside
	HandedOver       atomic.Int64 // executions this instance gave back to the queue at shutdown (HandOver)
	CanceledHere     atomic.Int64 // executions on this instance stopped by a cancel
	Events           atomic.Int64 // events this instance's readers delivered
	CancelsSeen      atomic.Int64 // executions stopped because a heartbeat or a recheck found their task ended (K8)
	Answered         atomic.Int64 // executions completed (claimed, returned or given up) without running again: their message was answered (K8)
	FollowUpWaits    atomic.Int64 // follow-up messages that waited for the previous execution to finish
	Reconnects       atomic.Int64 // times the notification connection was re-established
	Notifications    atomic.Int64 // notifications received
	CleanedEvents    atomic.Int64 // reply and event rows the cleaner deleted
	CleanedWorkItems atomic.Int64 // work rows the cleaner deleted
}

// New installs the cluster tables when missing and starts the instance's
// background services.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Cluster, error) {
	opts.EnsureDefaults()
	if opts.TaskStore == nil || opts.Log == nil {
		return nil, errors.New("pgcluster: Options.TaskStore and Options.Log are required")
	}
	if got, want := opts.Log.LogNotifyChannel(), channel(opts.Schema); got != want {
		return nil, fmt.Errorf("pgcluster: Options.Log notifies channel %q, not the cluster's %q: open it with StoreOptions", got, want)
	}
	if _, err := opts.Log.ReadLog(ctx, "pgcluster-probe", 0, 1); err != nil {
		return nil, fmt.Errorf("pgcluster: Options.Log: %w", err)
	}
	if err := install(ctx, pool, opts.Schema); err != nil {
		return nil, err
	}
	c := &Cluster{pool: pool, opts: opts, sql: newStatements(opts.Schema), epoch: time.Now(), closed: make(chan struct{}), workClosed: make(chan struct{})}
	c.events = newEventManager(c)
	c.work = newWorkQueue(c)
	c.queue = workqueue.NewPullQueue(c.work, &workqueue.PullQueueConfig{
		ReadRetry:               &workqueue.ExponentialReadBackoff{BaseDelay: 50 * time.Millisecond, MaxDelay: 2 * time.Second},
		BeforeExecutionCallback: c.work.beforeExecution,
		AfterExecutionCallback:  c.work.afterExecution,
	})
	c.listener = newListener(c)
	c.rescuer = newRescuer(c)
	c.cleaner = newCleaner(c)
	c.listener.Start()
	c.rescuer.Start()
	c.cleaner.Start()
	return c, nil
}

// WorkQueue is the workqueue.Queue for a2asrv.ClusterConfig.
func (c *Cluster) WorkQueue() workqueue.Queue { return c.queue }

// QueueManager is the eventqueue.Manager for a2asrv.ClusterConfig.
func (c *Cluster) QueueManager() eventqueue.Manager { return c.events }

// Stats returns the instance's counters.
func (c *Cluster) Stats() *Stats { return &c.stats }

// Instance is the name of this instance in lease rows.
func (c *Cluster) Instance() string { return c.opts.Instance }

// QueueDepth counts the open work items: waiting and running.
func (c *Cluster) QueueDepth(ctx context.Context) (waiting, running int64, err error) {
	err = c.pool.QueryRow(ctx, c.sql.depth).Scan(&waiting, &running)
	return waiting, running, err
}

// Close stops the background services and the work loop (executions in
// progress run on; their items are taken over when their leases expire if
// the process exits first) and wakes every reader with
// eventqueue.ErrQueueClosed. It does not close the pool.
func (c *Cluster) Close() error {
	c.StopWork()
	c.closeMu.Do(func() {
		close(c.closed)
		c.listener.Stop()
		c.rescuer.Stop()
		c.cleaner.Stop()
	})
	return nil
}

// StopWork stops claiming work: the instance's work loop ends (executions
// in progress run on) while its readers go on delivering events. A server
// shutting down calls it first, then Close once its calls have drained.
func (c *Cluster) StopWork() {
	c.workOnce.Do(func() { close(c.workClosed) })
}

// ExecutionsRunning counts the executions this instance holds a lease for.
func (c *Cluster) ExecutionsRunning() int { return c.work.running() }

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// notifyPayload is the payload of a notification about taskID: kind
// ('e' a log entry or reply, 'w' work, 'c' a cancelation done, 'd' an
// execution done) then the task ID, or the kind alone when the ID would
// not fit a notification (8000 bytes), which wakes all.
func notifyPayload(kind byte, taskID a2a.TaskID) string { return pgstore.NotifyPayload(kind, taskID) }

// execer runs a statement: a pool, or a transaction to notify in.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// notify sends the cluster's notification of kind for taskID through db
// (in db's transaction, when it is one).
func (c *Cluster) notify(ctx context.Context, db execer, kind byte, taskID a2a.TaskID) error {
	_, err := db.Exec(ctx, "SELECT pg_notify($1, $2)", channel(c.opts.Schema), notifyPayload(kind, taskID))
	return err
}

// LogStore is what the cluster needs of the task store: its log (K7), and
// a way to wake this process's log readers when another instance's
// notification says it wrote an entry. *pgstore.Store opened with
// StoreOptions is one.
type LogStore interface {
	engine.LogStore
	WakeLog(a2a.TaskID)
	WakeAllLogs()
	LogNotifyChannel() string
}

// StoreOptions returns opts with what the cluster needs of the task store
// on schema: its log on, notifying the cluster's channel.
func StoreOptions(opts pgstore.Options) pgstore.Options {
	opts.Log = true
	opts.LogNotify = Channel(opts.Schema)
	return opts
}

// Channel is the notification channel of the cluster in schema ("" is
// "public").
func Channel(schema string) string {
	if schema == "" {
		schema = "public"
	}
	return channel(schema)
}

// channel is the notification channel of the cluster tables in schema:
// "a2a_cluster:" and the schema, or, when that would be longer than a
// PostgreSQL identifier (63 bytes: pg_notify refuses a longer channel,
// LISTEN truncates it), "a2a_cluster:" and a hash of the schema.
func channel(schema string) string {
	if ch := "a2a_cluster:" + schema; len(ch) <= maxIdentifierBytes {
		return ch
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(schema))
	return fmt.Sprintf("a2a_cluster:%016x", h.Sum64())
}

// maxIdentifierBytes is PostgreSQL's identifier length (NAMEDATALEN-1).
const maxIdentifierBytes = 63

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// Lease describes the latest execution item of a task.
type Lease struct {
	Owner   string // instance that claimed it last ("" when none holds it)
	State   string // available, running or done
	Attempt int    // attempts started
}

// ExecutionLease returns the latest execution item of taskID;
// pgx.ErrNoRows when the task never had one.
func (c *Cluster) ExecutionLease(ctx context.Context, taskID a2a.TaskID) (Lease, error) {
	var l Lease
	var owner *string
	err := c.pool.QueryRow(ctx, c.sql.lease, string(taskID)).Scan(&owner, &l.State, &l.Attempt)
	if owner != nil {
		l.Owner = *owner
	}
	return l, err
}
