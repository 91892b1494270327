package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/pushdelivery"
)

func testClaimNeedsRevision(t *testing.T, e *env) {
	e.task("t1")
	r := e.record("t1", "c1")
	r.Delivered = 1
	e.save(r)
	e.noClaim("revision 1, delivered 1")
	rev := e.bump("t1")
	if l := e.mustClaim("t1", "c1"); l.Revision() != rev {
		t.Fatalf("lease revision %d, want %d", l.Revision(), rev)
	}
}

// testClaimDoneReopened: a Done record is not claimed while its task
// stays at its terminal revision, and is claimed (and pending) again once
// a write moves the task on (SPEC S7 allows writes to a terminal task;
// N2 delivers every event logged).
func testClaimDoneReopened(t *testing.T, e *env) {
	e.doneRecord()
	e.pending(0, "done record")
	rev := e.bump("t1")
	e.pending(1, "done record, task written to since")
	if l := e.mustClaim("t1", "c1"); l.Revision() != rev {
		t.Fatalf("lease revision %d, want %d", l.Revision(), rev)
	}
}

// testCommitDoneBehind: a commit that sets Done at a revision its task
// has since passed (a write between the claim and the commit) leaves the
// record due: the write's event is still to be delivered.
func testCommitDoneBehind(t *testing.T, e *env) {
	e.task("t1")
	e.save(e.record("t1", "c1"))
	head := e.finish("t1")
	l := e.mustClaim("t1", "c1")
	rev := e.bump("t1")
	c := *l.Record()
	c.Delivered, c.Done, c.NextAt = head, true, e.clk.Now()
	if err := l.Commit(e.ctx, &c); err != nil {
		t.Fatal(err)
	}
	if l := e.mustClaim("t1", "c1"); l.Revision() != rev || l.Record().Delivered != head {
		t.Fatalf("claimed at revision %d with %d delivered, want %d and %d", l.Revision(), l.Record().Delivered, rev, head)
	}
}

// testDoneReopenedByRescan: a write to a Done record's task that the
// outbox is not told of (Touch: another instance's, foreign SQL) makes
// the record due within Rescan.
func testDoneReopenedByRescan(t *testing.T, e *env) {
	e.doneRecord()
	rev := e.write("t1", a2a.TaskStateWorking, false)
	e.clk.advance(Rescan)
	if l := e.mustClaim("t1", "c1"); l.Revision() != rev {
		t.Fatalf("lease revision %d, want %d", l.Revision(), rev)
	}
}

// doneRecord makes task t1, completes it, and saves record c1 Done at
// its terminal revision: not claimed.
func (e *env) doneRecord() {
	e.t.Helper()
	e.task("t1")
	r := e.record("t1", "c1")
	r.Delivered, r.Done = e.finish("t1"), true
	e.save(r)
	e.noClaim("done record, task at its terminal revision")
}

// pending checks Depth's count of records not Done.
func (e *env) pending(want int, why string) {
	e.t.Helper()
	if n, _, err := e.o.Depth(e.ctx, e.clk.Now()); err != nil || n != want {
		e.t.Fatalf("%s: depth %d, %v; want %d", why, n, err, want)
	}
}

func testClaimWaitsNextAt(t *testing.T, e *env) {
	e.task("t1")
	r := e.record("t1", "c1")
	r.NextAt = e.clk.Now().Add(10 * time.Second)
	e.save(r)
	e.noClaim("next_at in 10 s")
	e.clk.advance(9 * time.Second)
	e.noClaim("next_at in 1 s")
	e.clk.advance(time.Second)
	e.mustClaim("t1", "c1")
}

func testClaimSkipsBusy(t *testing.T, e *env) {
	e.task("t1")
	a, b := e.record("t1", "a"), e.record("t1", "b")
	a.Dest, b.Dest = "https://a.example:443", "https://b.example:443"
	b.NextAt = a.NextAt.Add(-time.Second) // b first, unless busy
	e.save(a)
	e.save(b)
	l := e.claim("https://b.example:443", "http://c.example:80")
	if l == nil || l.Record().Config.ID != "a" {
		t.Fatalf("busy b: claimed %v, want a", l)
	}
	e.noClaim("a leased, b busy", "https://b.example:443")
	e.mustClaim("t1", "b")
}

// testClaimSkipsTasks: a Claim passes over the records of the tasks it
// is told to skip (the worker's per-owner limit, SPEC N4), and only those.
func testClaimSkipsTasks(t *testing.T, e *env) {
	e.task("t1")
	e.task("t2")
	a, b := e.record("t1", "a"), e.record("t2", "b")
	a.NextAt = b.NextAt.Add(-time.Second) // t1's first, unless skipped
	e.save(a)
	e.save(b)
	l, err := e.o.Claim(e.ctx, e.clk.Now(), nil, "t1", "t3")
	if err != nil || l == nil || l.Record().TaskID != "t2" {
		t.Fatalf("t1 skipped: claimed %v, %v; want t2's record", l, err)
	}
	if l, err := e.o.Claim(e.ctx, e.clk.Now(), nil, "t1"); err != nil || l != nil {
		t.Fatalf("t1 skipped, t2 leased: claimed %v, %v; want none", l, err)
	}
	e.mustClaim("t1", "a")
}

// testClaimAmong: ClaimAmong (Drainer) claims the due records of the
// destinations it is given, first by NextAt, and only those: the worker
// drains a destination set aside past the deadline (SPEC N4).
func testClaimAmong(t *testing.T, e *env) {
	d, ok := e.o.(pushdelivery.Drainer)
	if !ok {
		t.Skipf("%T claims among no destinations (no Drainer)", e.o)
	}
	e.task("t1")
	e.task("t2")
	a, b, c := e.record("t1", "a"), e.record("t2", "b"), e.record("t2", "c")
	a.Dest, b.Dest, c.Dest = "https://a.example:443", "https://b.example:443", "https://b.example:443"
	a.NextAt = b.NextAt.Add(-2 * time.Second) // a first, unless not among
	c.NextAt = b.NextAt.Add(-time.Second)     // then c, then b
	for _, r := range []*pushdelivery.Record{a, b, c} {
		e.save(r)
	}
	among := func(dests ...string) string {
		t.Helper()
		l, err := d.ClaimAmong(e.ctx, e.clk.Now(), dests)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil {
			return ""
		}
		return l.Record().Config.ID
	}
	for i, want := range []string{"c", "b", ""} {
		if got := among("https://b.example:443", "http://z.example:80"); got != want {
			t.Fatalf("claim %d among b's destination: %q, want %q", i, got, want)
		}
	}
	if got := among(); got != "" {
		t.Fatalf("claim among no destination: %q, want none", got)
	}
	e.mustClaim("t1", "a")
}

// testDueNow: DueNow makes due the records to a destination that wait
// for a later NextAt and are behind their task, and only those (a
// destination back after failures, SPEC N4).
func testDueNow(t *testing.T, e *env) {
	r, ok := e.o.(pushdelivery.Recoverer)
	if !ok {
		t.Skip("the outbox does not implement Recoverer")
	}
	e.task("t1")
	later := e.clk.Now().Add(time.Hour)
	a, b, c := e.record("t1", "a"), e.record("t1", "b"), e.record("t1", "c")
	a.NextAt, b.NextAt, c.NextAt = later, later, later
	b.Dest = "https://other.example:443"
	c.Delivered = 1 // caught up
	for _, x := range []*pushdelivery.Record{a, b, c} {
		e.save(x)
	}
	e.noClaim("all waiting")
	n, err := r.DueNow(e.ctx, a.Dest, e.clk.Now())
	if err != nil || n != 1 {
		t.Fatalf("DueNow: %d, %v; want 1 (a)", n, err)
	}
	e.mustClaim("t1", "a")
	e.noClaim("b to another destination, c caught up")
	if got := e.get("t1", "a").NextAt; !got.Equal(e.clk.Now()) {
		t.Fatalf("a's NextAt %v, want now %v", got, e.clk.Now())
	}
}

func testClaimMissingTask(t *testing.T, e *env) {
	e.save(e.record("nosuchtask", "c1"))
	e.noClaim("task missing")
}

func testLeaseRevision(t *testing.T, e *env) {
	e.task("t1")
	e.bump("t1")
	rev := e.bump("t1")
	e.save(e.record("t1", "c1"))
	if l := e.mustClaim("t1", "c1"); l.Revision() != rev {
		t.Fatalf("lease revision %d, want %d", l.Revision(), rev)
	}
}

// testClaimOnce: a claimed record is not claimed again while its lease,
// which ends at the claim's now plus Lease (Until), lasts.
func testClaimOnce(t *testing.T, e *env) {
	e.task("t1")
	e.save(e.record("t1", "c1"))
	if l, want := e.mustClaim("t1", "c1"), e.clk.Now().Add(Lease); !l.Until().Equal(want) {
		t.Fatalf("lease until %v, want %v (the claim's now plus Lease)", l.Until(), want)
	}
	e.noClaim("leased")
	e.clk.advance(Lease - time.Second)
	e.noClaim("lease alive")
}

// ClaimConcurrently claims from the outboxes with goroutines goroutines
// (spread over them) until none claims anything, and returns how many
// times each record ("task/id") was claimed. Leases are kept.
func ClaimConcurrently(t *testing.T, now time.Time, goroutines int, outboxes ...pushdelivery.Outbox) map[string]int {
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for i := range goroutines {
		o := outboxes[i%len(outboxes)]
		wg.Go(func() {
			for {
				l, err := o.Claim(context.Background(), now, nil)
				if err != nil {
					t.Error(err)
				}
				if l == nil || err != nil {
					return
				}
				mu.Lock()
				got[string(l.Record().TaskID)+"/"+l.Record().Config.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

func testConcurrentClaims(t *testing.T, e *env) {
	want := map[string]bool{}
	for i := range 3 {
		task := a2a.TaskID(fmt.Sprintf("t%d", i))
		e.task(task)
		for j := range 10 {
			r := e.record(task, fmt.Sprintf("c%d", j))
			e.save(r)
			want[string(task)+"/"+r.Config.ID] = true
		}
	}
	got := ClaimConcurrently(t, e.clk.Now(), 8, e.o)
	for k, n := range got {
		if n != 1 || !want[k] {
			t.Errorf("%s claimed %d times (expected: %v)", k, n, want[k])
		}
	}
	if len(got) != len(want) {
		t.Errorf("claimed %d records, want %d", len(got), len(want))
	}
}

// delivered is r after a delivery of revision rev that left a failure
// of the next entry behind.
func delivered(e *env, r *pushdelivery.Record, rev int64) *pushdelivery.Record {
	n := *r
	n.Delivered, n.Attempts, n.LastError = rev, 1, "HTTP 503"
	n.FailingSince = e.clk.Now()
	n.NextAt = e.clk.Now().Add(2 * time.Second)
	n.Done = true
	return &n
}

// claimOne creates task t1 with one record, c1, and claims it.
func claimOne(e *env) (*pushdelivery.Record, pushdelivery.Lease) {
	e.t.Helper()
	e.task("t1")
	r := e.record("t1", "c1")
	e.save(r)
	return r, e.mustClaim("t1", "c1")
}

// expectLost commits r through l and expects ErrLeaseLost.
func expectLost(e *env, l pushdelivery.Lease, r *pushdelivery.Record, why string) {
	e.t.Helper()
	if err := l.Commit(e.ctx, r); !errors.Is(err, pushdelivery.ErrLeaseLost) {
		e.t.Fatalf("%s: %v, want ErrLeaseLost", why, err)
	}
}

func testCommitPersists(t *testing.T, e *env) {
	r, l := claimOne(e)
	want := delivered(e, r, 1)
	if err := l.Commit(e.ctx, want); err != nil {
		t.Fatal(err)
	}
	e.check("t1", "c1", want)
	expectLost(e, l, r, "second commit of one lease")
	e.check("t1", "c1", want)
}

func testCommitKeepsConfig(t *testing.T, e *env) {
	r, l := claimOne(e)
	c := delivered(e, r, 1)
	c.Done = false
	c.Config.URL, c.Dest, c.Created = "http://evil.example/", "http://evil.example:80", time.Time{}
	if err := l.Commit(e.ctx, c); err != nil {
		t.Fatal(err)
	}
	want := delivered(e, r, 1)
	want.Done = false
	e.check("t1", "c1", want)
}

func testRelease(t *testing.T, e *env) {
	r, l := claimOne(e)
	l.Release(e.ctx)
	e.check("t1", "c1", r)
	e.mustClaim("t1", "c1")
	expectLost(e, l, delivered(e, r, 1), "commit after release and reclaim")
	e.check("t1", "c1", r)
}

func testLeaseExpiry(t *testing.T, e *env) {
	r, old := claimOne(e)
	e.clk.advance(Lease + time.Second)
	cur := e.mustClaim("t1", "c1")
	expectLost(e, old, delivered(e, r, 1), "commit of the expired lease")
	e.check("t1", "c1", r)
	old.Release(e.ctx)
	e.noClaim("the new holder's lease survives the old one's release")
	want := delivered(e, r, 1)
	if err := cur.Commit(e.ctx, want); err != nil {
		t.Fatal(err)
	}
	e.check("t1", "c1", want)
}

func testCommitAfterDelete(t *testing.T, e *env) {
	r, l := claimOne(e)
	if err := e.o.Delete(e.ctx, "t1", "c1"); err != nil {
		t.Fatal(err)
	}
	expectLost(e, l, delivered(e, r, 1), "commit after delete")
	if _, err := e.o.Get(e.ctx, "t1", "c1"); !isNotFound(err) {
		t.Fatalf("commit brought the record back: %v", err)
	}
	e.save(r) // saved again: a new record, not the lease's
	expectLost(e, l, delivered(e, r, 1), "commit after delete and save")
	e.check("t1", "c1", r)
}

func (e *env) sweep(grace time.Duration, limit, want int) {
	e.t.Helper()
	n, err := e.o.Sweep(e.ctx, grace, limit)
	if err != nil || n != want {
		e.t.Fatalf("sweep: %d, %v; want %d", n, err, want)
	}
}

func testSweep(t *testing.T, e *env) {
	e.task("t1")
	e.task("t2")
	old := func(task a2a.TaskID, id string) *pushdelivery.Record {
		r := e.record(task, id)
		r.Created = e.clk.Now().Add(-2 * time.Hour)
		return r
	}
	e.save(old("t1", "a"))   // task exists: kept
	e.save(old("t2", "a"))   // task deleted below: swept
	e.save(old("gone", "a")) // never existed: swept
	e.save(e.record("gone", "b"))
	if err := e.s.Delete(e.ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	e.sweep(time.Hour, 100, 2)
	for _, k := range [][2]string{{"t2", "a"}, {"gone", "a"}} {
		if _, err := e.o.Get(e.ctx, a2a.TaskID(k[0]), k[1]); !isNotFound(err) {
			t.Fatalf("%s/%s not swept: %v", k[0], k[1], err)
		}
	}
	e.get("t1", "a")
	e.get("gone", "b") // younger than grace
	e.clk.advance(time.Hour + time.Second)
	e.sweep(time.Hour, 100, 1)
	e.get("t1", "a")
}

func testSweepLimit(t *testing.T, e *env) {
	for i := range 5 {
		r := e.record(a2a.TaskID(fmt.Sprintf("gone%d", i%2)), fmt.Sprintf("c%d", i))
		r.Created = e.clk.Now().Add(-2 * time.Hour)
		e.save(r)
	}
	e.sweep(time.Hour, 2, 2)
	e.sweep(time.Hour, 2, 2)
	e.sweep(time.Hour, 2, 1)
	e.sweep(time.Hour, 2, 0)
}

// testDepth: a due record has waited since the later of its NextAt and
// its first undelivered entry's commit (here, the task's creation 30 s
// ago).
func testDepth(t *testing.T, e *env) {
	e.task("t1")
	e.clk.advance(30 * time.Second)
	now := e.clk.Now()
	mk := func(id string, next time.Duration, delivered int64, done bool) {
		r := e.record("t1", id)
		r.NextAt, r.Delivered, r.Done = now.Add(next), delivered, done
		if next == 0 {
			r.NextAt = time.Time{} // as a delivery leaves it
		}
		e.save(r)
	}
	mk("done", -time.Hour, 1, true)
	mk("later", time.Minute, 0, false)
	mk("due", -10*time.Second, 0, false)
	mk("due-recent", -time.Second, 0, false)
	mk("caught-up", -time.Hour, 1, false)
	n, age, err := e.o.Depth(e.ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || age != 10*time.Second { // later, due, due-recent: not the caught-up nor the done
		t.Fatalf("depth %d, oldest due %v; want 3, 10s", n, age)
	}
	// A record due since its entry (no retry time) has waited since the
	// task's creation: 30 s on the suite's clock, a little less on a store
	// that stamps its own.
	mk("fresh", 0, 0, false)
	e.get("t1", "fresh") // saved
	// (A store stamping its own clock is behind by the time the test took
	// since its clock started: up to a second, more on a loaded machine.)
	if _, age, err = e.o.Depth(e.ctx, now); err != nil || age < 20*time.Second || age > 30*time.Second {
		t.Fatalf("oldest due %v, %v; want the task's age, 30s (20s at least)", age, err)
	}
}
