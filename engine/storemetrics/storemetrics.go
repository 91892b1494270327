package storemetrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/a2astore/a2astore/engine"
)

// Options configure a Store. The zero value is valid.
type Options struct {
	// Backend is the value of the backend label. Default "unknown".
	Backend string
	// Namespace prefixes every series name. Default "a2astore".
	Namespace string
	// DurationBuckets are the latency histogram buckets in seconds.
	// Default: 50 µs to ~1.6 s, doubling.
	DurationBuckets []float64
	// Tracer, when set, starts a span per operation called under a span,
	// a child of the span in the call's context (H2; an operation with no
	// span in its context makes none): its name is "store." + the operation,
	// its attributes the backend, the operation and its outcome, and for
	// List the page size asked, the tasks returned, the entries examined
	// and counted and which filters were set — never an ID, a filter's
	// value, task content, a token or a credential. Default: no spans.
	Tracer trace.Tracer
}

// EnsureDefaults fills unset fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Backend == "" {
		o.Backend = "unknown"
	}
	if o.Namespace == "" {
		o.Namespace = "a2astore"
	}
	if len(o.DurationBuckets) == 0 {
		o.DurationBuckets = prometheus.ExponentialBuckets(50e-6, 2, 16)
	}
}

// Operations and outcomes, the label values of the latency histogram.
const (
	OpCreate        = "create"
	OpGet           = "get"
	OpReplace       = "replace"
	OpCancel        = "cancel"
	OpAppendHistory = "append_history"
	OpDelete        = "delete"
	OpList          = "list"
)

// Store is an engine.Store that records metrics about the store it wraps.
// It is also the prometheus.Collector for those metrics.
type Store struct {
	next    engine.Store
	backend string
	tracer  trace.Tracer

	duration *prometheus.HistogramVec
	// observers caches duration's observer per (operation, outcome):
	// WithLabelValues hashes and looks its labels up on every call.
	observers sync.Map // opOutcome → prometheus.Observer
	pageSize  prometheus.Observer
	examined  prometheus.Observer
	counted   prometheus.Counter
	computed  prometheus.Counter
	skipped   prometheus.Counter

	collectors []prometheus.Collector
}

var (
	_ engine.OwnerStore    = (*Store)(nil)
	_ engine.Checker       = (*Store)(nil)
	_ io.Closer            = (*Store)(nil)
	_ prometheus.Collector = (*Store)(nil)
)

// New wraps next. Register the returned Store to export its series.
func New(next engine.Store, opts Options) *Store {
	opts.EnsureDefaults()
	constLabels := prometheus.Labels{"backend": opts.Backend}
	s := &Store{next: next, backend: opts.Backend, tracer: opts.Tracer}
	s.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace:   opts.Namespace,
		Subsystem:   "store",
		Name:        "operation_duration_seconds",
		Help:        "Latency of engine.Store operations by operation and outcome.",
		ConstLabels: constLabels,
		Buckets:     opts.DurationBuckets,
	}, []string{"operation", "outcome"})
	pageSize := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace:   opts.Namespace,
		Subsystem:   "store",
		Name:        "list_page_tasks",
		Help:        "Tasks returned per successful List page.",
		ConstLabels: constLabels,
		Buckets:     []float64{0, 1, 5, 10, 20, 50, 100},
	})
	examined := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace:   opts.Namespace,
		Subsystem:   "store",
		Name:        "list_examined_entries",
		Help:        "Index entries (or rows) a successful List page read, look-ahead included, as reported by the backend.",
		ConstLabels: constLabels,
		Buckets:     []float64{1, 2, 6, 11, 21, 51, 101, 200, 1000, 10000},
	})
	counted := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace:   opts.Namespace,
		Subsystem:   "store",
		Name:        "list_counted_entries_total",
		Help:        "Entries inspected to compute List totals, as reported by the backend.",
		ConstLabels: constLabels,
	})
	totals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace:   opts.Namespace,
		Subsystem:   "store",
		Name:        "list_totals_total",
		Help:        "Successful List calls that computed TotalSize (total=computed) or skipped it (total=skipped).",
		ConstLabels: constLabels,
	}, []string{"total"})
	s.pageSize, s.examined, s.counted = pageSize, examined, counted
	s.computed = totals.WithLabelValues("computed")
	s.skipped = totals.WithLabelValues("skipped")
	s.collectors = []prometheus.Collector{s.duration, pageSize, examined, counted, totals}
	return s
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() engine.Store { return s.next }

// Describe implements prometheus.Collector.
func (s *Store) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range s.collectors {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (s *Store) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s.collectors {
		c.Collect(ch)
	}
}

// Outcome is the outcome label value for an operation's error.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, engine.ErrInvalidArgument):
		return "invalid_argument"
	case errors.Is(err, engine.ErrNotFound):
		return "not_found"
	case errors.Is(err, engine.ErrAlreadyExists):
		return "already_exists"
	case errors.Is(err, engine.ErrRevisionConflict):
		return "revision_conflict"
	case errors.Is(err, engine.ErrNotCancelable):
		return "not_cancelable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "internal"
}

// opOutcome keys the observer cache.
type opOutcome struct{ op, outcome string }

// call is one operation under way: its start and its span.
type call struct {
	s     *Store
	op    string
	start time.Time
	span  trace.Span
}

// begin starts op: its clock and its span, a child of ctx's.
// The span is started bare and described only when it records; with no
// tracer (the default) there is none, so an operation pays no allocation
// for it on the list path.
func (s *Store) begin(ctx context.Context, op string) (context.Context, call) {
	// No tracer, or no span to be a child of (background work: seeding,
	// retention, finishing abandoned tasks, each of which would otherwise
	// be a trace of one span): no span, and no context for one.
	if s.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, call{s: s, op: op, start: time.Now(), span: noop.Span{}}
	}
	ctx, span := s.tracer.Start(ctx, spanNames[op])
	if span.IsRecording() {
		span.SetAttributes(attrBackend.String(s.backend), attrOperation.String(op))
	}
	return ctx, call{s: s, op: op, start: time.Now(), span: span}
}

// spanNames are the spans' names by operation, built once.
var spanNames = func() map[string]string {
	m := map[string]string{}
	for _, op := range []string{OpCreate, OpGet, OpReplace, OpCancel, OpAppendHistory, OpDelete, OpList, OpRemoveExpired} {
		m[op] = "store." + op
	}
	return m
}()

// end observes the call's latency under its outcome and ends its span.
// The span carries the outcome's class, never the error's text (which may
// name a task).
func (c call) end(err error) {
	k := opOutcome{c.op, Outcome(err)}
	o, ok := c.s.observers.Load(k)
	if !ok {
		o, _ = c.s.observers.LoadOrStore(k, c.s.duration.WithLabelValues(k.op, k.outcome))
	}
	o.(prometheus.Observer).Observe(time.Since(c.start).Seconds())
	if c.span.IsRecording() {
		c.span.SetAttributes(attrOutcome.String(k.outcome))
		if err != nil {
			c.span.SetStatus(codes.Error, k.outcome)
		}
	}
	c.span.End()
}

// Create implements engine.Store.
func (s *Store) Create(ctx context.Context, task *a2a.Task) (engine.Record, error) {
	ctx, sp := s.begin(ctx, OpCreate)
	rec, err := s.next.Create(ctx, task)
	sp.end(err)
	return rec, err
}

// CreateOwned implements engine.OwnerStore: the wrapped store's
// CreateOwned, observed as a create. Over a store that does not record
// owners, an owner other than "" fails with engine.ErrOwnersUnsupported
// (and "" is Create, O1).
func (s *Store) CreateOwned(ctx context.Context, task *a2a.Task, owner string) (engine.Record, error) {
	ctx, sp := s.begin(ctx, OpCreate)
	var rec engine.Record
	var err error
	switch o, ok := s.next.(engine.OwnerStore); {
	case ok:
		rec, err = o.CreateOwned(ctx, task, owner)
	case owner == "":
		rec, err = s.next.Create(ctx, task)
	default:
		err = errOwnersUnsupported
	}
	sp.end(err)
	return rec, err
}

var errOwnersUnsupported = fmt.Errorf("storemetrics: %w", engine.ErrOwnersUnsupported)

// Get implements engine.Store.
func (s *Store) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	ctx, sp := s.begin(ctx, OpGet)
	rec, err := s.next.Get(ctx, id)
	sp.end(err)
	return rec, err
}

// Replace implements engine.Store.
func (s *Store) Replace(ctx context.Context, task *a2a.Task, expectedRevision int64) (engine.Record, error) {
	ctx, sp := s.begin(ctx, OpReplace)
	rec, err := s.next.Replace(ctx, task, expectedRevision)
	sp.end(err)
	return rec, err
}

// Cancel implements engine.Store.
func (s *Store) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	ctx, sp := s.begin(ctx, OpCancel)
	rec, err := s.next.Cancel(ctx, id)
	sp.end(err)
	return rec, err
}

// AppendHistory implements engine.Store.
func (s *Store) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	ctx, sp := s.begin(ctx, OpAppendHistory)
	rec, err := s.next.AppendHistory(ctx, id, msg)
	sp.end(err)
	return rec, err
}

// Delete implements engine.Store.
func (s *Store) Delete(ctx context.Context, id a2a.TaskID) error {
	ctx, sp := s.begin(ctx, OpDelete)
	err := s.next.Delete(ctx, id)
	sp.end(err)
	return err
}

// List implements engine.Store. The examined and counted entries are the
// backend's figures from ListResponse.Stats; the response is returned as
// the backend gave it (TaskOwners included). An owner-filtered request to
// a store that does not record owners fails with
// engine.ErrOwnersUnsupported instead of reaching it.
func (s *Store) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	ctx, sp := s.begin(ctx, OpList)
	var resp *engine.ListResponse
	var err error
	if _, ok := s.next.(engine.OwnerStore); !ok && req != nil && req.Owner != "" {
		err = errOwnersUnsupported // a store without owners would ignore the filter
	} else {
		resp, err = s.next.List(ctx, req)
	}
	if err == nil && req != nil && sp.span.IsRecording() {
		sp.span.SetAttributes(listAttributes(req, resp)...)
	}
	sp.end(err)
	if err != nil {
		return resp, err
	}
	s.pageSize.Observe(float64(len(resp.Tasks)))
	if resp.Stats.Examined > 0 {
		s.examined.Observe(float64(resp.Stats.Examined))
	}
	s.counted.Add(float64(resp.Stats.Counted))
	if req.IncludeTotalSize {
		s.computed.Inc()
	} else {
		s.skipped.Inc()
	}
	return resp, nil
}

// Close closes the wrapped store when it can be closed (io.Closer), so a
// caller holding only the decorator releases the backend through it.
func (s *Store) Close() error {
	if c, ok := s.next.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// CheckInvariants runs the wrapped store's invariant check when it has one
// (engine.Checker), so conformance runs through the decorator keep it.
func (s *Store) CheckInvariants() error {
	if c, ok := s.next.(engine.Checker); ok {
		return c.CheckInvariants()
	}
	return nil
}

// Span attributes (H2): the backend, the operation and its outcome on every
// span; on List's, the page's shape and cost.
var (
	attrBackend   = attribute.Key("a2astore.backend")
	attrOperation = attribute.Key("a2astore.operation")
	attrOutcome   = attribute.Key("a2astore.outcome")
	attrPageSize  = attribute.Key("a2astore.list.page_size")
	attrTasks     = attribute.Key("a2astore.list.tasks")
	attrExamined  = attribute.Key("a2astore.list.examined")
	attrCounted   = attribute.Key("a2astore.list.counted")
	attrTotal     = attribute.Key("a2astore.list.total_size")
	attrFilters   = attribute.Key("a2astore.list.filters")
)

// listAttributes describes a page for its span: sizes, costs and the names
// of the filters set, none of their values.
func listAttributes(req *engine.ListRequest, resp *engine.ListResponse) []attribute.KeyValue {
	var filters []string
	if req.ContextID != "" {
		filters = append(filters, "context")
	}
	if req.Status != "" {
		filters = append(filters, "status")
	}
	if req.Owner != "" {
		filters = append(filters, "owner")
	}
	if req.StatusTimestampAfter != nil {
		filters = append(filters, "status_timestamp_after")
	}
	return []attribute.KeyValue{
		attrPageSize.Int(req.PageSize), attrTasks.Int(len(resp.Tasks)),
		attrExamined.Int(resp.Stats.Examined), attrCounted.Int(resp.Stats.Counted),
		attrTotal.Bool(req.IncludeTotalSize), attrFilters.StringSlice(filters),
	}
}
