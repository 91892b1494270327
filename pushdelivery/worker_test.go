package pushdelivery

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/internal/fakeclock"
)

// TestRetryThenRecover: a receiver that fails three times, then recovers,
// gets every event, in order; a retry waits for its backoff on the clock.
func TestRetryThenRecover(t *testing.T) {
	rc := newReceiver(t, func(_ *http.Request, n int) int {
		if n <= 3 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	h := newHarness(t, nil)
	h.config("t1", "c1", rc.srv.URL+"/hook")
	h.create("t1")
	h.update("t1", a2a.TaskStateWorking)
	h.update("t1", a2a.TaskStateCompleted)

	h.settle()
	r := h.outbox.rec("t1", "c1")
	if rc.requests() != 1 || r.Attempts != 1 || r.Delivered != 0 || r.LastError != "status_5xx (503)" {
		t.Fatalf("after one failure: %d requests, record %+v", rc.requests(), r)
	}
	wait := r.NextAt.Sub(h.clock.Now())
	if wait < time.Second/2 || wait > time.Second {
		t.Fatalf("first backoff %v, want in [0.5s, 1s]", wait)
	}
	h.settle() // not due yet: no retry
	if rc.requests() != 1 {
		t.Fatalf("retried before its backoff: %d requests", rc.requests())
	}
	h.drive(time.Second, "t1 done", func() bool { return h.outbox.rec("t1", "c1").Done })

	if got := rc.revs("t1"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("revisions received %v, want [1 2 3]", got)
	}
	r = h.outbox.rec("t1", "c1")
	if r.Delivered != 3 || r.Attempts != 0 || !r.FailingSince.IsZero() || r.LastError != "" {
		t.Fatalf("record after recovery: %+v", r)
	}
	m := h.metrics
	if a, d, f, s := h.counter(m.attempts), h.counter(m.deliveries.WithLabelValues(OutcomeDelivered)),
		h.counter(m.deliveries.WithLabelValues(OutcomeFailed)), h.counter(m.failures.WithLabelValues(Reason5xx)); a != 6 || d != 3 || f != 3 || s != 3 {
		t.Fatalf("attempts %v delivered %v failed %v status_5xx %v, want 6 3 3 3", a, d, f, s)
	}
	if n := testutil.CollectAndCount(m.latency); n != 1 || h.counter(m.leaseLost) != 0 {
		t.Fatalf("latency histogram series %d, lease lost %v", n, h.counter(m.leaseLost))
	}
}

// TestBackoff: exponential from MinBackoff, capped at MaxBackoff, drawn in
// [d/2, d].
func TestBackoff(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	w := &Worker{o: Options{MinBackoff: time.Second, MaxBackoff: time.Minute}}
	w.mu.rand = rand.New(rand.NewPCG(uint64(seed), 0))
	for a := 1; a <= 12; a++ {
		d := min(time.Second<<(a-1), time.Minute)
		for range 100 {
			if got := w.backoff(a); got < d/2 || got > d {
				t.Fatalf("attempt %d: backoff %v, want in [%v, %v]", a, got, d/2, d)
			}
		}
	}
}

// TestDeadlineDrops: a receiver down past the deadline has its entries
// dropped and counted, while another task's webhook keeps receiving.
func TestDeadlineDrops(t *testing.T) {
	down := newReceiver(t, func(*http.Request, int) int { return http.StatusInternalServerError })
	up := newReceiver(t, nil)
	h := newHarness(t, func(o *Options) { o.Deadline = 10 * time.Minute })
	start := h.clock.Now()
	h.config("a", "c", down.srv.URL+"/hook?key=secret")
	h.config("b", "c", up.srv.URL)
	h.create("a")
	h.update("a", a2a.TaskStateWorking)
	h.update("a", a2a.TaskStateCompleted)
	h.settle()
	h.clock.Advance(5 * time.Minute) // a keeps failing; b is written and delivered meanwhile
	h.create("b")
	h.update("b", a2a.TaskStateWorking)
	h.settle()
	if got := up.revs("b"); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("b received %v while a fails, want [1 2]", got)
	}
	h.drive(time.Minute, "a done", func() bool { return h.outbox.rec("a", "c").Done })
	if took := h.clock.Now().Sub(start); took > 12*time.Minute {
		t.Fatalf("dropping took %v: entries after the first waited for deadlines of their own", took)
	}
	h.update("b", a2a.TaskStateCompleted)
	h.settle()

	if got := up.revs("b"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("b received %v, want [1 2 3]", got)
	}
	r := h.outbox.rec("a", "c")
	if r.Delivered != 3 || len(down.hits()) != 0 || strings.Contains(r.LastError, "secret") || strings.Contains(r.LastError, "127.0.0.1") {
		t.Fatalf("record of a: %+v", r)
	}
	if got := h.counter(h.metrics.deliveries.WithLabelValues(OutcomeDropped)); got != 3 {
		t.Fatalf("dropped %v, want 3", got)
	}
	// Entries 2 and 3, logged with 1, were older than the deadline when
	// their turn came: dropped unsent (expired), no attempt.
	failed := h.counter(h.metrics.deliveries.WithLabelValues(OutcomeFailed))
	if attempts := h.counter(h.metrics.attempts); attempts != failed+1+3 {
		t.Fatalf("attempts %v, failed %v: want failed + 1 dropped + 3 delivered", attempts, failed)
	}
	if n := h.counter(h.metrics.failures.WithLabelValues(ReasonExpired)); n != 2 {
		t.Fatalf("%v entries dropped as expired, want 2", n)
	}
}

// TestOrderUnderRandomFailures: several tasks, two webhooks each, receivers
// failing at random: every webhook gets every event of its task once, in
// log order.
func TestOrderUnderRandomFailures(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(uint64(seed), 1)) // the receivers', under mu
	wakes := rand.New(rand.NewPCG(uint64(seed), 2))
	flaky := func(*http.Request, int) int {
		mu.Lock()
		defer mu.Unlock()
		if rnd.IntN(3) == 0 {
			return []int{http.StatusBadGateway, http.StatusTooManyRequests, http.StatusFound}[rnd.IntN(3)]
		}
		return 0
	}
	rcs := []*receiver{newReceiver(t, flaky), newReceiver(t, flaky)}
	h := newHarness(t, func(o *Options) { o.Deadline = 1000 * time.Hour; o.Batch = 3 })
	tasks := []a2a.TaskID{"t0", "t1", "t2", "t3", "t4"}
	for _, id := range tasks {
		h.config(id, "x", rcs[0].srv.URL)
		h.config(id, "y", rcs[1].srv.URL+"/y")
		h.create(id)
	}
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateWorking, a2a.TaskStateWorking, a2a.TaskStateCompleted}
	for _, st := range states {
		for _, id := range tasks {
			h.update(id, st)
			if wakes.IntN(2) == 0 {
				h.w.Wake(id)
			}
		}
	}
	h.drive(time.Minute, "all done", func() bool {
		for _, id := range tasks {
			if !h.outbox.rec(id, "x").Done || !h.outbox.rec(id, "y").Done {
				return false
			}
		}
		return true
	})
	for i, rc := range rcs {
		for _, id := range tasks {
			if got := rc.revs(id); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6}) {
				t.Errorf("receiver %d, task %s: revisions %v, want 1..6 once each in order", i, id, got)
			}
		}
	}
}

// TestHeadersAndPayload: content type, token, authorization and revision
// headers; the payload is a StreamResponse; nothing secret in the
// record's error or the metrics.
func TestHeadersAndPayload(t *testing.T) {
	rc := newReceiver(t, func(_ *http.Request, n int) int {
		if n == 1 {
			return http.StatusUnauthorized
		}
		return 0
	})
	h := newHarness(t, nil)
	u := rc.srv.URL + "/hook?sig=query-secret"
	h.outbox.Save(h.ctx, &Record{TaskID: "t1", Dest: rc.srv.URL, Created: h.clock.Now(),
		Config: a2a.PushConfig{ID: "c1", URL: u, Token: "tok-1", Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-1"}}})
	h.create("t1")
	h.update("t1", a2a.TaskStateCompleted)
	h.settle()
	if r := h.outbox.rec("t1", "c1"); r.LastError != "status_4xx (401)" {
		t.Fatalf("LastError %q", r.LastError)
	}
	h.drive(time.Second, "done", func() bool { return h.outbox.rec("t1", "c1").Done })

	hits := rc.hits()
	if len(hits) != 2 {
		t.Fatalf("%d hits, want 2", len(hits))
	}
	for i, hit := range hits {
		want := map[string]string{"Content-Type": ContentType, HeaderToken: "tok-1",
			"Authorization": "Bearer cred-1", HeaderRevision: []string{"1", "2"}[i]}
		for k, v := range want {
			if got := hit.header.Get(k); got != v {
				t.Errorf("hit %d: %s = %q, want %q", i, k, got, v)
			}
		}
	}
	if task, ok := hits[0].event.(*a2a.Task); !ok || task.ID != "t1" || task.Status.State != a2a.TaskStateSubmitted {
		t.Errorf("first payload %#v, want the submitted task", hits[0].event)
	}
	if ev, ok := hits[1].event.(*a2a.TaskStatusUpdateEvent); !ok || ev.Status.State != a2a.TaskStateCompleted {
		t.Errorf("second payload %#v, want the completed status update", hits[1].event)
	}
	checkNoSecrets(t, h, "query-secret", "tok-1", "cred-1", "/hook", "127.0.0.1")
}

// checkNoSecrets fails if a metric's label holds any of secrets.
func checkNoSecrets(t *testing.T, h *harness, secrets ...string) {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, s := range secrets {
					if strings.Contains(l.GetValue(), s) {
						t.Errorf("metric %s label %s=%q holds %q", mf.GetName(), l.GetName(), l.GetValue(), s)
					}
				}
			}
		}
	}
}

// TestHistoryPassedOver: a history-only entry delivers nothing but moves
// the cursor.
func TestHistoryPassedOver(t *testing.T) {
	rc := newReceiver(t, nil)
	h := newHarness(t, nil)
	h.config("t1", "c1", rc.srv.URL)
	h.create("t1")
	msg := &a2a.Message{ID: "m1", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}
	if _, err := h.store.AppendHistory(h.ctx, "t1", msg); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if got, r := rc.revs("t1"), h.outbox.rec("t1", "c1"); !slices.Equal(got, []int64{1}) || r.Delivered != 2 {
		t.Fatalf("received %v, cursor %d: want [1] and 2", got, r.Delivered)
	}
	h.update("t1", a2a.TaskStateCompleted)
	h.settle()
	if got, r := rc.revs("t1"), h.outbox.rec("t1", "c1"); !slices.Equal(got, []int64{1, 3}) || r.Delivered != 3 || !r.Done {
		t.Fatalf("received %v, record %+v: want [1 3], done at 3", got, r)
	}
}

// TestTrimmedLog: a log trimmed past the cursor delivers the task itself
// at its revision, then the entries after it.
func TestTrimmedLog(t *testing.T) {
	rc := newReceiver(t, nil)
	h := newHarness(t, nil)
	h.create("t1")
	h.update("t1", a2a.TaskStateWorking)
	h.update("t1", a2a.TaskStateInputRequired)
	h.create("t2")
	h.update("t2", a2a.TaskStateWorking)
	h.clock.Advance(time.Minute)
	if _, err := h.store.TrimLog(h.ctx, h.clock.Micros(), 10); err != nil {
		t.Fatal(err)
	}
	h.update("t2", a2a.TaskStateWorking) // t2's log now starts at 3, above its cursor + 1
	h.config("t1", "c", rc.srv.URL)      // no entries at all above the cursor
	h.config("t2", "c", rc.srv.URL)
	h.settle()
	for id, rev := range map[a2a.TaskID]int64{"t1": 3, "t2": 3} {
		hits := slices.DeleteFunc(rc.hits(), func(x hit) bool { return x.task != id })
		if len(hits) != 1 || hits[0].rev != rev {
			t.Fatalf("%s: hits %+v, want one at revision %d", id, hits, rev)
		}
		if task, ok := hits[0].event.(*a2a.Task); !ok || task.ID != id {
			t.Fatalf("%s: payload %#v, want the task", id, hits[0].event)
		}
	}
	h.update("t1", a2a.TaskStateCompleted)
	h.settle()
	if got, r := rc.revs("t1"), h.outbox.rec("t1", "c"); !slices.Equal(got, []int64{3, 4}) || !r.Done {
		t.Fatalf("t1: received %v, record %+v", got, r)
	}
}

// blocking is a receiver answer that holds each request until release is
// closed (or the request ends), counting those in flight.
type blocking struct {
	release  chan struct{}
	mu       sync.Mutex
	inFlight int
}

func newBlocking() *blocking { return &blocking{release: make(chan struct{})} }

func (b *blocking) answer(r *http.Request, _ int) int {
	b.mu.Lock()
	b.inFlight++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
	}()
	select {
	case <-b.release:
		return 0
	case <-r.Context().Done():
		return http.StatusServiceUnavailable
	}
}

func (b *blocking) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}

// inFlight starts a harness whose task t1's first notification hangs at
// its receiver (until b.release is closed).
func inFlight(t *testing.T) (*harness, *blocking, *receiver) {
	b := newBlocking()
	rc := newReceiver(t, b.answer)
	h := newHarness(t, nil)
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	h.w.Wake("t1")
	eventually(t, "a request in flight", func() bool { return b.count() == 1 })
	return h, b, rc
}

// TestCloseDrains: Close waits for the delivery in flight and it commits;
// it claims no more afterwards.
func TestCloseDrains(t *testing.T) {
	h, b, rc := inFlight(t)
	closed := make(chan error)
	go func() { closed <- h.w.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v with a delivery in flight", err)
	default:
	}
	close(b.release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if r := h.outbox.rec("t1", "c"); r.Delivered != 1 || h.outbox.leased("t1", "c") {
		t.Fatalf("record after Close: %+v", r)
	}
	h.update("t1", a2a.TaskStateCompleted)
	h.w.Wake("t1")
	if h.outbox.leased("t1", "c") || len(rc.hits()) != 1 {
		t.Fatal("claimed after Close")
	}
}

// TestCloseCancels: when Close's context ends first, the delivery in
// flight is canceled and not counted as the webhook's failure.
func TestCloseCancels(t *testing.T) {
	h, _, _ := inFlight(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.w.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: %v, want context.Canceled", err)
	}
	r := h.outbox.rec("t1", "c")
	if r.Delivered != 0 || r.Attempts != 0 || r.LastError != "" || h.counter(h.metrics.attempts) != 0 {
		t.Fatalf("canceled delivery recorded as an attempt: %+v", r)
	}
}

// TestPerDestLimit: a hanging webhook holds at most PerDest workers; a
// record of another destination is delivered meanwhile.
func TestPerDestLimit(t *testing.T) {
	b := newBlocking()
	slow := newReceiver(t, b.answer)
	fast := newReceiver(t, nil)
	h := newHarness(t, func(o *Options) { o.Workers, o.PerDest = 2, 1 })
	h.config("a1", "c", slow.srv.URL+"/1")
	h.config("a2", "c", slow.srv.URL+"/2")
	h.config("b", "c", fast.srv.URL)
	for _, id := range []a2a.TaskID{"a1", "a2", "b"} {
		h.create(id)
	}
	h.w.Wake("")
	eventually(t, "b delivered, a1 in flight", func() bool { return len(fast.hits()) == 1 && b.count() == 1 })
	if h.outbox.leased("a2", "c") {
		t.Fatalf("slow destination: %d requests in flight, a2 leased %v; want 1, false", b.count(), h.outbox.leased("a2", "c"))
	}
	close(b.release)
	h.settle()
	if got := len(slow.hits()); got != 2 {
		t.Fatalf("slow destination got %d, want 2", got)
	}
}

// TestSender: SendPush wakes the worker and never fails.
func TestSender(t *testing.T) {
	rc := newReceiver(t, nil)
	h := newHarness(t, nil)
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	cfg := &a2a.PushConfig{ID: "c", URL: "http://unused.invalid", TaskID: "t1"}
	if err := h.w.Sender().SendPush(h.ctx, cfg, &a2a.Task{ID: "t1"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "delivered after SendPush", func() bool { return len(rc.hits()) == 1 })
}

// TestLeaseLost: a commit after the record was deleted (or claimed by
// another worker) changes nothing and is counted.
func TestLeaseLost(t *testing.T) {
	h, b, rc := inFlight(t)
	if err := h.outbox.Delete(h.ctx, "t1", "c"); err != nil {
		t.Fatal(err)
	}
	close(b.release)
	eventually(t, "lease lost counted", func() bool { return h.counter(h.metrics.leaseLost) == 1 })
	if len(rc.hits()) != 1 {
		t.Fatalf("%d hits", len(rc.hits()))
	}
}

// stuckOutbox is an outbox whose Claim, after the worker's first, hangs
// until its context ends (a database that does not answer).
type stuckOutbox struct {
	*fakeOutbox
	claiming chan struct{}
	calls    atomic.Int32
}

func (o *stuckOutbox) Claim(ctx context.Context, now time.Time, busy []string, skip ...a2a.TaskID) (Lease, error) {
	if o.calls.Add(1) == 1 {
		return o.fakeOutbox.Claim(ctx, now, busy, skip...)
	}
	o.claiming <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestCloseDuringClaim: Close's context bounds a Claim that hangs too.
func TestCloseDuringClaim(t *testing.T) {
	stuck := &stuckOutbox{claiming: make(chan struct{}, 1)}
	h := newHarness(t, func(o *Options) {
		stuck.fakeOutbox = o.Outbox.(*fakeOutbox)
		o.Outbox = stuck
	})
	h.w.Wake("")
	<-stuck.claiming
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	closed := make(chan error, 1)
	go func() { closed <- h.w.Close(ctx) }()
	select {
	case err := <-closed:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Close: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a hanging Claim past its context")
	}
}

// TestClaimBudget: a claim posts no further entry once it has run
// ClaimBudget (10 s by default) and commits what it delivered, so a slow
// webhook cannot keep a claim past its lease; the next claim goes on from
// the committed cursor. Each post here takes 6 s of the clock: the first
// claim posts revisions 1 and 2, the second revision 3.
func TestClaimBudget(t *testing.T) {
	var h *harness
	cl := &cursorLog{h: &h}
	rc := newReceiver(t, func(_ *http.Request, _ int) int {
		cl.record()
		h.clock.Advance(6 * time.Second)
		return 0
	})
	h = newHarness(t, nil)
	h.config("t1", "c1", rc.srv.URL+"/hook")
	h.create("t1")
	h.update("t1", a2a.TaskStateWorking)
	h.update("t1", a2a.TaskStateCompleted)
	h.drive(time.Second, "t1 done", func() bool { return h.outbox.rec("t1", "c1").Done })
	if got := rc.revs("t1"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("revisions received %v, want [1 2 3]", got)
	}
	if cursors := cl.cursors(); !slices.Equal(cursors, []int64{0, 0, 2}) {
		t.Fatalf("committed cursor at each post %v, want [0 0 2]: one claim of two entries, then one of one", cursors)
	}
}

// TestTerminalNotLastEntry: a terminal entry ends a record (Done) only
// when it is the log's last: a task written again after it (SPEC S7
// allows a Replace of a terminal task) has the later entries delivered
// whether or not they fall in the same batch. With Done taken from the
// last entry read alone, a batch ending at the terminal entry marked the
// record done and revision 3 was never delivered.
func TestTerminalNotLastEntry(t *testing.T) {
	for _, batch := range []int{2, 16} {
		rc := newReceiver(t, nil)
		h := newHarness(t, func(o *Options) { o.Batch = batch })
		h.create("t1")
		h.update("t1", a2a.TaskStateCompleted)
		h.update("t1", a2a.TaskStateWorking)
		h.config("t1", "c", rc.srv.URL)
		h.settle()
		h.settle()
		if got, r := rc.revs("t1"), h.outbox.rec("t1", "c"); !slices.Equal(got, []int64{1, 2, 3}) || r.Done {
			t.Errorf("batch %d: received %v, record %+v: want [1 2 3], not done", batch, got, r)
		}
		// A full batch ending at the log's last entry, terminal, is the end.
		h.create("t2")
		h.update("t2", a2a.TaskStateCompleted)
		h.config("t2", "c", rc.srv.URL)
		h.settle()
		if got, r := rc.revs("t2"), h.outbox.rec("t2", "c"); !slices.Equal(got, []int64{1, 2}) || !r.Done {
			t.Errorf("batch %d: t2 received %v, record %+v: want [1 2], done", batch, got, r)
		}
	}
}

// slowLog is a log whose every read first calls read, and fails with its
// error; get, when set, does the same for Get.
type slowLog struct {
	engine.LogStore
	read, get func(ctx context.Context) error
}

func (s slowLog) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	if s.get != nil {
		if err := s.get(ctx); err != nil {
			return engine.Record{}, err
		}
	}
	return s.LogStore.Get(ctx, id)
}

func (s slowLog) ReadLog(ctx context.Context, id a2a.TaskID, after int64, limit int) ([]engine.LogEntry, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.LogStore.ReadLog(ctx, id, after, limit)
}

// TestClaimBudgetCountsTheRead: ClaimBudget runs from the claim, the log
// read included: a read that used the budget leaves time for one post,
// then the claim commits. Counted from after the read, a slow read (a
// loaded database) added its time to the claim's, and the claim could
// post past its lease while another worker delivered the same entries.
func TestClaimBudgetCountsTheRead(t *testing.T) {
	var h *harness
	cl := &cursorLog{h: &h}
	rc := newReceiver(t, func(_ *http.Request, _ int) int { cl.record(); return 0 })
	h = newHarness(t, func(o *Options) {
		o.Store = slowLog{o.Store, func(context.Context) error { h.clock.Advance(10 * time.Second); return nil }, nil} // h is set before the first claim
	})
	h.config("t1", "c1", rc.srv.URL)
	h.create("t1")
	h.update("t1", a2a.TaskStateWorking)
	h.update("t1", a2a.TaskStateCompleted)
	h.drive(time.Second, "t1 done", func() bool { return h.outbox.rec("t1", "c1").Done })
	if cursors := cl.cursors(); !slices.Equal(cursors, []int64{0, 1, 2}) {
		t.Fatalf("committed cursor at each post %v, want [0 1 2]: one post per claim", cursors)
	}
}

// cursorLog records the committed cursor of t1's config c1 at each post a
// receiver takes (*h is set before the first).
type cursorLog struct {
	h   **harness
	mu  sync.Mutex
	got []int64
}

func (c *cursorLog) record() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, (*c.h).outbox.rec("t1", "c1").Delivered)
}

func (c *cursorLog) cursors() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// stallOutbox is an outbox whose next Claim that grants a lease, once
// armed, moves the clock past the lease before it returns: a claim that
// stalled (a pause, a slow outbox) and returns a lease already ended.
type stallOutbox struct {
	*fakeOutbox
	clock  *fakeclock.Clock
	armed  atomic.Bool
	during func() // when set, called during the stall
}

func (o *stallOutbox) Claim(ctx context.Context, now time.Time, busy []string, skip ...a2a.TaskID) (Lease, error) {
	l, err := o.fakeOutbox.Claim(ctx, now, busy, skip...)
	if l != nil && o.armed.CompareAndSwap(true, false) {
		o.clock.Advance(2 * o.lease)
		if o.during != nil {
			o.during()
		}
	}
	return l, err
}

// leases returns how many leases the outbox has granted.
func (o *fakeOutbox) leases() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.token
}

// TestClaimPastItsLease (SPEC N2): a claim that returns after its lease
// ended posts nothing; the record is claimed afresh and each entry is
// delivered once, from the log or, for a log trimmed past the cursor, as
// the task. The receiver holds the first post until a second lease is
// granted: posting regardless, the stale claim posted the first entry,
// the next claim found its lease expired and posted it again.
func TestClaimPastItsLease(t *testing.T) {
	for _, trimmed := range []bool{false, true} {
		stall := &stallOutbox{}
		rc := newReceiver(t, func(_ *http.Request, n int) int {
			if n == 1 && !within(10*time.Second, func() bool { return stall.leases() >= 2 }) {
				return http.StatusServiceUnavailable
			}
			return 0
		})
		h := newHarness(t, func(o *Options) {
			stall.fakeOutbox = o.Outbox.(*fakeOutbox)
			o.Outbox = stall
		})
		stall.clock = h.clock
		stall.armed.Store(true) // before any record: the first lease granted is the stale one
		h.create("t1")
		want := []int64{1}
		if trimmed {
			h.update("t1", a2a.TaskStateWorking)
			h.clock.Advance(time.Minute)
			if _, err := h.store.TrimLog(h.ctx, h.clock.Micros(), 10); err != nil {
				t.Fatal(err)
			}
			want = []int64{2}
		}
		h.config("t1", "c", rc.srv.URL)
		h.settle()
		if got, r := rc.revs("t1"), h.outbox.rec("t1", "c"); !slices.Equal(got, want) || r.Delivered != want[0] {
			t.Fatalf("trimmed %v: received %v, cursor %d: want %v once", trimmed, got, r.Delivered, want)
		}
		h.update("t1", a2a.TaskStateCompleted)
		h.settle()
		if got := rc.revs("t1"); !slices.Equal(got, append(want, want[0]+1)) {
			t.Fatalf("trimmed %v: received %v, want %v", trimmed, got, append(want, want[0]+1))
		}
	}
}

// TestPostCutOffBeforeLeaseEnd (SPEC N2): a post still running at its
// lease's post-by time is cut off and counted as a timeout, and the
// entries acknowledged before it are committed within the lease; the
// entry goes again after its backoff. Without the cut-off the post
// outlived the lease (here: until the receiver answered); not counted, a
// webhook slower than the lease was posted to again and again, never
// backing off, never dropped.
func TestPostCutOffBeforeLeaseEnd(t *testing.T) {
	release := make(chan struct{})
	var cut atomic.Int32
	rc := newReceiver(t, func(r *http.Request, n int) int {
		if n == 1 {
			return 0
		}
		select {
		case <-release:
			return 0
		case <-r.Context().Done():
			cut.Add(1)
			return http.StatusServiceUnavailable
		}
	})
	h := newHarness(t, func(o *Options) { o.Outbox.(*fakeOutbox).lease = time.Second }) // posts until 0.8 s
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	h.update("t1", a2a.TaskStateWorking)
	h.settle()
	eventually(t, "the receiver sees the post cut off", func() bool { return cut.Load() >= 1 })
	r := h.outbox.rec("t1", "c")
	if cut.Load() != 1 || r.Delivered != 1 || r.Attempts != 1 || r.LastError != ReasonTimeout ||
		h.counter(h.metrics.failures.WithLabelValues(ReasonTimeout)) != 1 || h.counter(h.metrics.leaseLost) != 0 {
		t.Fatalf("%d posts cut off, record %+v, lease lost %v: want one cut off, revision 1 committed, one timeout",
			cut.Load(), r, h.counter(h.metrics.leaseLost))
	}
	close(release)
	h.drive(time.Second, "revision 2 delivered", func() bool { return h.outbox.rec("t1", "c").Delivered == 2 })
	if got := rc.revs("t1"); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("received %v, want [1 2]", got)
	}
}

// TestCommitOutlivesPostBy: the commit runs under a context of its own,
// not the delivery's, which ends at the post-by time: under that one, a
// post acknowledged just before it was not committed, and posted again.
func TestCommitOutlivesPostBy(t *testing.T) {
	rc := newReceiver(t, nil)
	h := newHarness(t, func(o *Options) { o.Outbox.(*fakeOutbox).lease = 50 * time.Millisecond })
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	h.settle()
	left := h.outbox.commitTimes()
	if len(left) != 1 || left[0] < commitTimeout/2 {
		t.Fatalf("time left to the commits %v, want one of about %v", left, commitTimeout)
	}
}

// TestPostBy: posts end before the lease does by commitTimeout or a
// fifth of the lease, the shorter.
func TestPostBy(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct{ lease, margin time.Duration }{
		{30 * time.Second, commitTimeout}, {time.Minute, commitTimeout}, {50 * time.Millisecond, 10 * time.Millisecond},
	} {
		if got, want := postBy(at, at.Add(c.lease)), at.Add(c.lease-c.margin); !got.Equal(want) {
			t.Errorf("lease %v: post by %v, want %v", c.lease, got.Sub(at), want.Sub(at))
		}
	}
}

// TestCutOffStopsTheClaim (SPEC N2): a post cut off at the post-by time
// ends the claim, even when it is dropped (the webhook failing past the
// deadline). Going on, the claim's later posts failed at once without a
// request, and were dropped too: revisions 3-5 never reached a webhook
// that hangs on revisions 1 and 2 only. (Revision 1, older than the
// deadline at the second claim, is dropped unsent; revision 2, logged
// since, is tried once: the webhook has been failing since revision 1.)
func TestCutOffStopsTheClaim(t *testing.T) {
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		if rev := r.Header.Get(HeaderRevision); rev == "1" || rev == "2" {
			<-r.Context().Done()
			return http.StatusServiceUnavailable
		}
		return 0
	})
	h := newHarness(t, func(o *Options) {
		o.Outbox.(*fakeOutbox).lease = 2 * time.Second // posts until 1.6 s: 3-5 in one window, even under load
		o.Deadline = 5 * time.Minute
	})
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	h.settle() // revision 1 cut off: a timeout
	h.clock.Advance(6 * time.Minute)
	for range 4 { // revisions 2-5, younger than the deadline
		h.update("t1", a2a.TaskStateWorking)
	}
	// As after a restart: the worker forgets the destination's failures
	// (the record keeps its own), so the destination is not set aside
	// past the deadline, where later entries would wait rather than be
	// posted (fair.go) whether or not the claim went on.
	h.w.mu.Lock()
	clear(h.w.mu.breakers)
	h.w.mu.Unlock()
	h.settle() // 1 dropped unsent, 2 cut off past the deadline: dropped
	// The destination timed out: set aside for its cool-down; then 3-5.
	h.clock.Advance(h.w.o.MaxBackoff)
	h.settle()
	r := h.outbox.rec("t1", "c")
	if got := rc.revs("t1"); !slices.Equal(got, []int64{3, 4, 5}) || r.Delivered != 5 {
		t.Fatalf("received %v, record %+v: want [3 4 5], delivered 5", got, r)
	}
	if d := h.counter(h.metrics.deliveries.WithLabelValues(OutcomeDropped)); d != 2 {
		t.Fatalf("dropped %v, want 2 (revisions 1 and 2)", d)
	}
	if n := h.counter(h.metrics.failures.WithLabelValues(ReasonExpired)); n != 1 {
		t.Fatalf("%v entries dropped as expired, want 1 (revision 1)", n)
	}
}

// TestDeliveryWindow: a delivery's reads and posts run until the lease's
// post-by time, not its end: the read here has 8 s of a 10 s lease. Up to
// the lease's end, a commit after a post cut off there came after the
// lease, and another claim could post the entries acknowledged before.
func TestDeliveryWindow(t *testing.T) {
	var mu sync.Mutex
	var left []time.Duration
	rc := newReceiver(t, nil)
	h := newHarness(t, func(o *Options) {
		o.Outbox.(*fakeOutbox).lease = 10 * time.Second
		o.Store = slowLog{o.Store, func(ctx context.Context) error {
			dl, _ := ctx.Deadline()
			mu.Lock()
			left = append(left, time.Until(dl))
			mu.Unlock()
			return nil
		}, nil}
	})
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	h.settle()
	mu.Lock()
	defer mu.Unlock()
	if len(left) != 1 || left[0] > 8*time.Second || left[0] < 4*time.Second {
		t.Fatalf("time left to the reads %v, want one of at most 8s", left)
	}
}

// TestReadCutOffIsStoreFailure: a read that the post-by time cuts off,
// or that returns after it (a store that does not heed its context), is a
// store failure: no post, no attempt counted, the record waits
// MinBackoff. Taken for Close's cancel, or posting after a late read, the
// record was claimed again at once, again and again; on the trimmed-log
// path the post failed at once and counted a timeout against the webhook.
func TestReadCutOffIsStoreFailure(t *testing.T) {
	untilCut := func(ctx context.Context) error { <-ctx.Done(); return nil }
	for _, c := range []struct {
		name      string
		read, get func(ctx context.Context) error
		trimmed   bool
	}{
		{"read cut off", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, nil, false},
		{"read late", untilCut, nil, false},
		{"get late, log trimmed", func(context.Context) error { return nil }, untilCut, true},
	} {
		rc := newReceiver(t, nil)
		h := newHarness(t, func(o *Options) {
			o.Outbox.(*fakeOutbox).lease = 50 * time.Millisecond
			o.Store = slowLog{o.Store, c.read, c.get}
		})
		h.create("t1")
		if c.trimmed {
			h.clock.Advance(time.Minute)
			if _, err := h.store.TrimLog(h.ctx, h.clock.Micros(), 10); err != nil {
				t.Fatal(err)
			}
		}
		h.config("t1", "c", rc.srv.URL)
		h.settle()
		if r := h.outbox.rec("t1", "c"); rc.requests() != 0 || r.Attempts != 0 || !r.NextAt.Equal(h.clock.Now().Add(h.w.o.MinBackoff)) {
			t.Fatalf("%s: %d requests, record %+v: want none, no attempt, NextAt now + %v", c.name, rc.requests(), r, h.w.o.MinBackoff)
		}
	}
}

// TestLateClaimReleasedAfterClose: a claim that returns too late to post,
// while Close cancels the deliveries, still gives its record back (else
// the record waits out a lease no one holds).
func TestLateClaimReleasedAfterClose(t *testing.T) {
	stall := &stallOutbox{}
	rc := newReceiver(t, nil)
	h := newHarness(t, func(o *Options) {
		stall.fakeOutbox = o.Outbox.(*fakeOutbox)
		o.Outbox = stall
	})
	stall.clock = h.clock
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	closed := make(chan error, 1)
	stall.during = func() {
		go func() { closed <- h.w.Close(canceled) }()
		<-h.w.ctx.Done()
	}
	stall.armed.Store(true)
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	h.w.Wake("")
	if err := <-closed; !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: %v, want context.Canceled", err)
	}
	if h.outbox.leased("t1", "c") || rc.requests() != 0 {
		t.Fatalf("after Close: leased %v, %d requests: want released, none", h.outbox.leased("t1", "c"), rc.requests())
	}
}

// TestWriteAfterDoneDelivered: a write to a task whose terminal event a
// webhook has received (the record Done; SPEC S7 allows the write) is
// delivered too (N2: every logged event), and the record is Done again
// once the task is terminal again.
func TestWriteAfterDoneDelivered(t *testing.T) {
	rc := newReceiver(t, func(*http.Request, int) int { return 0 })
	h := newHarness(t, nil)
	h.config("t1", "c1", rc.srv.URL+"/hook")
	h.create("t1")
	h.update("t1", a2a.TaskStateCompleted)
	h.settle()
	if r := h.outbox.rec("t1", "c1"); !r.Done || r.Delivered != 2 {
		t.Fatalf("after the terminal event: %+v, want Done at 2", r)
	}
	h.update("t1", a2a.TaskStateWorking)
	h.update("t1", a2a.TaskStateFailed)
	h.settle()
	if got, r := rc.revs("t1"), h.outbox.rec("t1", "c1"); !slices.Equal(got, []int64{1, 2, 3, 4}) || !r.Done || r.Delivered != 4 {
		t.Fatalf("received %v, record %+v; want [1 2 3 4], Done at 4", got, r)
	}
}

// TestEntryOlderThanDeadlineDropped (SPEC N2, N4): an entry whose turn
// comes more than the deadline after it was logged — a webhook that
// answers, but too slowly for its events, or a queue that waited — is
// dropped unsent and counted as expired; the entries after it that are
// younger are posted. Before, only a webhook's failures had a deadline,
// and a slow webhook's backlog grew without bound (push-soak's hostile
// owner, a webhook answering after 5 s).
func TestEntryOlderThanDeadlineDropped(t *testing.T) {
	rc := newReceiver(t, nil)
	h := newHarness(t, func(o *Options) { o.Deadline = 5 * time.Minute })
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	h.update("t1", a2a.TaskStateWorking)
	h.clock.Advance(6 * time.Minute) // no claim meanwhile: revisions 1-2 are 6 min old
	h.update("t1", a2a.TaskStateInputRequired)
	h.settle()
	if got, r := rc.revs("t1"), h.outbox.rec("t1", "c"); !slices.Equal(got, []int64{3}) || r.Delivered != 3 {
		t.Fatalf("received %v, record %+v: want [3], delivered 3", got, r)
	}
	if n := h.counter(h.metrics.failures.WithLabelValues(ReasonExpired)); n != 2 {
		t.Fatalf("%v entries dropped as expired, want 2", n)
	}
	if n := h.counter(h.metrics.deliveries.WithLabelValues(OutcomeDropped)); n != 2 {
		t.Fatalf("%v entries dropped, want 2", n)
	}
	if n := h.counter(h.metrics.attempts); n != 1 {
		t.Fatalf("%v attempts counted, want 1: an entry dropped unsent is no attempt", n)
	}
}
