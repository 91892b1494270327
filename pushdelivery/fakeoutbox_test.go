package pushdelivery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// fakeOutbox is a minimal slice-based Outbox for the worker's tests, following
// the contract in outbox.go (leases with a token and an expiry, busy
// destinations, Done): records are claimed in the order they were saved.
// The real memory outbox replaces it.
type fakeOutbox struct {
	failCommits atomic.Int32 // commits to fail before the next succeeds
	store       engine.Store
	clock       func() time.Time
	lease       time.Duration

	mu struct {
		sync.Mutex
		recs   []*fakeRec
		token  int
		commit []time.Duration // the time each Commit's context left it
	}
}

type fakeRec struct {
	r     Record
	token int       // of the current lease, 0: none
	until time.Time // the lease's expiry
}

var _ Outbox = (*fakeOutbox)(nil)

func newFakeOutbox(store engine.Store, clock func() time.Time) *fakeOutbox {
	return &fakeOutbox{store: store, clock: clock, lease: time.Minute}
}

func (o *fakeOutbox) find(task a2a.TaskID, id string) int {
	return slices.IndexFunc(o.mu.recs, func(f *fakeRec) bool { return f.r.TaskID == task && f.r.Config.ID == id })
}

func (o *fakeOutbox) Save(_ context.Context, r *Record) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i := o.find(r.TaskID, r.Config.ID); i >= 0 {
		o.mu.recs[i].r.Config, o.mu.recs[i].r.Dest = r.Config, r.Dest
		return nil
	}
	o.mu.recs = append(o.mu.recs, &fakeRec{r: *r})
	return nil
}

func (o *fakeOutbox) Get(_ context.Context, task a2a.TaskID, id string) (*Record, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := o.find(task, id)
	if i < 0 {
		return nil, ErrNotFound
	}
	r := o.mu.recs[i].r
	return &r, nil
}

func (o *fakeOutbox) List(context.Context, a2a.TaskID, string, int) ([]*Record, error) {
	panic("fakeOutbox: List is not used by the worker")
}

func (o *fakeOutbox) Delete(_ context.Context, task a2a.TaskID, id string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i := o.find(task, id); i >= 0 {
		o.mu.recs = slices.Delete(o.mu.recs, i, i+1)
	}
	return nil
}

func (o *fakeOutbox) DeleteAll(context.Context, a2a.TaskID) error {
	panic("fakeOutbox: DeleteAll is not used by the worker")
}

func (o *fakeOutbox) Claim(ctx context.Context, now time.Time, busy []string, skip ...a2a.TaskID) (Lease, error) {
	return o.claim(ctx, now, func(r *Record) bool { return !slices.Contains(busy, r.Dest) && !slices.Contains(skip, r.TaskID) })
}

// ClaimAmong implements Drainer.
func (o *fakeOutbox) ClaimAmong(ctx context.Context, now time.Time, dests []string) (Lease, error) {
	return o.claim(ctx, now, func(r *Record) bool { return slices.Contains(dests, r.Dest) })
}

func (o *fakeOutbox) claim(ctx context.Context, now time.Time, take func(*Record) bool) (Lease, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.mu.recs {
		if f.r.NextAt.After(now) || (f.token != 0 && f.until.After(now)) || !take(&f.r) {
			continue
		}
		t, err := o.store.Get(ctx, f.r.TaskID)
		if err != nil || t.Revision <= f.r.Delivered {
			continue
		}
		o.mu.token++
		f.token, f.until = o.mu.token, now.Add(o.lease)
		r := f.r
		return &fakeLease{o: o, f: f, token: f.token, r: &r, rev: t.Revision, until: f.until}, nil
	}
	return nil, nil
}

// DueNow implements Recoverer.
func (o *fakeOutbox) DueNow(_ context.Context, dest string, now time.Time) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, f := range o.mu.recs {
		if f.r.Dest == dest && f.r.NextAt.After(now) && o.behind(f) {
			f.r.NextAt = now
			n++
		}
	}
	return n, nil
}

func (o *fakeOutbox) Sweep(context.Context, time.Duration, int) (int, error) { return 0, nil }

func (o *fakeOutbox) Depth(_ context.Context, now time.Time) (int, time.Duration, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, oldest := 0, time.Duration(0)
	for _, f := range o.mu.recs {
		if !f.r.Done || o.behind(f) {
			n++
			if !f.r.NextAt.After(now) {
				oldest = max(oldest, now.Sub(f.r.Created))
			}
		}
	}
	return n, oldest, nil
}

// behind reports whether f's task is past its Delivered (a Done record
// whose task was written to since).
func (o *fakeOutbox) behind(f *fakeRec) bool {
	t, err := o.store.Get(context.Background(), f.r.TaskID)
	return err == nil && t.Revision > f.r.Delivered
}

// commitTimes returns the time each Commit's context left it (-1: no
// deadline).
func (o *fakeOutbox) commitTimes() []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.mu.commit)
}

// rec returns a copy of the record of (task, id).
func (o *fakeOutbox) rec(task a2a.TaskID, id string) Record {
	r, err := o.Get(context.Background(), task, id)
	if err != nil {
		panic(err)
	}
	return *r
}

// leased reports whether (task, id) is under a lease.
func (o *fakeOutbox) leased(task a2a.TaskID, id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.recs[o.find(task, id)].token != 0
}

type fakeLease struct {
	o     *fakeOutbox
	f     *fakeRec
	token int
	r     *Record
	rev   int64
	until time.Time
}

func (l *fakeLease) Record() *Record  { return l.r }
func (l *fakeLease) Revision() int64  { return l.rev }
func (l *fakeLease) Until() time.Time { return l.until }

func (l *fakeLease) Commit(ctx context.Context, r *Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.o.failCommits.Load() > 0 && l.o.failCommits.Add(-1) >= 0 {
		return errors.New("fake: connection terminated")
	}
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	l.o.mu.commit = append(l.o.mu.commit, left)
	if !slices.Contains(l.o.mu.recs, l.f) || l.f.token != l.token {
		return ErrLeaseLost
	}
	f := &l.f.r
	f.Delivered, f.Attempts, f.FailingSince, f.NextAt, f.LastError, f.Done =
		r.Delivered, r.Attempts, r.FailingSince, r.NextAt, r.LastError, r.Done
	l.f.token = 0
	return nil
}

func (l *fakeLease) Release(ctx context.Context) {
	if ctx.Err() != nil { // as a database's would, the release fails: the lease expires
		return
	}
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	if l.f.token == l.token {
		l.f.token = 0
	}
}
