package pushdelivery

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
)

// Options configure a Worker. Outbox and Store are required; every other
// field is valid at its zero value.
type Options struct {
	Outbox Outbox
	// Store reads the task logs (ReadLog) and, for a trimmed log, the
	// task itself (Get).
	Store engine.LogStore
	// Client posts the notifications. Default NewClient(ClientOptions{}).
	Client *http.Client
	// Workers bounds the deliveries in flight in this process. Default 4.
	Workers int
	// PerDest bounds the deliveries in flight to one destination
	// (Record.Dest), so that a slow webhook cannot take every worker.
	// Default 2.
	PerDest int
	// PerOwner bounds the deliveries in flight of one owner's tasks (of
	// one task, for a task without owner), so that no owner's webhooks
	// can take every worker (SPEC N4; see fair.go for the bound). Default
	// Workers/2; at most Workers-1 when Workers > 1.
	PerOwner int
	// Poll is how often an idle worker claims (Wake claims at once).
	// Default 250ms.
	Poll time.Duration
	// Batch bounds the log entries read per claim. Default 16.
	Batch int
	// MinBackoff and MaxBackoff bound the wait after a failed attempt:
	// MinBackoff doubled per attempt up to MaxBackoff, d, drawn in
	// [d/2, d]. Defaults 1s and 60s.
	MinBackoff, MaxBackoff time.Duration
	// Deadline: an entry whose webhook has been failing for this long is
	// dropped (and counted); so is, unsent, an entry whose turn comes
	// this long after it was logged. Default 1h.
	Deadline time.Duration
	// ClaimBudget: a claim posts no further entry once it has run this
	// long since it was claimed (the log read included), and commits;
	// keep it well below the outbox's lease (30 s by default), so that a
	// claim past its deadline trying one entry after another against a
	// hanging webhook does not outlive its lease. Whatever the budget, a
	// post still running shortly before the lease ends (Lease.Until, less
	// 5 s or a fifth of the lease for the commit) is cut off and counted
	// as a timeout, and a claim that returns past that time posts
	// nothing. Default 10s.
	ClaimBudget time.Duration
	// Clock reads the time. Default time.Now.
	Clock func() time.Time
	// Metrics records deliveries. Default nil: none.
	Metrics *Metrics
	// Logger logs failures of the store and the outbox (never a URL's
	// query, a token or credentials). Default slog.Default().
	Logger *slog.Logger
	// Rand draws the backoff's jitter. Default a randomly seeded source.
	Rand *rand.Rand
	// Tracer, when set, makes a span of each POST, a child of the span
	// that produced the event, and sends its traceparent to the webhook
	// (trace.go; SPEC H2). Default nil: no spans, no traceparent.
	Tracer trace.Tracer
}

func (o *Options) ensureDefaults() {
	if o.Client == nil {
		o.Client = NewClient(ClientOptions{})
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Workers, 4)
	def(&o.PerDest, 2)
	def(&o.PerOwner, max(1, o.Workers/2))
	if o.Workers > 1 {
		o.PerOwner = min(o.PerOwner, o.Workers-1)
	}
	def(&o.Batch, 16)
	o.Batch = min(o.Batch, engine.MaxLogRead)
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defd(&o.Poll, 250*time.Millisecond)
	defd(&o.MinBackoff, time.Second)
	defd(&o.MaxBackoff, time.Minute)
	defd(&o.Deadline, time.Hour)
	defd(&o.ClaimBudget, 10*time.Second)
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
}

// Worker claims due records from the outbox and delivers their tasks' log
// entries to their webhooks. Create it with Start; stop it with Close.
type Worker struct {
	o      Options
	ctx    context.Context // deliveries run under it
	cancel context.CancelFunc
	stop   chan struct{} // closed by Close: claim no more
	wake   chan struct{} // one pending wake-up
	slots  chan struct{} // one per delivery in flight (Workers)
	looped chan struct{} // closed when the claim loop has returned
	once   sync.Once
	wg     sync.WaitGroup // deliveries in flight

	mu struct {
		sync.Mutex
		dests    map[string]int                     // deliveries in flight per Dest
		keys     map[string]int                     // deliveries in flight per owner (ownerKey)
		owners   map[a2a.TaskID]string              // the ownerKey of tasks claimed
		byKey    map[string]map[a2a.TaskID]struct{} // owners inverted
		breakers map[string]*breaker                // failing destinations
		rand     *rand.Rand
	}
	producers producers // the spans that produced tasks' events (trace.go)
}

// Start starts a worker claiming from o.Outbox until Close or until ctx
// ends.
func Start(ctx context.Context, o Options) *Worker {
	o.ensureDefaults()
	w := &Worker{
		o:      o,
		stop:   make(chan struct{}),
		wake:   make(chan struct{}, 1),
		slots:  make(chan struct{}, o.Workers),
		looped: make(chan struct{}),
	}
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.mu.dests = make(map[string]int)
	w.mu.keys = make(map[string]int)
	w.mu.owners = make(map[a2a.TaskID]string)
	w.mu.byKey = make(map[string]map[a2a.TaskID]struct{})
	w.mu.breakers = make(map[string]*breaker)
	w.mu.rand = o.Rand
	go w.loop()
	return w
}

// Wake tells the worker that an event of task was committed: it claims at
// once rather than at its next poll. When the outbox implements
// interface{ Touch(a2a.TaskID) } it is told first (so that an outbox
// that tracks due tasks learns of it).
func (w *Worker) Wake(task a2a.TaskID) {
	if t, ok := w.o.Outbox.(interface{ Touch(a2a.TaskID) }); ok && task != "" {
		t.Touch(task)
	}
	w.poke()
}

func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Sender is the push.Sender to give a2a-go's request handler
// (a2asrv.WithPushNotifications): its SendPush only wakes the worker,
// since the event is already in the task's log (and, with
// Options.Tracer, notes its caller's span as the event's producer); it
// never posts and never fails.
func (w *Worker) Sender() push.Sender { return sender{w} }

type sender struct{ w *Worker }

func (s sender) SendPush(ctx context.Context, config *a2a.PushConfig, event a2a.Event) error {
	var id a2a.TaskID
	if event != nil {
		id = event.TaskInfo().TaskID
	}
	if id == "" && config != nil {
		id = config.TaskID
	}
	s.w.note(ctx, id)
	s.w.Wake(id)
	return nil
}

// Close stops claiming and waits for the claim and the deliveries in
// flight to finish until ctx ends; then it cancels them and returns ctx's
// error (a delivery canceled commits what it delivered before; the leases
// of the others expire and their records are claimed again).
func (w *Worker) Close(ctx context.Context) error {
	w.once.Do(func() { close(w.stop) })
	done := make(chan struct{})
	go func() {
		<-w.looped // a Claim in progress ends first (no Add after it)
		w.wg.Wait()
		close(done)
	}()
	defer w.cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		w.cancel()
		<-done
		return ctx.Err()
	}
}

// loop claims due records while a worker slot is free, and waits for a
// wake-up, a finished delivery or the poll when none is due.
func (w *Worker) loop() {
	defer close(w.looped)
	timer := time.NewTimer(w.o.Poll)
	defer timer.Stop()
	for {
		select { // a free slot
		case w.slots <- struct{}{}:
		case <-w.stop:
			return
		case <-w.ctx.Done():
			return
		}
		if w.claim() {
			continue
		}
		<-w.slots
		timer.Reset(w.o.Poll)
		select {
		case <-w.wake:
		case <-timer.C:
		case <-w.stop:
			return
		case <-w.ctx.Done():
			return
		}
	}
}

// claim claims one due record and starts its delivery in a goroutine
// holding the slot the caller took; false when none is due. It claims
// fairly (fair.go): first passing over the owners with a delivery in
// flight and the failing destinations, then over those at their limits
// only; a record whose owner turns out to be at its limit is given back,
// due now (giveBack).
func (w *Worker) claim() bool {
	for range maxClaimTries {
		claimed := w.o.Clock()
		l, drain, err := w.next(claimed)
		if err != nil {
			if w.ctx.Err() == nil {
				w.o.Logger.Warn("pushdelivery: claim", "err", err)
			}
			return false
		}
		if l == nil {
			return false
		}
		if drain { // posts nothing: no owner's or destination's slot
			w.start(func() { w.deliver(w.ctx, l, delivery{claimed: claimed, drain: true}) })
			return true
		}
		rec := l.Record()
		key, dest := w.key(w.ctx, rec.TaskID), rec.Dest
		if !w.admit(key, dest, claimed) {
			w.giveBack(l, claimed)
			continue
		}
		w.start(func() {
			w.deliver(w.ctx, l, delivery{claimed: claimed})
			w.done(key, dest)
		})
		return true
	}
	w.poke() // records given back: claim again, knowing their owners now
	return false
}

// giveBack gives back a record claimed at now whose owner is at its
// limit, due at now: behind the records due before it, so that the next
// claims reach them (SPEC N4). Released as it was, it stayed first: an
// owner with more due tasks than the owner cache (the fair pass knows
// its tasks by the cache) held another owner's record back for ever,
// each round claiming and giving back the same tasks of hers the cache
// had forgotten. Its delivery state is otherwise unchanged; a commit
// that fails releases it.
func (w *Worker) giveBack(l Lease, now time.Time) {
	rctx, cancel := detached(w.ctx)
	defer cancel()
	rec := l.Record()
	if !rec.NextAt.Before(now) {
		l.Release(rctx)
		return
	}
	rec.NextAt = now
	if err := l.Commit(rctx, rec); err != nil && !errors.Is(err, ErrLeaseLost) {
		l.Release(rctx)
	}
}

// next claims a record at now by the passes of fair.go: the owners with
// nothing in flight and the destinations not failing first; then, on an
// outbox that can (Drainer), a record of a destination set aside past
// the deadline (drain: its delivery posts nothing, whatever its owner
// has in flight); then any record within the limits.
func (w *Worker) next(now time.Time) (l Lease, drain bool, err error) {
	busy, skip := w.skips(now, true)
	if l, err = w.o.Outbox.Claim(w.ctx, now, busy, skip...); l != nil || err != nil {
		return l, false, err
	}
	if d, ok := w.o.Outbox.(Drainer); ok {
		if dests := w.expiredDests(now); len(dests) > 0 {
			if l, err = d.ClaimAmong(w.ctx, now, dests); l != nil || err != nil {
				return l, true, err
			}
		}
	}
	busy, skip = w.skips(now, false)
	l, err = w.o.Outbox.Claim(w.ctx, now, busy, skip...)
	return l, false, err
}

// start runs a delivery in a goroutine holding the slot the caller took,
// then frees the slot and claims again.
func (w *Worker) start(deliver func()) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		deliver()
		<-w.slots
		w.poke() // a slot and maybe a destination are free again
	}()
}

// backoff is the wait after the attempts-th failed attempt of an entry.
func (w *Worker) backoff(attempts int) time.Duration {
	d := w.o.MinBackoff
	for i := 1; i < attempts && d < w.o.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.o.MaxBackoff)
	w.mu.Lock()
	j := w.mu.rand.Int64N(int64(d/2) + 1)
	w.mu.Unlock()
	return d/2 + time.Duration(j)
}
