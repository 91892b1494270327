package pushdelivery

import (
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// createOwned creates task id, submitted, owned by owner.
func (h *harness) createOwned(id a2a.TaskID, owner string) {
	h.t.Helper()
	task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	if _, err := h.store.CreateOwned(h.ctx, task, owner); err != nil {
		h.t.Fatal(err)
	}
}

// TestFairAcrossOwners (SPEC N4): one owner with 240 configs (15 tasks of
// 16) on receivers that never answer holds at most PerOwner of the
// workers, and another owner's events are delivered within one client
// timeout each, however many hanging destinations the first has. Before
// the per-owner limit, the four workers hung on the first owner's posts
// and the other's waited for 240 / 4 timeouts.
func TestFairAcrossOwners(t *testing.T) { testFair(t, "alice", "bob", 15) }

// TestFairAcrossTasksWithoutOwner (SPEC N4 on a server without an owner
// policy, where tasks have none): a task counts as its own owner, so one
// task with 16 hanging configs holds at most PerOwner of the workers and
// another task's events are delivered within one client timeout each.
func TestFairAcrossTasksWithoutOwner(t *testing.T) { testFair(t, "", "", 1) }

// testFair runs TestFairAcrossOwners with hostile's tasks (16 hanging
// configs each) and victim's one task.
func testFair(t *testing.T, hostile, victim string, tasks int) {
	// The bound on b1's deliveries is one client timeout: long enough that
	// a loaded machine (the race detector, every package's tests at once)
	// does not exceed it, short beside the 240 / 4 timeouts without the limit.
	const timeout = 2 * time.Second
	release := make(chan struct{})
	hang := func(r *http.Request, _ int) int {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusServiceUnavailable
	}
	h := newHarness(t, func(o *Options) {
		o.Client = NewClient(ClientOptions{AllowPrivate: true, Timeout: timeout})
		o.Workers = 4
	})
	hangs := make([]*receiver, 16*tasks)
	for i := range hangs {
		hangs[i] = newReceiver(t, hang)
	}
	t.Cleanup(func() { close(release) }) // before the receivers close
	for i, rc := range hangs {
		h.config(a2a.TaskID(fmt.Sprintf("a%02d", i/16)), fmt.Sprint("c", i), rc.srv.URL)
	}
	for i := range tasks {
		h.createOwned(a2a.TaskID(fmt.Sprintf("a%02d", i)), hostile)
	}
	hanging := func() int {
		n := 0
		for _, rc := range hangs {
			n += rc.requests()
		}
		return n
	}
	inFlight := func() int { // the hostile owner's deliveries in flight
		h.w.mu.Lock()
		defer h.w.mu.Unlock()
		if hostile == "" {
			return h.w.mu.keys[ownerKey("a00", "")]
		}
		return h.w.mu.keys[ownerKey("", hostile)]
	}
	h.w.Wake("")
	eventually(t, "the hostile posts hanging", func() bool { return hanging() >= min(h.w.o.PerOwner, h.w.o.Workers) })
	ok := newReceiver(t, nil)
	h.config("b1", "c", ok.srv.URL)
	h.createOwned("b1", victim)
	for rev := int64(1); rev <= 3; rev++ {
		if rev > 1 {
			h.update("b1", a2a.TaskStateWorking)
		}
		start := time.Now()
		h.w.Wake("b1")
		eventually(t, fmt.Sprintf("b1's revision %d delivered", rev), func() bool {
			if n := inFlight(); n > min(h.w.o.PerOwner, h.w.o.Workers-1) {
				t.Fatalf("the hostile owner has %d deliveries in flight, limit %d", n, h.w.o.PerOwner)
			}
			return slices.Contains(ok.revs("b1"), rev)
		})
		if took := time.Since(start); took > timeout {
			t.Fatalf("b1's revision %d took %v behind %d hanging posts, bound: one client timeout (%v)", rev, took, hanging(), timeout)
		}
	}
	if hanging() == 0 {
		t.Fatal("the hostile receivers got no post: the test proved nothing")
	}
}

// TestRecoveryMakesDestinationDue: when a destination that was failing
// answers 2xx again, its other records waiting for their backoff are due
// at once (the clock does not move after the first 2xx), not after each
// one's backoff (an hour here).
func TestRecoveryMakesDestinationDue(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	rc := newReceiver(t, func(*http.Request, int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	h := newHarness(t, func(o *Options) { o.Deadline = 2 * time.Hour })
	h.config("t0", "c", rc.srv.URL)
	h.create("t0")
	const waiting = 4
	for i := 1; i <= waiting; i++ { // failing for a while: backing off for an hour
		id := a2a.TaskID(fmt.Sprint("t", i))
		h.create(id)
		r := &Record{TaskID: id, Config: a2a.PushConfig{TaskID: id, ID: "c", URL: rc.srv.URL},
			Dest: h.outbox.rec("t0", "c").Dest, Created: h.clock.Now(), Attempts: 6,
			FailingSince: h.clock.Now().Add(-time.Hour), NextAt: h.clock.Now().Add(time.Hour)}
		if err := h.outbox.Save(h.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	h.settle() // t0 fails once
	if rc.requests() != 1 {
		t.Fatalf("%d requests, want t0's one", rc.requests())
	}
	down.Store(false)
	for len(rc.hits()) == 0 {
		h.clock.Advance(time.Second)
		h.settle()
	}
	h.settle()
	if got := len(rc.hits()); got != 1+waiting {
		t.Fatalf("after the first 2xx %d of %d records delivered without the clock moving", got, 1+waiting)
	}
}

// TestFailedCommitRetried (SPEC N2): a commit that fails after the
// webhook's 2xx (a connection terminated) is tried again, so the
// acknowledged event is not posted again when the lease ends. Before, the
// record waited out its lease and the event went out twice.
func TestFailedCommitRetried(t *testing.T) {
	rc := newReceiver(t, nil)
	h := newHarness(t, nil)
	h.outbox.failCommits.Store(3)
	h.config("t1", "c", rc.srv.URL)
	h.create("t1")
	h.settle()
	h.clock.Advance(2 * h.outbox.lease)
	h.settle()
	if got := rc.revs("t1"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("received %v, want [1] once", got)
	}
	if r := h.outbox.rec("t1", "c"); r.Delivered != 1 || h.outbox.failCommits.Load() > 0 {
		t.Fatalf("record %+v, %d failures left: want delivered 1, every failure tried past", r, h.outbox.failCommits.Load())
	}
}

// TestSetAsideDestinationDropsPastDeadline (SPEC N4, bounded queues): the
// records of a destination set aside by its breaker for longer than the
// deadline since its failures began are claimed again once nothing else
// is due and their entries older than the deadline dropped unsent and
// counted; a younger entry waits until it is that old. Before, they were
// never claimed while the destination was set aside, so never reached
// their deadline: the outbox kept a record for every task created for a
// hanging webhook (push-soak's queue depth grew ~375 a minute under
// -push-deadline 10m as under 1h).
func TestSetAsideDestinationDropsPastDeadline(t *testing.T) {
	rc := newReceiver(t, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	h := newHarness(t, func(o *Options) {
		o.Deadline = 10 * time.Minute
		o.MinBackoff, o.MaxBackoff = time.Hour, time.Hour // set aside for an hour
	})
	ids := func(from, to int) []a2a.TaskID {
		var s []a2a.TaskID
		for i := from; i < to; i++ {
			s = append(s, a2a.TaskID(fmt.Sprint("t", i)))
		}
		return s
	}
	for _, id := range ids(0, breakerFailures) { // fail until the breaker opens
		h.config(id, "c", rc.srv.URL)
		h.create(id)
		h.settle()
	}
	if n := rc.requests(); n != breakerFailures {
		t.Fatalf("%d requests before the breaker opened, want %d", n, breakerFailures)
	}
	later := ids(breakerFailures, breakerFailures+5)
	for _, id := range later { // created while the destination is set aside
		h.config(id, "c", rc.srv.URL)
		h.create(id)
	}
	h.settle()
	behind := func() (n int) {
		for _, id := range later {
			if r := h.outbox.rec(id, "c"); r.Delivered < 1 {
				n++
			}
		}
		return n
	}
	if n := behind(); n != len(later) {
		t.Fatalf("%d of %d records past their entry within the deadline, want none", len(later)-n, len(later))
	}
	dropped := h.counter(h.metrics.deliveries.WithLabelValues(OutcomeDropped))
	h.clock.Advance(11 * time.Minute) // past the deadline, still set aside
	h.settle()
	if n := behind(); n != 0 {
		t.Fatalf("%d of %d records of a destination set aside past the deadline still waiting", n, len(later))
	}
	if got := h.counter(h.metrics.deliveries.WithLabelValues(OutcomeDropped)) - dropped; got != float64(len(later)) {
		t.Fatalf("%v entries counted dropped, want %d", got, len(later))
	}
	if n := rc.requests(); n != breakerFailures {
		t.Fatalf("%d requests, want %d: entries of a destination set aside are dropped unsent", n, breakerFailures)
	}
	if n := h.counter(h.metrics.attempts); n != breakerFailures {
		t.Fatalf("%v attempts counted, want %d: an entry dropped unsent is no attempt", n, breakerFailures)
	}
	young := a2a.TaskID("young") // logged now: waits for its own deadline
	h.config(young, "c", rc.srv.URL)
	h.create(young)
	h.settle()
	if r := h.outbox.rec(young, "c"); r.Delivered != 0 || !r.NextAt.Equal(h.clock.Now().Add(10*time.Minute)) {
		t.Fatalf("an entry younger than the deadline: %+v, want it waiting until it is 10 min old", r)
	}
}

// TestDrainPastOwnerLimit (SPEC N4, C6): the records of a destination set
// aside past the deadline are drained — their old entries dropped unsent —
// while their owner's slow webhooks hold all its slots. Before, the claim
// passed over every task of an owner at its limit, so the records of its
// dead destination never reached their deadline: the hostile push-soak's
// queue grew ~385 records a minute under -push-deadline 5m.
func TestDrainPastOwnerLimit(t *testing.T) {
	dead := newReceiver(t, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	release := make(chan struct{})
	slow := newReceiver(t, func(r *http.Request, _ int) int {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return 0
	})
	h := newHarness(t, func(o *Options) {
		o.Client = NewClient(ClientOptions{AllowPrivate: true, Timeout: time.Hour})
		o.Workers, o.PerOwner, o.PerDest = 4, 2, 4
		o.Deadline = 10 * time.Minute
		o.MinBackoff, o.MaxBackoff = time.Hour, time.Hour // set aside for an hour
	})
	t.Cleanup(func() { close(release) }) // before the worker and the receivers close
	const owner = "mallory"
	var later []a2a.TaskID
	for i := range breakerFailures + 5 {
		id := a2a.TaskID(fmt.Sprint("d", i))
		h.config(id, "c", dead.srv.URL)
		h.createOwned(id, owner)
		if i < breakerFailures { // fail until the breaker opens
			h.settle()
		} else { // created while the destination is set aside
			later = append(later, id)
		}
	}
	h.settle()
	for _, id := range []a2a.TaskID{"s0", "s1"} {
		h.config(id, "c", slow.srv.URL)
		h.createOwned(id, owner)
	}
	h.w.Wake("")
	eventually(t, "the owner's two slow posts hanging", func() bool { return slow.requests() == 2 })
	inFlight := func() int {
		h.w.mu.Lock()
		defer h.w.mu.Unlock()
		return h.w.mu.keys[ownerKey("", owner)]
	}
	dropped := h.counter(h.metrics.deliveries.WithLabelValues(OutcomeDropped))
	h.clock.Advance(11 * time.Minute) // past the deadline, still set aside
	h.w.Wake("")
	eventually(t, "the dead destination's records drained", func() bool {
		if n := inFlight(); n != 2 {
			t.Fatalf("the owner has %d deliveries in flight, want its 2 slow posts", n)
		}
		for _, id := range later {
			if h.outbox.rec(id, "c").Delivered < 1 || h.outbox.leased(id, "c") {
				return false
			}
		}
		return true
	})
	if got := h.counter(h.metrics.deliveries.WithLabelValues(OutcomeDropped)) - dropped; got != float64(len(later)) {
		t.Fatalf("%v entries counted dropped, want %d", got, len(later))
	}
	// A record whose log was trimmed past its cursor would post the task
	// itself (an entry of unknown age): a drain leaves it for a claim
	// within the limits, an hour on (MinBackoff).
	h.config("x", "c", dead.srv.URL)
	h.createOwned("x", owner)
	h.clock.Advance(time.Minute)
	if _, err := h.store.TrimLog(h.ctx, h.clock.Micros(), 100); err != nil {
		t.Fatal(err)
	}
	h.w.Wake("x")
	eventually(t, "the trimmed record passed over by a drain", func() bool {
		return h.outbox.rec("x", "c").NextAt.Equal(h.clock.Now().Add(time.Hour)) && !h.outbox.leased("x", "c")
	})
	if n := dead.requests(); n != breakerFailures {
		t.Fatalf("%d requests to the dead destination, want %d: a drain posts nothing", n, breakerFailures)
	}
}
