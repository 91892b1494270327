package pushdelivery

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/fakeclock"
)

// harness is a worker over a memstore and a fake outbox, on a clock the
// test drives. Its Poll is an hour: only Wake makes it claim.
type harness struct {
	t       testing.TB
	ctx     context.Context
	clock   *fakeclock.Clock
	store   *memstore.Store
	outbox  *fakeOutbox
	reg     *prometheus.Registry
	metrics *Metrics
	o       Options
	w       *Worker
}

func newHarness(t testing.TB, mod func(*Options)) *harness {
	t.Helper()
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Options{Log: true, Clock: clock.Micros})
	t.Cleanup(func() { store.Close() })
	h := &harness{t: t, ctx: context.Background(), clock: clock, store: store,
		outbox: newFakeOutbox(store, clock.Now), reg: prometheus.NewRegistry()}
	h.metrics = NewMetrics(h.reg, nil)
	h.o = Options{
		Outbox: h.outbox, Store: store, Client: NewClient(ClientOptions{AllowPrivate: true}),
		Poll: time.Hour, Clock: clock.Now, Metrics: h.metrics,
		Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewPCG(1, 2)),
	}
	if mod != nil {
		mod(&h.o)
	}
	first := &firstClaim{Outbox: h.o.Outbox, done: make(chan struct{})}
	h.o.Outbox = first
	h.w = Start(h.ctx, h.o)
	select { // the claim a worker makes when it starts, over an empty outbox
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker made no claim when it started")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.w.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return h
}

// firstClaim is an outbox that tells when its first Claim has returned.
// A worker claims once when it starts: until that claim has read the
// outbox, a record the test saves may be delivered without a Wake (seen
// on a loaded machine: TestClaimBudget's first claim read the log before
// the updates and posted one entry).
type firstClaim struct {
	Outbox
	once sync.Once
	done chan struct{}
}

// Touch passes Wake's Touch on, when the outbox takes it.
func (o *firstClaim) Touch(task a2a.TaskID) {
	if t, ok := o.Outbox.(Toucher); ok {
		t.Touch(task)
	}
}

// DueNow passes a recovery on, when the outbox takes it.
func (o *firstClaim) DueNow(ctx context.Context, dest string, now time.Time) (int, error) {
	if r, ok := o.Outbox.(Recoverer); ok {
		return r.DueNow(ctx, dest, now)
	}
	return 0, nil
}

// ClaimAmong passes a drain on, when the outbox takes it.
func (o *firstClaim) ClaimAmong(ctx context.Context, now time.Time, dests []string) (Lease, error) {
	if d, ok := o.Outbox.(Drainer); ok {
		return d.ClaimAmong(ctx, now, dests)
	}
	return nil, nil
}

func (o *firstClaim) Claim(ctx context.Context, now time.Time, busy []string, skip ...a2a.TaskID) (Lease, error) {
	l, err := o.Outbox.Claim(ctx, now, busy, skip...)
	o.once.Do(func() { close(o.done) })
	return l, err
}

// config saves a push config of task to u, cursor at 0.
func (h *harness) config(task a2a.TaskID, id, u string) {
	h.t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		h.t.Fatal(err)
	}
	r := &Record{TaskID: task, Config: a2a.PushConfig{TaskID: task, ID: id, URL: u},
		Dest: p.Scheme + "://" + p.Host, Created: h.clock.Now()}
	if err := h.outbox.Save(h.ctx, r); err != nil {
		h.t.Fatal(err)
	}
}

// create creates task id, submitted (revision 1).
func (h *harness) create(id a2a.TaskID) {
	h.t.Helper()
	task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	if _, err := h.store.Create(h.ctx, task); err != nil {
		h.t.Fatal(err)
	}
}

// update moves task id to state st with a status update event.
func (h *harness) update(id a2a.TaskID, st a2a.TaskState) int64 {
	h.t.Helper()
	r, err := h.store.Get(h.ctx, id)
	if err != nil {
		h.t.Fatal(err)
	}
	r.Task.Status = a2a.TaskStatus{State: st}
	ev := &a2a.TaskStatusUpdateEvent{TaskID: id, ContextID: r.Task.ContextID, Status: r.Task.Status}
	r, err = h.store.Replace(engine.WithEvent(h.ctx, ev), r.Task, r.Revision)
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Revision
}

// idle reports whether no record is leased and none is due (a record to
// a destination the worker has set aside is not).
func (h *harness) idle() bool {
	now := h.clock.Now()
	h.w.mu.Lock()
	inFlight := len(h.w.mu.dests)
	h.w.mu.Unlock()
	if inFlight > 0 { // between a commit and the end of its delivery
		return false
	}
	aside, _ := h.w.skips(now, false)
	o := h.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.mu.recs {
		if f.token != 0 {
			return false
		}
		if !f.r.NextAt.After(now) && o.behind(f) && !slices.Contains(aside, f.r.Dest) {
			return false
		}
	}
	return true
}

// settle wakes the worker and waits until it is idle.
func (h *harness) settle() {
	h.t.Helper()
	h.w.Wake("")
	eventually(h.t, "worker idle", h.idle)
}

// drive settles, then moves the clock by step, until cond holds.
func (h *harness) drive(step time.Duration, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.settle()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("driving the clock: %s never held", what)
		}
		h.clock.Advance(step)
	}
}

// eventually polls cond until it holds, failing after 10s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !within(10*time.Second, cond) {
		t.Fatalf("waited 10s for: %s", what)
	}
}

// within polls cond until it holds (true) or d has passed (false).
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// counter reads a counter of the harness's registry.
func (h *harness) counter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }

// hit is a notification a receiver answered with 2xx.
type hit struct {
	task   a2a.TaskID
	rev    int64
	header http.Header
	event  a2a.Event
}

// receiver is a webhook recording the notifications it accepts; answer,
// when set, gives the status of each request (0: 200) and may block.
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	answer func(r *http.Request, n int) int
	mu     struct {
		sync.Mutex
		n    int // requests received
		hits []hit
	}
}

func newReceiver(t testing.TB, answer func(r *http.Request, n int) int) *receiver {
	rc := &receiver{t: t, answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rc.mu.Lock()
	rc.mu.n++
	n := rc.mu.n
	rc.mu.Unlock()
	status := http.StatusOK
	if rc.answer != nil {
		if s := rc.answer(r, n); s != 0 {
			status = s
		}
	}
	if status/100 == 2 {
		var sr a2a.StreamResponse
		if err := json.Unmarshal(body, &sr); err != nil {
			rc.t.Errorf("receiver: payload %q: %v", body, err)
			status = http.StatusBadRequest
		} else {
			rev, _ := strconv.ParseInt(r.Header.Get(HeaderRevision), 10, 64)
			rc.mu.Lock()
			rc.mu.hits = append(rc.mu.hits, hit{sr.Event.TaskInfo().TaskID, rev, r.Header.Clone(), sr.Event})
			rc.mu.Unlock()
		}
	}
	w.WriteHeader(status)
}

// hits returns the accepted notifications.
func (rc *receiver) hits() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.mu.hits)
}

// revs returns the accepted revisions of task, in arrival order.
func (rc *receiver) revs(task a2a.TaskID) []int64 {
	var revs []int64
	for _, h := range rc.hits() {
		if h.task == task {
			revs = append(revs, h.rev)
		}
	}
	return revs
}

// requests returns how many requests arrived.
func (rc *receiver) requests() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.mu.n
}
