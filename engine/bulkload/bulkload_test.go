package bulkload_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/bulkload"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/taskgen"
	"github.com/a2astore/a2astore/pebblestore"
)

// clockAt is the stores' clock in these tests (µs).
const clockAt = int64(1_800_000_000_000_000)

var owners = []string{"alice", "bob", "", "carol"}

// source is a taskgen data set: task i and its owner, the same on every
// run (a fresh generator per Load, drawn in order).
func source() func(int) (*a2a.Task, string) {
	gen := taskgen.New(taskgen.Shape{Contexts: 20, Seed: 7})
	return func(i int) (*a2a.Task, string) { return gen.Task(i), owners[i%len(owners)] }
}

func openPebble(t *testing.T, fs vfs.FS) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open("db", pebblestore.Options{FS: fs, Log: true, Logger: pebblelog.Quiet{},
		Clock: func() int64 { return clockAt }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// crashing is a Pebble store whose Import checks every task it is given
// against engine.ValidateStoredTask and fails its call number failAt (1:
// the first): a load that stops there.
type crashing struct {
	*pebblestore.Store
	t      *testing.T
	failAt int
	calls  int
}

func (c *crashing) Import(ctx context.Context, tasks []engine.StoredTask) error {
	for i := range tasks {
		if err := engine.ValidateStoredTask(&tasks[i], engine.Limits{}); err != nil {
			c.t.Errorf("import of invalid stored state: %v", err)
		}
	}
	if c.calls++; c.calls == c.failAt {
		return errors.New("crash")
	}
	return c.Store.Import(ctx, tasks)
}

// check reads every task of a load of n back: held once, at revision 1,
// with its owner and the generator's content, task i at origin + i (one
// origin for all, the last task before the clock), one log entry.
func check(t *testing.T, s *pebblestore.Store, n int) {
	t.Helper()
	ctx := context.Background()
	src := source()
	var origin int64
	for i := range n {
		want, owner := src(i)
		rec, err := s.Get(ctx, want.ID)
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		if i == 0 {
			origin = rec.Cursor.UpdatedAt
		}
		if rec.Revision != 1 || rec.Owner != owner || rec.Task.ContextID != want.ContextID || rec.Task.Status.State != want.Status.State || rec.Cursor.UpdatedAt != origin+int64(i) {
			t.Fatalf("task %d: revision %d owner %q context %q state %s at %d; want 1 %q %q %s at %d",
				i, rec.Revision, rec.Owner, rec.Task.ContextID, rec.Task.Status.State, rec.Cursor.UpdatedAt, owner, want.ContextID, want.Status.State, origin+int64(i))
		}
		log, err := s.ReadLog(ctx, want.ID, 0, 10)
		if err != nil || len(log) != 1 || log[0].Revision != 1 || log[0].Time != rec.Cursor.UpdatedAt || log[0].Kind != engine.LogTask || log[0].State != want.Status.State {
			t.Fatalf("task %d: log %+v, %v", i, log, err)
		}
	}
	if last := origin + int64(n-1); last >= clockAt {
		t.Errorf("last task at %d, not before the clock %d", last, clockAt)
	}
	resp, err := s.List(ctx, &engine.ListRequest{PageSize: 1, IncludeTotalSize: true})
	if err != nil || resp.TotalSize != n {
		t.Fatalf("total %v, %v; want %d", resp, err, n)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestImportResumes: a load through the Importer writes valid stored
// state; stopped at its second batch and run again (with another batch
// size, so one batch is found in part) it completes with no task twice,
// none missing, and the times of one unbroken sequence.
func TestImportResumes(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	s := openPebble(t, fs)
	const n = 2500
	res, err := bulkload.Load(ctx, &crashing{Store: s, t: t, failAt: 2}, bulkload.Config{N: n, Task: source(), Clock: func() int64 { return clockAt }})
	if err == nil || res.Path != "import" || res.Written != 1000 || res.Found != 0 {
		t.Fatalf("stopped load: %+v, %v; want import, 1000 written and the crash", res, err)
	}
	res, err = bulkload.Load(ctx, &crashing{Store: s, t: t}, bulkload.Config{N: n, Task: source(), Batch: 700, Clock: func() int64 { return clockAt + 5e6 }})
	if err != nil || res.Written != n-1000 || res.Found != 1000 {
		t.Fatalf("resumed load: %+v, %v; want %d written, 1000 found", res, err, n-1000)
	}
	check(t, s, n)
	res, err = bulkload.Load(ctx, s, bulkload.Config{N: n, Task: source()})
	if err != nil || res.Written != 0 || res.Found != n {
		t.Fatalf("load of a loaded store: %+v, %v; want all found", res, err)
	}
}

// TestImportAfterDeletes: a loaded store some of whose tasks were deleted
// since is not refused: a batch whose first and last tasks were deleted
// gets them written back.
func TestImportAfterDeletes(t *testing.T) {
	ctx := context.Background()
	s := openPebble(t, vfs.NewMem())
	const n = 1200
	if _, err := bulkload.Load(ctx, s, bulkload.Config{N: n, Task: source(), Batch: 400}); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{400, 799} { // a batch's first and last
		if err := s.Delete(ctx, taskgen.TaskID(i)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := bulkload.Load(ctx, s, bulkload.Config{N: n, Task: source(), Batch: 400})
	if err != nil || res.Written != 2 || res.Found != n-2 {
		t.Fatalf("reload: %+v, %v; want 2 written", res, err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestForeignStore: a store holding a task of the load's ID from another
// data set fails the load and is not written to.
func TestForeignStore(t *testing.T) {
	ctx := context.Background()
	s := openPebble(t, vfs.NewMem())
	other := taskgen.New(taskgen.Shape{Contexts: 20, Seed: 8}).Build(taskgen.TaskID(0), "elsewhere", a2a.TaskStateWorking, nil, 0)
	if _, err := s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	res, err := bulkload.Load(ctx, s, bulkload.Config{N: 10, Task: source()})
	if !errors.Is(err, engine.ErrAlreadyExists) || res.Written != 0 {
		t.Fatalf("load over another data set: %+v, %v; want ErrAlreadyExists, nothing written", res, err)
	}
}

// TestForeignStoreMatchingEnds: another data set whose batches' first and
// last tasks happen to match the load's (as another seed draws the same
// context for them now and then) is still refused, not counted as found.
func TestForeignStoreMatchingEnds(t *testing.T) {
	ctx := context.Background()
	s := openPebble(t, vfs.NewMem())
	const n, batch = 800, 400
	if _, err := bulkload.Load(ctx, s, bulkload.Config{N: n, Task: source(), Batch: batch}); err != nil {
		t.Fatal(err)
	}
	mine := source()
	other := func(i int) (*a2a.Task, string) {
		task, owner := mine(i)
		if i%batch != 0 && i%batch != batch-1 {
			task.ContextID += "-elsewhere"
		}
		return task, owner
	}
	res, err := bulkload.Load(ctx, s, bulkload.Config{N: n, Task: other, Batch: batch})
	if !errors.Is(err, engine.ErrAlreadyExists) || res.Written != 0 || res.Found != 0 {
		t.Fatalf("load over a data set matching at the batches' ends: %+v, %v; want ErrAlreadyExists, nothing written or found", res, err)
	}
}

// createOnly is a store without an Importer (whatever the memstore
// under it has).
type createOnly struct{ engine.OwnerStore }

// cancelAfter is createOnly that calls cancel once its at-th task is
// created (or found).
type cancelAfter struct {
	createOnly
	n      atomic.Int64
	at     int64
	cancel context.CancelFunc
}

func (s *cancelAfter) CreateOwned(ctx context.Context, task *a2a.Task, owner string) (engine.Record, error) {
	defer s.count()
	return s.createOnly.CreateOwned(ctx, task, owner)
}

func (s *cancelAfter) Create(ctx context.Context, task *a2a.Task) (engine.Record, error) {
	defer s.count()
	return s.createOnly.Create(ctx, task)
}

func (s *cancelAfter) count() {
	if s.n.Add(1) == s.at {
		s.cancel()
	}
}

// TestCreateResumes: on a store without an Importer the load goes
// through Create; canceled halfway (by the store, once its 600th create
// ran: the generator runs batches ahead of the writes, so a cancel made
// while generating could come before any write) and run again, it
// completes exactly.
func TestCreateResumes(t *testing.T) {
	base := memstore.New(memstore.Options{Log: true})
	s := createOnly{base}
	const n = 1500
	ctx, cancel := context.WithCancel(context.Background())
	src := source()
	res, err := bulkload.Load(ctx, &cancelAfter{createOnly: s, at: 600, cancel: cancel}, bulkload.Config{N: n, Batch: 500, Task: src})
	if !errors.Is(err, context.Canceled) || res.Path != "create" || res.Written < 500 || res.Written >= n {
		t.Fatalf("canceled load: %+v, %v", res, err)
	}
	res2, err := bulkload.Load(context.Background(), s, bulkload.Config{N: n, Batch: 500, Task: source()})
	src = source()
	if err != nil || res2.Written+res2.Found != n || res2.Found < res.Written {
		t.Fatalf("resumed load: %+v, %v", res2, err)
	}
	resp, err := s.List(context.Background(), &engine.ListRequest{PageSize: 1, IncludeTotalSize: true})
	if err != nil || resp.TotalSize != n {
		t.Fatalf("total %v, %v; want %d", resp, err, n)
	}
	if err := base.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want, owner := src(i)
		if rec, err := s.Get(context.Background(), want.ID); err != nil || rec.Owner != owner || rec.Task.ContextID != want.ContextID {
			t.Fatalf("task %d: %+v, %v", i, rec, err)
		}
	}
}

// TestProgress: lines at most once per ProgressEvery on the load's clock,
// and a last one at 100 %.
func TestProgress(t *testing.T) {
	var b strings.Builder
	now := time.Unix(0, 0)
	tick := func() time.Time { now = now.Add(300 * time.Millisecond); return now }
	res, err := bulkload.Load(context.Background(), openPebble(t, vfs.NewMem()), bulkload.Config{N: 1000, Batch: 100, Task: source(), Progress: &b, Now: tick})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	// 10 batches, 300 ms apart on this clock: a line every 4th, and the last.
	if len(lines) < 3 || len(lines) > 5 {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	last := lines[len(lines)-1]
	if want := fmt.Sprintf("bulk load: 1000/1000 tasks (100.0%%), %.0f tasks/s (import; 0 found already)", res.Rate()); last != want {
		t.Errorf("last line %q, want %q", last, want)
	}
	if res.Rate() <= 0 {
		t.Errorf("rate %v", res.Rate())
	}
}

// TestBadConfig: bad input is refused before anything is written.
func TestBadConfig(t *testing.T) {
	s := memstore.New(memstore.Options{})
	for _, c := range []bulkload.Config{{N: -1, Task: source()}, {N: 1}, {N: 1, Task: source(), Batch: engine.MaxExport + 1}} {
		if _, err := bulkload.Load(context.Background(), s, c); !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", c, err)
		}
	}
	if _, err := bulkload.Load(context.Background(), s, bulkload.Config{N: 1, Task: func(int) (*a2a.Task, string) {
		return taskgen.New(taskgen.Shape{}).Task(0), "owner"
	}}); err != nil {
		t.Errorf("owned task on an OwnerStore: %v", err)
	}
}
