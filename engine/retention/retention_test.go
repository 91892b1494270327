package retention_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/retention"
	"github.com/a2astore/a2astore/engine/storemetrics"
	"github.com/a2astore/a2astore/internal/fakeclock"
)

var quiet = slog.New(slog.DiscardHandler)

// fill creates n tasks in state, one µs apart, and returns their IDs.
func fill(t *testing.T, s engine.Store, prefix string, n int, state a2a.TaskState, clock *fakeclock.Clock) []a2a.TaskID {
	t.Helper()
	var ids []a2a.TaskID
	for i := range n {
		id := a2a.TaskID(fmt.Sprintf("%s-%03d", prefix, i))
		if _, err := s.Create(context.Background(), &a2a.Task{ID: id, ContextID: prefix, Status: a2a.TaskStatus{State: state}}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Microsecond)
		ids = append(ids, id)
	}
	return ids
}

func count(t *testing.T, s engine.Store) int {
	t.Helper()
	resp, err := s.List(context.Background(), &engine.ListRequest{IncludeTotalSize: true, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return resp.TotalSize
}

func newStore(t *testing.T, clock *fakeclock.Clock) *memstore.Store {
	s := memstore.New(memstore.Options{Clock: clock.Micros})
	t.Cleanup(func() {
		if err := s.CheckInvariants(); err != nil {
			t.Error(err)
		}
		s.Close()
	})
	return s
}

// A sweep removes the terminal tasks older than the age, keeps the young
// ones and the unfinished ones (StuckAge off), and reports the oldest kept
// terminal task's age in its metrics.
func TestSweep(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, clock)
	fill(t, s, "old-done", 25, a2a.TaskStateCompleted, clock)
	fill(t, s, "old-working", 5, a2a.TaskStateWorking, clock)
	clock.Advance(time.Hour)
	young := clock.Now()
	fill(t, s, "young-done", 3, a2a.TaskStateFailed, clock)
	clock.Advance(30 * time.Minute)
	svc, err := retention.New(s, retention.Options{Age: time.Hour, BatchSize: 10, Pause: -1, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 25 || count(t, s) != 8 {
		t.Errorf("sweep removed %d, %d left; want 25 removed, 8 left", res.Removed, count(t, s))
	}
	if res.Batches != 4 { // 10 + 10 + 10 (5 removed, 5 kept working) + the young ones
		t.Errorf("%d batches, want 4", res.Batches)
	}
	if !res.OldestTerminal.Equal(young) {
		t.Errorf("oldest kept terminal task at %v, want %v", res.OldestTerminal, young)
	}
	m := svc.Metrics()
	if got, want := gauge(t, m, "a2astore_retention_oldest_terminal_age_seconds"), clock.Now().Sub(young).Seconds(); got != want {
		t.Errorf("oldest terminal age %v s, want %v", got, want)
	}
	if got := gauge(t, m, "a2astore_retention_removed_tasks_total"); got != 25 {
		t.Errorf("removed_tasks_total %v, want 25", got)
	}
}

// The service sweeps at once, then every Interval (a tenth of the age by
// default), and Close stops it.
func TestServiceInterval(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, clock)
	svc, err := retention.New(s, retention.Options{Age: 3 * time.Second, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	defer svc.Close()
	interval := 300 * time.Millisecond
	clock.WaitFor(interval) // the first sweep is done: nothing to remove
	fill(t, s, "done", 5, a2a.TaskStateCanceled, clock)
	clock.Advance(interval) // not old enough yet: the next sweep keeps them
	clock.WaitFor(interval)
	if n := count(t, s); n != 5 {
		t.Fatalf("%d tasks after a sweep younger than the age, want 5", n)
	}
	for range 10 { // 3 s later they are expired
		clock.Advance(interval)
		clock.WaitFor(interval)
	}
	if n := count(t, s); n != 0 {
		t.Errorf("%d tasks left after the age, want 0", n)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
}

// A service closed halfway through a sweep (between two batches) stops
// at once: the batches done stay done, the store is consistent, and the
// next sweep finishes the work.
func TestCloseHalfway(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, clock)
	fill(t, s, "done", 50, a2a.TaskStateCompleted, clock)
	clock.Advance(2 * time.Hour)
	pause := time.Second
	svc, err := retention.New(s, retention.Options{Age: time.Hour, BatchSize: 10, Pause: pause, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	clock.WaitFor(pause) // the first batch is done, the service pauses
	if n := count(t, s); n != 40 {
		t.Fatalf("%d tasks after one batch of 10, want 40", n)
	}
	if age := gauge(t, svc.Metrics(), "a2astore_retention_oldest_terminal_age_seconds"); age < time.Hour.Seconds() {
		t.Errorf("a sweep with a backlog reports the oldest terminal task %v s old, want over the age", age)
	}
	if err := svc.Close(); err != nil { // never advancing the clock: Close must not wait for the pause
		t.Fatal(err)
	}
	if n := count(t, s); n != 40 {
		t.Fatalf("%d tasks after Close, want 40", n)
	}
	if got := gauge(t, svc.Metrics(), "a2astore_retention_last_sweep_timestamp_seconds"); got != 0 {
		t.Errorf("an interrupted sweep counts as completed: last sweep %v", got)
	}
	again, err := retention.New(s, retention.Options{Age: time.Hour, BatchSize: 10, Pause: -1, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := again.Sweep(context.Background()); err != nil || res.Removed != 40 || count(t, s) != 0 {
		t.Fatalf("the next sweep: %+v %v, %d left", res, err, count(t, s))
	}
}

// blocking is a Retainer whose batches wait for their context.
type blocking struct {
	*memstore.Store
	started chan struct{}
}

func (b *blocking) RemoveExpired(ctx context.Context, req engine.RetainRequest) (engine.RetainResult, error) {
	close(b.started)
	<-ctx.Done()
	return engine.RetainResult{}, ctx.Err()
}

// Close cancels a batch in flight through its context.
func TestCloseCancelsBatch(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := &blocking{Store: newStore(t, clock), started: make(chan struct{})}
	svc, err := retention.New(b, retention.Options{Age: time.Hour, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	<-b.started
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
}

// locker is a retention.Locker the test decides.
type locker struct {
	free     bool
	released int
}

func (l *locker) TryRetentionLock(context.Context) (func(), bool, error) {
	if !l.free {
		return nil, false, nil
	}
	return func() { l.released++ }, true, nil
}

// With a Locker, a sweep runs only under the lock, and releases it.
func TestLocker(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, clock)
	fill(t, s, "done", 5, a2a.TaskStateRejected, clock)
	clock.Advance(2 * time.Hour)
	l := &locker{}
	svc, err := retention.New(s, retention.Options{Age: time.Hour, Locker: l, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := svc.Sweep(context.Background()); err != nil || !res.Skipped || count(t, s) != 5 {
		t.Fatalf("sweep without the lock: %+v %v, %d left", res, err, count(t, s))
	}
	l.free = true
	if res, err := svc.Sweep(context.Background()); err != nil || res.Removed != 5 || l.released != 1 {
		t.Fatalf("sweep with the lock: %+v %v, released %d", res, err, l.released)
	}
}

// losingLocker is a retention.LockWatcher whose lock ends after held
// checks.
type losingLocker struct {
	locker
	held, checks int
}

func (l *losingLocker) RetentionLockHeld(context.Context) error {
	l.checks++
	if l.checks > l.held {
		return errors.New("lock lost")
	}
	return nil
}

// A sweep whose lock ends stops before its next batch, and says so (R2:
// another server may be sweeping since; review by helper-40): with a
// LockWatcher that loses the lock after the second batch, a sweep of 5
// tasks in batches of 1 removes 2 and fails. Without the check it removed
// all 5.
func TestLockLost(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, clock)
	fill(t, s, "done", 5, a2a.TaskStateRejected, clock)
	clock.Advance(2 * time.Hour)
	l := &losingLocker{locker: locker{free: true}, held: 1}
	svc, err := retention.New(s, retention.Options{Age: time.Hour, BatchSize: 1, Pause: -1, Locker: l, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Sweep(context.Background())
	if err == nil || res.Removed != 2 || count(t, s) != 3 || l.released != 1 {
		t.Fatalf("sweep that lost its lock after the second batch: %+v %v, %d left, released %d", res, err, count(t, s), l.released)
	}
}

// plain hides every capability of the store it wraps.
type plain struct{ engine.Store }

// Bad options and stores that cannot remove expired tasks (decorators
// over them included) are refused.
func TestNewRefuses(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	for _, o := range []retention.Options{
		{},
		{Age: -time.Second},
		{Age: time.Hour, StuckAge: time.Minute},
		{Age: time.Hour, StuckAge: -time.Minute},
		{Age: time.Hour, BatchSize: -1},
		{Age: time.Hour, BatchSize: engine.MaxRetainLimit + 1},
		{Age: time.Hour, Interval: -time.Second},
	} {
		if _, err := retention.New(mem, o); !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("New(%+v): %v, want ErrInvalidArgument", o, err)
		}
	}
	for _, s := range []engine.Store{
		plain{mem},
		storemetrics.New(plain{mem}, storemetrics.Options{}),
		authz.New(plain{mem}, authz.AllowAll{}),
	} {
		if _, err := retention.New(s, retention.Options{Age: time.Hour}); !errors.Is(err, engine.ErrRetainUnsupported) {
			t.Errorf("New(%T): %v, want ErrRetainUnsupported", s, err)
		}
		if r, ok := s.(engine.Retainer); ok {
			if _, err := r.RemoveExpired(context.Background(), engine.RetainRequest{Limit: 1}); !errors.Is(err, engine.ErrRetainUnsupported) {
				t.Errorf("%T.RemoveExpired: %v, want ErrRetainUnsupported", s, err)
			}
		}
	}
	// Through both decorators over a Retainer it works.
	if _, err := retention.New(authz.New(storemetrics.New(mem, storemetrics.Options{}), authz.AllowAll{}), retention.Options{Age: time.Hour}); err != nil {
		t.Errorf("New over decorators: %v", err)
	}
}

// The default interval follows the age: a tenth, at most a minute.
func TestDefaultInterval(t *testing.T) {
	for _, c := range []struct{ age, want time.Duration }{
		{3 * time.Second, 300 * time.Millisecond},
		{time.Hour, time.Minute},
		{720 * time.Hour, time.Minute},
		{time.Millisecond, 10 * time.Millisecond},
	} {
		o := retention.Options{Age: c.age}
		if err := o.Validate(); err != nil || o.Interval != c.want {
			t.Errorf("Age %v: interval %v (%v), want %v", c.age, o.Interval, err, c.want)
		}
	}
}

// gauge returns the value of the series name (without labels) of the
// service's metrics, gathered through a pedantic registry.
func gauge(t *testing.T, m *retention.Metrics, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, x := range mf.GetMetric() {
			switch {
			case x.GetGauge() != nil:
				return x.GetGauge().GetValue()
			case x.GetCounter() != nil:
				return x.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}

// storeClock is an engine.LogClock reading a clock of its own.
type storeClock struct{ clock *fakeclock.Clock }

func (c storeClock) LogNow(context.Context) (int64, error) { return c.clock.Micros(), nil }

// R1 with a store that stamps its own times (PostgreSQL): the age counts
// on the store's clock. This process's clock runs two hours ahead of the
// store's; a task completed 30 minutes ago by the store's clock is kept
// under a one-hour age, one completed 90 minutes ago is removed. Taken
// from this process's clock, the cutoff would remove both.
func TestStoreClockCutoff(t *testing.T) {
	db := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newStore(t, db)
	fill(t, s, "old", 2, a2a.TaskStateCompleted, db)
	db.Advance(time.Hour)
	fill(t, s, "young", 3, a2a.TaskStateCompleted, db)
	db.Advance(30 * time.Minute)
	ahead := fakeclock.New(db.Now().Add(2 * time.Hour))
	svc, err := retention.New(s, retention.Options{Age: time.Hour, Pause: -1, Clock: ahead, StoreClock: storeClock{db}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 2 || count(t, s) != 3 {
		t.Errorf("sweep removed %d, %d left; want 2 removed (the old ones), 3 left", res.Removed, count(t, s))
	}
}
