package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pushdelivery"
)

// Lease is the lease time the harness must give the outbox: the suite
// moves its clock past it to expire a claim.
const Lease = 30 * time.Second

// Rescan is how often, at most, the outbox must find on its own (without
// Touch) that a task moved past its records: the harness gives it this
// or less.
const Rescan = time.Minute

// Open makes a fresh outbox over a fresh, empty store. clock is the time
// the outbox must use where it reads one (Commit, Sweep); its lease time
// must be Lease, its rescan period Rescan or less.
type Open func(t *testing.T, clock func() time.Time) (pushdelivery.Outbox, engine.Store)

// Run runs the conformance suite, one subtest per rule, each on a fresh
// outbox.
func Run(t *testing.T, open Open) {
	for _, c := range clauses {
		t.Run(c.name, func(t *testing.T) {
			// Today: a store that stamps its log with its own clock
			// (PostgreSQL) then agrees with the outbox's to within the test.
			clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
			o, s := open(t, clk.Now)
			c.run(t, &env{t: t, ctx: context.Background(), o: o, s: s, clk: clk})
		})
	}
}

var clauses = []struct {
	name string
	run  func(t *testing.T, e *env)
}{
	{"save-then-get-returns-the-record", testSaveGet},
	{"get-missing-is-not-found", testGetMissing},
	{"list-pages-by-after-ascending-bytewise", testListPaging},
	{"list-sees-only-the-tasks-records", testListOneTask},
	{"delete-removes-one-missing-is-no-error", testDelete},
	{"delete-all-removes-the-tasks-records-only", testDeleteAll},
	{"save-replacing-keeps-delivery-state", testSaveKeepsDelivery},
	{"too-many-configs-stores-nothing", testTooMany},
	{"concurrent-saves-never-pass-the-limit", testTooManyConcurrent},
	{"claim-none-when-nothing-behind-revision", testClaimNeedsRevision},
	{"claim-takes-done-record-once-its-task-moves-on", testClaimDoneReopened},
	{"commit-done-behind-the-task-stays-due", testCommitDoneBehind},
	{"done-record-reopened-within-rescan-without-touch", testDoneReopenedByRescan},
	{"claim-waits-for-next-at", testClaimWaitsNextAt},
	{"claim-skips-busy-dests", testClaimSkipsBusy},
	{"claim-skips-tasks", testClaimSkipsTasks},
	{"claim-among-dests-takes-only-theirs", testClaimAmong},
	{"claim-missing-task-is-none", testClaimMissingTask},
	{"due-now-makes-a-destinations-waiting-records-due", testDueNow},
	{"lease-revision-is-the-tasks", testLeaseRevision},
	{"claimed-record-not-claimed-again-while-leased", testClaimOnce},
	{"concurrent-claimers-claim-each-record-once", testConcurrentClaims},
	{"commit-persists-delivery-state", testCommitPersists},
	{"commit-keeps-config", testCommitKeepsConfig},
	{"release-gives-back-unchanged", testRelease},
	{"expired-lease-reclaimed-old-commit-lost", testLeaseExpiry},
	{"commit-after-delete-is-lease-lost", testCommitAfterDelete},
	{"sweep-deletes-orphans-older-than-grace", testSweep},
	{"sweep-respects-limit", testSweepLimit},
	{"depth-counts-records-behind-and-oldest-due", testDepth},
}

// clock is the suite's driven clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type env struct {
	t   *testing.T
	ctx context.Context
	o   pushdelivery.Outbox
	s   engine.Store
	clk *clock
}

// task creates a working task (revision 1).
func (e *env) task(id a2a.TaskID) {
	e.t.Helper()
	if _, err := e.s.Create(e.ctx, &a2a.Task{ID: id, ContextID: "ctx", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		e.t.Fatal(err)
	}
	e.touch(id)
}

// bump replaces a task, as working, to move its revision, returning the
// new one.
func (e *env) bump(id a2a.TaskID) int64 {
	e.t.Helper()
	return e.write(id, a2a.TaskStateWorking, true)
}

// finish replaces a task as completed, returning its new revision.
func (e *env) finish(id a2a.TaskID) int64 {
	e.t.Helper()
	return e.write(id, a2a.TaskStateCompleted, true)
}

// write replaces a task in state, returning its new revision; touch:
// the outbox is told, as the worker tells it of an event.
func (e *env) write(id a2a.TaskID, state a2a.TaskState, touch bool) int64 {
	e.t.Helper()
	r, err := e.s.Replace(e.ctx, &a2a.Task{ID: id, ContextID: "ctx", Status: a2a.TaskStatus{State: state}}, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	if touch {
		e.touch(id)
	}
	return r.Revision
}

// touch tells an outbox that caches revisions that the task changed, as
// the worker does.
func (e *env) touch(id a2a.TaskID) {
	if tc, ok := e.o.(pushdelivery.Toucher); ok {
		tc.Touch(id)
	}
}

// record returns a record of task with config id, due now, nothing
// delivered, its Dest by id.
func (e *env) record(task a2a.TaskID, id string) *pushdelivery.Record {
	return &pushdelivery.Record{
		TaskID:  task,
		Config:  a2a.PushConfig{ID: id, URL: "https://hook.example/" + id, Token: "tok-" + id},
		Dest:    "https://hook.example:443",
		Created: e.clk.Now(),
		NextAt:  e.clk.Now(),
	}
}

func (e *env) save(r *pushdelivery.Record) {
	e.t.Helper()
	if err := e.o.Save(e.ctx, r); err != nil {
		e.t.Fatalf("save %s/%s: %v", r.TaskID, r.Config.ID, err)
	}
}

func (e *env) get(task a2a.TaskID, id string) *pushdelivery.Record {
	e.t.Helper()
	r, err := e.o.Get(e.ctx, task, id)
	if err != nil {
		e.t.Fatalf("get %s/%s: %v", task, id, err)
	}
	return r
}

func (e *env) claim(busy ...string) pushdelivery.Lease {
	e.t.Helper()
	l, err := e.o.Claim(e.ctx, e.clk.Now(), busy)
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	return l
}

// mustClaim claims and checks it is the record (task, id).
func (e *env) mustClaim(task a2a.TaskID, id string) pushdelivery.Lease {
	e.t.Helper()
	l := e.claim()
	if l == nil {
		e.t.Fatalf("claim: none, want %s/%s", task, id)
	}
	if r := l.Record(); r.TaskID != task || r.Config.ID != id {
		e.t.Fatalf("claim: %s/%s, want %s/%s", r.TaskID, r.Config.ID, task, id)
	}
	return l
}

func (e *env) noClaim(why string, busy ...string) {
	e.t.Helper()
	if l := e.claim(busy...); l != nil {
		e.t.Fatalf("%s: claimed %s/%s", why, l.Record().TaskID, l.Record().Config.ID)
	}
}

// sameRecord reports the first difference between two records, times
// compared with Equal.
func sameRecord(got, want *pushdelivery.Record) error {
	switch {
	case got.Config.TaskID != got.TaskID:
		return fmt.Errorf("config of task %q in a record of %q", got.Config.TaskID, got.TaskID)
	case got.TaskID != want.TaskID || got.Config.ID != want.Config.ID:
		return fmt.Errorf("key %s/%s, want %s/%s", got.TaskID, got.Config.ID, want.TaskID, want.Config.ID)
	case got.Config.URL != want.Config.URL || got.Config.Token != want.Config.Token || got.Dest != want.Dest:
		return fmt.Errorf("config %+v dest %s, want %+v dest %s", got.Config, got.Dest, want.Config, want.Dest)
	case !sameAuth(got.Config.Auth, want.Config.Auth):
		return fmt.Errorf("auth %+v, want %+v", got.Config.Auth, want.Config.Auth)
	case !got.Created.Equal(want.Created) || !got.NextAt.Equal(want.NextAt) || !got.FailingSince.Equal(want.FailingSince):
		return fmt.Errorf("times %v %v %v, want %v %v %v", got.Created, got.NextAt, got.FailingSince, want.Created, want.NextAt, want.FailingSince)
	case got.Delivered != want.Delivered || got.Attempts != want.Attempts || got.LastError != want.LastError || got.Done != want.Done:
		return fmt.Errorf("state %d %d %q %v, want %d %d %q %v", got.Delivered, got.Attempts, got.LastError, got.Done, want.Delivered, want.Attempts, want.LastError, want.Done)
	}
	return nil
}

func sameAuth(a, b *a2a.PushAuthInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (e *env) check(task a2a.TaskID, id string, want *pushdelivery.Record) {
	e.t.Helper()
	if err := sameRecord(e.get(task, id), want); err != nil {
		e.t.Fatal(err)
	}
}

func isNotFound(err error) bool { return errors.Is(err, pushdelivery.ErrNotFound) }

func isTooMany(err error) bool { return errors.Is(err, pushdelivery.ErrTooMany) }
