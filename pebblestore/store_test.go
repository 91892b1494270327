package pebblestore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/storetest"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/taskiter"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: random)")

func testSeed(t testing.TB) uint64 {
	s := *seedFlag
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed=%d)", s, s)
	return s
}

// openStore opens a store in dir on fs and checks its invariants, then
// closes it, at cleanup.
func openStore(t testing.TB, fs vfs.FS, dir string, clock engine.Clock) *Store {
	t.Helper()
	s, err := Open(dir, Options{Clock: clock, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.CheckInvariants(); err != nil && !errors.Is(err, engine.ErrInternal) {
			t.Errorf("invariants: %v", err)
		}
		s.Close()
	})
	return s
}

func openMem(t testing.TB, clock engine.Clock) *Store {
	return openStore(t, vfs.NewMem(), "db", clock)
}

func mustCheck(t testing.TB, s *Store) {
	t.Helper()
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("invariants: %v", err)
	}
}

// states are the task states tests draw from.
var states = engine.KnownStates()

// TestStateCodes: every known state has a stored code, codes are distinct
// and nonzero, and codes decode back to their state.
func TestStateCodes(t *testing.T) {
	if len(stateCodes) != len(engine.KnownStates()) {
		t.Errorf("%d state codes for %d known states", len(stateCodes), len(engine.KnownStates()))
	}
	seen := map[byte]a2a.TaskState{}
	for _, st := range engine.KnownStates() {
		c, ok := stateCodes[st]
		if !ok {
			t.Errorf("state %s has no stored code", st)
			continue
		}
		if c == 0 || seen[c] != "" {
			t.Errorf("state %s has code %d, also %q's", st, c, seen[c])
		}
		seen[c] = st
		if back, ok := stateFromCode(c); !ok || back != st {
			t.Errorf("code %d decodes to %q, %v; want %s", c, back, ok, st)
		}
	}
	if _, ok := stateFromCode(0); ok {
		t.Error("code 0 decodes to a state")
	}
}

func task(id, ctx string, state a2a.TaskState) *a2a.Task {
	return &a2a.Task{ID: a2a.TaskID(id), ContextID: ctx, Status: a2a.TaskStatus{State: state}}
}

// traverse lists every page of req and returns the cursors and tokens seen.
func traverse(t testing.TB, s engine.Store, req engine.ListRequest) ([]engine.Cursor, []string) {
	t.Helper()
	var curs []engine.Cursor
	var toks []string
	for resp, err := range taskiter.StorePages(context.Background(), s, req) {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		curs = append(curs, resp.TaskCursors...)
		toks = append(toks, resp.NextPageToken)
		if len(toks) > 1e6 {
			t.Fatal("traversal does not end")
		}
	}
	return curs, toks
}

func TestBinaryIDsAndOrder(t *testing.T) {
	clock := storetest.NewManualClock(100)
	s := openMem(t, clock.Now)
	ctx := context.Background()
	ids := []string{"a", "a\x00", "a\x00\x00", "a\xff", "\xff", "\x00", "ab", "\xc3\x28"}
	for _, id := range ids {
		if _, err := s.Create(ctx, task(id, "ctx\x00\xfe", a2a.TaskStateWorking)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := traverse(t, s, engine.ListRequest{PageSize: 3, ContextID: "ctx\x00\xfe"})
	want := slices.Clone(ids)
	slices.Sort(want)
	slices.Reverse(want)
	if len(got) != len(want) {
		t.Fatalf("got %d tasks, want %d", len(got), len(want))
	}
	for i := range want {
		if string(got[i].ID) != want[i] || got[i].UpdatedAt != 100 {
			t.Errorf("position %d: %q@%d, want %q@100", i, got[i].ID, got[i].UpdatedAt, want[i])
		}
	}
	for _, id := range ids {
		r, err := s.Get(ctx, a2a.TaskID(id))
		if err != nil || string(r.Task.ID) != id || r.Task.ContextID != "ctx\x00\xfe" {
			t.Errorf("get %q: %+v %v", id, r.Task, err)
		}
	}
	mustCheck(t, s)
}

func TestClockRules(t *testing.T) {
	clock := storetest.NewManualClock(1000)
	fs := vfs.NewMem()
	s, err := Open("db", Options{Clock: clock.Now, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Create(ctx, task("t", "c", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	clock.Set(10) // behind
	r, err := s.Replace(ctx, task("t", "c", a2a.TaskStateWorking), 1)
	if err != nil || r.Cursor.UpdatedAt != 1001 || r.Revision != 2 {
		t.Fatalf("replace with the clock behind: %+v %v", r.Cursor, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// S4 across reopen: the stored time is the floor.
	s = openStore(t, fs, "db", clock.Now)
	r, err = s.Cancel(ctx, "t")
	if err != nil || r.Cursor.UpdatedAt != 1002 || r.Revision != 3 {
		t.Fatalf("cancel after reopen: %+v rev %d %v", r.Cursor, r.Revision, err)
	}
	if r.Task.Status.Timestamp == nil || r.Task.Status.Timestamp.UnixMicro() != 1002 {
		t.Errorf("cancel status timestamp %v, want 1002µs", r.Task.Status.Timestamp)
	}
	// S5: a mutation may land on MaxInt64; then nothing more mutates it.
	clock.Set(math.MaxInt64)
	if _, err := s.Create(ctx, task("m", "c", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	msg := &a2a.Message{ID: "m1", Role: a2a.MessageRoleUser}
	if _, err := s.AppendHistory(ctx, "m", msg); !errors.Is(err, engine.ErrInternal) {
		t.Fatalf("append at MaxInt64: %v, want ErrInternal", err)
	}
	g, err := s.Get(ctx, "m")
	if err != nil || g.Revision != 1 || len(g.Task.History) != 0 || g.Cursor.UpdatedAt != math.MaxInt64 {
		t.Fatalf("task at MaxInt64 changed: %+v %v", g, err)
	}
	clock.Set(-5)
	r, err = s.Create(ctx, task("neg", "c", a2a.TaskStateWorking))
	if err != nil || r.Cursor.UpdatedAt != 0 {
		t.Fatalf("negative clock: %+v %v", r.Cursor, err)
	}
}

func TestErrors(t *testing.T) {
	s := openMem(t, storetest.NewManualClock(5).Now)
	ctx := context.Background()
	if _, err := s.Create(ctx, task("x", "c", a2a.TaskStateCompleted)); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"exists":    second(s.Create(ctx, task("x", "c", a2a.TaskStateWorking))),
		"conflict":  second(s.Replace(ctx, task("x", "c", a2a.TaskStateWorking), 7)),
		"cancel":    second(s.Cancel(ctx, "x")),
		"missing":   second(s.Get(ctx, "nope")),
		"delete":    s.Delete(ctx, "nope"),
		"bad state": second(s.Create(ctx, task("y", "c", "BOGUS"))),
		"empty id":  second(s.Get(ctx, "")),
		"nil msg":   second(s.AppendHistory(ctx, "x", nil)),
	} {
		want := map[string]error{
			"exists": engine.ErrAlreadyExists, "conflict": engine.ErrRevisionConflict,
			"cancel": engine.ErrNotCancelable, "missing": engine.ErrNotFound, "delete": engine.ErrNotFound,
			"bad state": engine.ErrInvalidArgument, "empty id": engine.ErrInvalidArgument, "nil msg": engine.ErrInvalidArgument,
		}[name]
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	r, err := s.Get(ctx, "x")
	if err != nil || r.Revision != 1 || r.Cursor.UpdatedAt != 5 {
		t.Fatalf("rejected writes changed the task: %+v %v", r, err)
	}
}

func second[T any](_ T, err error) error { return err }

// model is the reference: the records the store returned.
type model map[a2a.TaskID]engine.Record

func (m model) list(q engine.ListRequest) []engine.Cursor {
	var out []engine.Cursor
	for _, r := range m {
		if q.ContextID != "" && r.Task.ContextID != q.ContextID {
			continue
		}
		if q.Status != "" && r.Task.Status.State != q.Status {
			continue
		}
		if q.StatusTimestampAfter != nil && (r.Task.Status.Timestamp == nil || r.Task.Status.Timestamp.Before(*q.StatusTimestampAfter)) {
			continue
		}
		out = append(out, r.Cursor)
	}
	slices.SortFunc(out, engine.Cursor.Compare)
	return out
}

// TestModel runs random operations against the store and a model, and
// compares full traversals, totals and Examined after each step.
func TestModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	clock := storetest.NewManualClock(1)
	s := openMem(t, clock.Now)
	ctx := context.Background()
	m := model{}
	ids := []string{"a", "b", "a\x00", "\x00", "\xff", "ab", "b\xff", "c", "d", "e", "f", "g"}
	ctxs := []string{"", "c1", "c1\x00", "c2"}
	for step := 0; step < 600; step++ {
		// The clock sometimes stalls or goes back, so equal times happen.
		clock.Advance(int64(rng.IntN(4)) - 1)
		id := a2a.TaskID(ids[rng.IntN(len(ids))])
		state := states[rng.IntN(len(states))]
		ts := time.UnixMicro(int64(rng.IntN(50))).UTC()
		tk := task(string(id), ctxs[rng.IntN(len(ctxs))], state)
		if rng.IntN(2) == 0 {
			tk.Status.Timestamp = &ts
		}
		if rng.IntN(3) == 0 {
			tk.Metadata = map[string]any{"k": float64(step)}
		}
		var r engine.Record
		var err error
		switch op := rng.IntN(5); op {
		case 0:
			r, err = s.Create(ctx, tk)
		case 1:
			r, err = s.Replace(ctx, tk, 0)
		case 2:
			r, err = s.Cancel(ctx, id)
		case 3:
			r, err = s.AppendHistory(ctx, id, &a2a.Message{ID: fmt.Sprint(rng.IntN(3)), Role: a2a.MessageRoleAgent})
		case 4:
			err = s.Delete(ctx, id)
			if err == nil {
				delete(m, id)
			}
		}
		_, exists := m[id]
		switch {
		case err == nil && r.Task != nil:
			if old, ok := m[id]; ok && r.Revision > old.Revision && r.Cursor.UpdatedAt <= old.Cursor.UpdatedAt {
				t.Fatalf("step %d: time did not advance: %d -> %d", step, old.Cursor.UpdatedAt, r.Cursor.UpdatedAt)
			}
			m[id] = r
		case err == nil:
		case errors.Is(err, engine.ErrNotFound) && !exists,
			errors.Is(err, engine.ErrAlreadyExists) && exists,
			errors.Is(err, engine.ErrNotCancelable) && exists && m[id].Task.Status.State.Terminal():
		default:
			t.Fatalf("step %d: unexpected error %v (exists %v)", step, err, exists)
		}
		if step%10 != 0 {
			continue
		}
		mustCheck(t, s)
		after := time.UnixMicro(int64(rng.IntN(50))).UTC()
		for _, req := range []engine.ListRequest{
			{},
			{ContextID: "c1"},
			{ContextID: "c1\x00", Status: a2a.TaskStateCanceled},
			{Status: a2a.TaskStateWorking},
			{StatusTimestampAfter: &after},
			{ContextID: "c2", StatusTimestampAfter: &after},
		} {
			want := m.list(req)
			for _, size := range []int{1, 3, 100} {
				for _, proj := range []engine.Projection{engine.ProjectionFull, engine.ProjectionLight} {
					req := req
					req.PageSize, req.Projection, req.IncludeTotalSize = size, proj, true
					resp, err := s.List(ctx, &req)
					if err != nil {
						t.Fatal(err)
					}
					if resp.TotalSize != len(want) {
						t.Fatalf("step %d %+v: total %d, want %d", step, req, resp.TotalSize, len(want))
					}
					got, _ := traverse(t, s, req)
					if !slices.Equal(got, want) {
						t.Fatalf("step %d %+v:\n got %v\nwant %v", step, req, got, want)
					}
					for i, tk := range resp.Tasks {
						mr := m[tk.ID]
						if tk.ContextID != mr.Task.ContextID || tk.Status.State != mr.Task.Status.State || resp.TaskCursors[i] != mr.Cursor {
							t.Fatalf("step %d: listed task %q differs from the model", step, tk.ID)
						}
						if proj == engine.ProjectionLight && (tk.History != nil || tk.Artifacts != nil) {
							t.Fatalf("light task carries history")
						}
						if proj == engine.ProjectionFull && len(tk.History) != len(mr.Task.History) {
							t.Fatalf("full task %q has %d messages, want %d", tk.ID, len(tk.History), len(mr.Task.History))
						}
					}
				}
			}
		}
	}
}

// TestExamined checks C2: an unfiltered or context-only page visits exactly
// PageSize+1 index entries.
func TestExamined(t *testing.T) {
	s := openMem(t, storetest.NewManualClock(1).Now)
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		if _, err := s.Create(ctx, task(fmt.Sprintf("t%03d", i), fmt.Sprintf("c%d", i%2), a2a.TaskStateWorking)); err != nil {
			t.Fatal(err)
		}
	}
	for _, req := range []engine.ListRequest{{PageSize: 10}, {PageSize: 10, ContextID: "c1"}, {PageSize: 50, Projection: engine.ProjectionLight}} {
		var pageToken string
		for page := 0; page < 3; page++ {
			req.PageToken = pageToken
			resp, err := s.List(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			if st := resp.Stats; st.Examined != req.PageSize+1 || len(resp.Tasks) != req.PageSize {
				t.Errorf("%+v: examined %d for %d tasks, want %d", req, st.Examined, len(resp.Tasks), req.PageSize+1)
			}
			pageToken = resp.NextPageToken
		}
	}
	resp, err := s.List(ctx, &engine.ListRequest{ContextID: "c0", Status: a2a.TaskStateWorking, IncludeTotalSize: true})
	if err != nil || resp.TotalSize != 150 || resp.Stats.Counted != 0 || !resp.Stats.TotalComputed {
		t.Errorf("counter total: %d counted %d %v", resp.TotalSize, resp.Stats.Counted, err)
	}
}

// TestReopen checks that a closed and reopened store lists the same pages
// with the same tokens, on disk.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	clock := storetest.NewManualClock(1)
	s, err := Open(dir, Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 120; i++ {
		clock.Advance(int64(i % 3))
		if _, err := s.Create(ctx, task(fmt.Sprintf("t%d", i), fmt.Sprintf("c%d", i%3), states[i%len(states)])); err != nil {
			t.Fatal(err)
		}
	}
	reqs := []engine.ListRequest{{PageSize: 7}, {PageSize: 5, ContextID: "c1"}, {PageSize: 4, Status: a2a.TaskStateWorking}}
	var before [][]engine.Cursor
	var beforeToks [][]string
	for _, r := range reqs {
		c, tk := traverse(t, s, r)
		before, beforeToks = append(before, c), append(beforeToks, tk)
	}
	if m := s.Metrics(); m.DiskSpaceUsage() == 0 {
		t.Error("metrics of an open store report no disk usage")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if m := s.Metrics(); m == nil || m.DiskSpaceUsage() != 0 {
		t.Errorf("metrics after close: %v", m)
	}
	if _, err := s.Get(context.Background(), "t1"); !errors.Is(err, engine.ErrInternal) {
		t.Errorf("get after close: %v, want ErrInternal", err)
	}
	s = openStore(t, nil, dir, clock.Now)
	for i, r := range reqs {
		c, tk := traverse(t, s, r)
		if !slices.Equal(c, before[i]) || !slices.Equal(tk, beforeToks[i]) {
			t.Errorf("%+v: pages differ after reopen", r)
		}
	}
}

// TestCheckInvariantsFindsDamage: each kind of damage to the keyspace is
// reported (and an intact store passes).
func TestCheckInvariantsFindsDamage(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		damage func(s *Store, cur engine.Cursor) error
		want   string
	}{
		{"body deleted", func(s *Store, cur engine.Cursor) error { return s.db.Delete(bodyKey(cur), nil) }, "0 body keys"},
		{"global index deleted", func(s *Store, cur engine.Cursor) error { return s.db.Delete(globalKey(cur), nil) }, "0 global"},
		{"context index deleted", func(s *Store, cur engine.Cursor) error { return s.db.Delete(contextKey("c", cur), nil) }, "0 context"},
		{"stray body", func(s *Store, cur engine.Cursor) error {
			return s.db.Set(bodyKey(engine.Cursor{UpdatedAt: cur.UpdatedAt + 1, ID: cur.ID}), []byte{1}, nil)
		}, "does not match a record"},
		{"global value changed", func(s *Store, cur engine.Cursor) error { return s.db.Set(globalKey(cur), []byte{1, 0, 0}, nil) }, "global value"},
		{"counter off", func(s *Store, cur engine.Cursor) error {
			return s.db.Merge([]byte{tagCounter, counterTotal}, counterDelta(1), nil)
		}, "recount"},
		{"unknown key", func(s *Store, cur engine.Cursor) error { return s.db.Set([]byte("yy"), nil, nil) }, "unknown key"},
		{"zero counter", func(s *Store, cur engine.Cursor) error {
			return s.db.Merge(counterKeyOf(counterContext, []byte("nobody")), counterDelta(0), nil)
		}, "zero-valued key"},
		{"pending marker", func(s *Store, cur engine.Cursor) error { return s.db.Set([]byte{tagMarker, 1}, nil, nil) }, "marker"},
		{"owner index deleted", func(s *Store, cur engine.Cursor) error { return s.db.Delete(ownerKey("alice", cur), nil) }, "0 owner keys"},
		{"owner-context index deleted", func(s *Store, cur engine.Cursor) error {
			return s.db.Delete(ownerContextKey("alice", "c", cur), nil)
		}, "0 owner-context keys"},
		{"stray owner key", func(s *Store, cur engine.Cursor) error { return s.db.Set(ownerKey("bob", cur), []byte{1}, nil) }, "does not match a record"},
		{"owner value changed", func(s *Store, cur engine.Cursor) error {
			l := light{contextID: "c", owner: "bob", state: a2a.TaskStateWorking}
			return s.db.Set(ownerKey("alice", cur), l.append(nil), nil)
		}, "owner value"},
		{"owner counter off", func(s *Store, cur engine.Cursor) error {
			exist, _ := ownerCounterKeys("alice", "c", a2a.TaskStateWorking)
			return s.db.Merge(exist, counterDelta(-1), nil)
		}, "recount"},
		{"format key deleted", func(s *Store, cur engine.Cursor) error { return s.db.Delete(formatKey, nil) }, "no format key"},
		{"format key changed", func(s *Store, cur engine.Cursor) error { return s.db.Set(formatKey, []byte{1}, nil) }, "format 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open("db", Options{FS: vfs.NewMem(), Clock: storetest.NewManualClock(1).Now, Logger: pebblelog.Quiet{}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			rec, err := s.CreateOwned(ctx, task("t1", "c", a2a.TaskStateWorking), "alice")
			if err != nil {
				t.Fatal(err)
			}
			mustCheck(t, s)
			if err := c.damage(s, rec.Cursor); err != nil {
				t.Fatal(err)
			}
			if err := s.CheckInvariants(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("CheckInvariants = %v, want a report containing %q", err, c.want)
			}
		})
	}
}
