package storetest

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// The suite proves itself against its own reference model: every clause
// passes on the model, and deliberately broken stores make the relevant
// checks fail.

func openModel(binary bool) func(testing.TB, engine.Clock) engine.Store {
	return func(_ testing.TB, clock engine.Clock) engine.Store { return newModel(clock, binary) }
}

func TestModel(t *testing.T) {
	Run(t, Harness{Open: openModel(true), ClockInjection: true, BinaryIDs: true})
}

func TestModelTextIDs(t *testing.T) {
	Run(t, Harness{Open: openModel(false), ClockInjection: true, BinaryIDs: false})
}

func TestModelOwnClock(t *testing.T) {
	Run(t, Harness{Open: openModel(true), BinaryIDs: true})
}

// TestStateLists: the suite's terminal states are S3's, and with the
// active ones they are every state.
func TestStateLists(t *testing.T) {
	want := []a2a.TaskState{a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected}
	if !slices.Equal(slices.Sorted(slices.Values(terminalStates)), slices.Sorted(slices.Values(want))) {
		t.Errorf("terminal states %v, want S3's %v", terminalStates, want)
	}
	if len(activeStates)+len(terminalStates) != len(allStates) || len(activeStates) == 0 {
		t.Errorf("%d active + %d terminal states of %d", len(activeStates), len(terminalStates), len(allStates))
	}
}

// TestSpecTokensAgreeWithEngine: the suite's own reading of v1 tokens and
// the engine's codec agree on valid cursors, NUL bytes, MaxInt64 and the
// longest ID included.
func TestSpecTokensAgreeWithEngine(t *testing.T) {
	for _, c := range []engine.Cursor{
		{UpdatedAt: 0, ID: "a"}, {UpdatedAt: 1, ID: "\x00"}, {UpdatedAt: math.MaxInt64, ID: "\xff\x00"},
		{UpdatedAt: 1735689600_000000, ID: "task-001"}, {UpdatedAt: 7, ID: a2a.TaskID(strings.Repeat("x", specMaxIDBytes))},
	} {
		tok := specToken(c)
		if want := engine.EncodeToken(c); tok != want {
			t.Errorf("specToken(%s) = %q, engine says %q", fmtCursor(c), tok, want)
		}
		if got, ok := specBoundary(tok); !ok || got != c {
			t.Errorf("specBoundary(%q) = %s, %v", tok, fmtCursor(got), ok)
		}
	}
	if _, ok := specBoundary(specToken(engine.Cursor{UpdatedAt: 1, ID: a2a.TaskID(strings.Repeat("x", specMaxIDBytes+1))})); ok {
		t.Error("a token with an ID over the limit reads as valid")
	}
}

func TestInvalidTokensAreInvalid(t *testing.T) {
	for _, tok := range invalidTokens() {
		if _, err := engine.DecodeToken(tok); err == nil {
			t.Errorf("test token %q decodes", tok)
		}
		if _, ok := specBoundary(tok); ok {
			t.Errorf("test token %q decodes by the suite's reading", tok)
		}
	}
}

func TestManualClock(t *testing.T) {
	c := NewManualClock(10)
	if c.Now() != 10 {
		t.Fatalf("Now = %d, want 10", c.Now())
	}
	if got := c.Advance(-15); got != -5 || c.Now() != -5 {
		t.Fatalf("Advance(-15) = %d, Now = %d; want -5", got, c.Now())
	}
	c.Set(99)
	var clk engine.Clock = c.Now
	if clk() != 99 {
		t.Fatalf("after Set(99): %d", clk())
	}
}

// fakeTB records failures instead of failing the real test. Fatal ends the
// calling goroutine, as testing does.
type fakeTB struct {
	testing.TB // nil: methods the suite should not call panic
	mu         sync.Mutex
	msgs       []string
	skipped    string // the skip message, if the test skipped
	cleanups   []func()
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Name() string {
	return "fake"
}
func (f *fakeTB) Logf(string, ...any) {}
func (f *fakeTB) Log(...any)          {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Error(args ...any) { f.Errorf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) FailNow()          { f.Fatalf("FailNow") }
func (f *fakeTB) Fail()             { f.Errorf("Fail") }
func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.msgs) > 0
}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Skip(args ...any)  { f.Skipf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) SkipNow() { f.Skipf("SkipNow") }
func (f *fakeTB) Skipped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.skipped != ""
}
func (f *fakeTB) Context() context.Context {
	return context.Background()
}

// runClause runs the named clause of the suite on a fresh store from h with
// a fake TB and returns what it reported.
func runClause(t *testing.T, h Harness, name string) []string {
	t.Helper()
	return runClauseTB(t, h, name).msgs
}

// runClauseTB is runClause returning the fake TB.
func runClauseTB(t *testing.T, h Harness, name string) *fakeTB {
	t.Helper()
	var c *clause
	for i := range clauses {
		if clauses[i].name == name {
			c = &clauses[i]
		}
	}
	if c == nil {
		t.Fatalf("no clause %q", name)
	}
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for i := len(f.cleanups) - 1; i >= 0; i-- {
				f.cleanups[i]()
			}
		}()
		c.run(f, h)
	}()
	<-done
	return f
}

// wrap returns a harness whose stores are the model wrapped by w.
func wrap(binary bool, w func(*model) engine.Store) Harness {
	return Harness{
		Open:           func(_ testing.TB, clock engine.Clock) engine.Store { return w(newModel(clock, binary)) },
		ClockInjection: true,
		BinaryIDs:      binary,
	}
}

// repeatBoundary lists the boundary task again: the last task of a page
// repeats on the next page.
type repeatBoundary struct{ *model }

func (s repeatBoundary) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	if c, err := engine.DecodeToken(req.PageToken); err == nil && len(c.ID) < engine.MaxIDBytes {
		r := *req
		c.ID += "\x00" // just before the boundary in list order
		r.PageToken = engine.EncodeToken(c)
		resp, err := s.model.List(ctx, &r)
		return resp, err
	}
	return s.model.List(ctx, req)
}

// ignoreBoundary ignores the page token.
type ignoreBoundary struct{ *model }

func (s ignoreBoundary) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	r := *req
	if _, err := engine.DecodeToken(r.PageToken); err == nil {
		r.PageToken = ""
	}
	return s.model.List(ctx, &r)
}

// filterAfterBoundary applies the filters after taking a page: pages come
// back short.
type filterAfterBoundary struct{ *model }

func (s filterAfterBoundary) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	r := *req
	r.ContextID, r.Status, r.StatusTimestampAfter = "", "", nil
	resp, err := s.model.List(ctx, &r)
	if err != nil || req.ContextID == "" {
		return resp, err
	}
	out := &engine.ListResponse{NextPageToken: resp.NextPageToken, PageSize: resp.PageSize, TotalSize: resp.TotalSize, Tasks: []*a2a.Task{}, TaskCursors: []engine.Cursor{}}
	for i, t := range resp.Tasks {
		if t.ContextID == req.ContextID {
			out.Tasks, out.TaskCursors = append(out.Tasks, t), append(out.TaskCursors, resp.TaskCursors[i])
		}
	}
	return out, nil
}

// sharedGet returns the same task pointer from Get while the task is
// unchanged: callers mutating it change what later calls see.
type sharedGet struct {
	*model
	mu    sync.Mutex
	cache map[a2a.TaskID]engine.Record
}

func (s *sharedGet) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	r, err := s.model.Get(ctx, id)
	if err != nil {
		return r, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cache[id]; ok && c.Revision == r.Revision && c.Cursor == r.Cursor {
		return c, nil
	}
	s.cache[id] = r
	return r, nil
}

// clockOnly ignores S4's old+1: a backward clock moves tasks back in time.
type clockOnly struct {
	*model
	clock engine.Clock
}

func (s clockOnly) Replace(ctx context.Context, t *a2a.Task, rev int64) (engine.Record, error) {
	r, err := s.model.Replace(ctx, t, rev)
	if err != nil {
		return r, err
	}
	// Move the entry to clock() even when that is backward.
	s.model.mu.Lock()
	defer s.model.mu.Unlock()
	e := s.model.mu.byID[t.ID]
	s.model.removeLocked(e)
	e.cur.UpdatedAt = max(s.clock(), 0)
	s.model.insertLocked(e)
	return e.record(), nil
}

// noDedup appends a message even when its ID is already in the history.
type noDedup struct{ *model }

func (s noDedup) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	if msg == nil || msg.ID == "" {
		return s.model.AppendHistory(ctx, id, msg)
	}
	m := *msg
	m.ID += "\x00dup"
	r, err := s.model.AppendHistory(ctx, id, &m)
	if err == nil {
		r.Task.History[len(r.Task.History)-1].ID = msg.ID
	}
	return r, err
}

// totalAfterBoundary counts only the matches after the boundary.
type totalAfterBoundary struct{ *model }

func (s totalAfterBoundary) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := s.model.List(ctx, req)
	if err != nil || !req.IncludeTotalSize || req.PageToken == "" {
		return resp, err
	}
	r := *req
	r.PageSize = engine.MaxPageSize
	n := 0
	for {
		page, err := s.model.List(ctx, &r)
		if err != nil {
			return nil, err
		}
		n += len(page.Tasks)
		if page.NextPageToken == "" {
			break
		}
		r.PageToken = page.NextPageToken
	}
	resp.TotalSize = n
	return resp, nil
}

// tokenOnLastPage returns a next token on every non-empty page.
type tokenOnLastPage struct{ *model }

func (s tokenOnLastPage) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := s.model.List(ctx, req)
	if err == nil && len(resp.TaskCursors) > 0 {
		resp.NextPageToken = engine.EncodeToken(resp.TaskCursors[len(resp.TaskCursors)-1])
	}
	return resp, err
}

// negativeIsConflict reads a negative expected revision as one that does
// not match: a conflict for a stored task, not found for a missing one.
type negativeIsConflict struct{ *model }

func (s negativeIsConflict) Replace(ctx context.Context, t *a2a.Task, rev int64) (engine.Record, error) {
	if rev >= 0 || t == nil {
		return s.model.Replace(ctx, t, rev)
	}
	if _, err := s.model.Get(ctx, t.ID); err != nil {
		return engine.Record{}, err
	}
	return engine.Record{}, engine.ErrRevisionConflict
}

// int32History fails a HistoryLength beyond 32 bits, as an int4 array
// subscript would.
type int32History struct{ *model }

func (s int32History) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	if req.HistoryLength != nil && *req.HistoryLength > math.MaxInt32+1 {
		return nil, engine.ErrInternal
	}
	return s.model.List(ctx, req)
}

// textOnly is a text-ID backend that forgot to reject binary IDs.
type textOnly struct{ *model }

// ownerTotalIgnored counts the matches of every owner in an owner-filtered
// total (O4).
type ownerTotalIgnored struct{ *model }

func (s ownerTotalIgnored) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := s.model.List(ctx, req)
	if err != nil || req.Owner == "" || !req.IncludeTotalSize {
		return resp, err
	}
	r := *req
	r.Owner = ""
	all, err := s.model.List(ctx, &r)
	if err != nil {
		return nil, err
	}
	resp.TotalSize = all.TotalSize
	return resp, nil
}

// ownerInMetadata writes the owner into the task's metadata as well (O1).
type ownerInMetadata struct{ *model }

func (s ownerInMetadata) CreateOwned(ctx context.Context, t *a2a.Task, owner string) (engine.Record, error) {
	if t != nil && owner != "" {
		t = clone(t)
		if t.Metadata == nil {
			t.Metadata = map[string]any{}
		}
		t.Metadata["a2astore.owner"] = owner
	}
	return s.model.CreateOwned(ctx, t, owner)
}

// replaceDropsOwner loses the owner on Replace (O2).
type replaceDropsOwner struct{ *model }

func (s replaceDropsOwner) Replace(ctx context.Context, t *a2a.Task, rev int64) (engine.Record, error) {
	r, err := s.model.Replace(ctx, t, rev)
	if err != nil {
		return r, err
	}
	s.model.mu.Lock()
	defer s.model.mu.Unlock()
	s.model.mu.byID[t.ID].owner = ""
	r.Owner = ""
	return r, nil
}

// tokenDropsOwner forgets the owner filter once a page token is given: the
// scope of a traversal taken from its first page (T7).
type tokenDropsOwner struct{ *model }

func (s tokenDropsOwner) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	if req.PageToken == "" || req.Owner == "" {
		return s.model.List(ctx, req)
	}
	r := *req
	r.Owner = ""
	return s.model.List(ctx, &r)
}

// noTaskOwners fills no TaskOwners (O5).
type noTaskOwners struct{ *model }

func (s noTaskOwners) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := s.model.List(ctx, req)
	if err == nil {
		resp.TaskOwners = nil
	}
	return resp, err
}

func TestSuiteCatchesBugs(t *testing.T) {
	cases := []struct {
		name    string
		h       Harness
		clauses []string
	}{
		{"repeat-boundary", wrap(true, func(m *model) engine.Store { return repeatBoundary{m} }),
			[]string{"T1/traversal", "T5/missing-boundary", "T7/changed-filter", "L7/live-traversal", "model/random"}},
		{"ignore-boundary", wrap(true, func(m *model) engine.Store { return ignoreBoundary{m} }),
			[]string{"T1/traversal", "T6/next-token", "T7/changed-filter", "S6/equal-times", "model/random", "L7-L8/concurrent"}},
		{"filter-after-boundary", wrap(true, func(m *model) engine.Store { return filterAfterBoundary{m} }),
			[]string{"L1-L2/filters", "T7/changed-filter", "model/random"}},
		{"shared-get", wrap(true, func(m *model) engine.Store { return &sharedGet{model: m, cache: map[a2a.TaskID]engine.Record{}} }),
			[]string{"L9/copies"}},
		{"clock-only", Harness{
			Open: func(_ testing.TB, clock engine.Clock) engine.Store {
				return clockOnly{model: newModel(clock, true), clock: clock}
			},
			ClockInjection: true, BinaryIDs: true,
		}, []string{"S4/clock-backward", "model/random"}},
		{"no-dedup", wrap(true, func(m *model) engine.Store { return noDedup{m} }),
			[]string{"S3/rejected-writes", "model/random"}},
		{"text-backend-accepting-binary", Harness{
			Open:           func(_ testing.TB, clock engine.Clock) engine.Store { return textOnly{newModel(clock, true)} },
			ClockInjection: true, BinaryIDs: false,
		}, []string{"S8-T3/binary-ids"}},
		{"total-after-boundary", wrap(true, func(m *model) engine.Store { return totalAfterBoundary{m} }),
			[]string{"L5/total-size", "T6/next-token", "model/random"}},
		{"negative-revision-conflict", wrap(true, func(m *model) engine.Store { return negativeIsConflict{m} }),
			[]string{"S3/rejected-writes"}},
		{"int32-history-length", wrap(true, func(m *model) engine.Store { return int32History{m} }),
			[]string{"L4/history-length-huge"}},
		{"token-on-last-page", wrap(true, func(m *model) engine.Store { return tokenOnLastPage{m} }),
			[]string{"T6/next-token", "T1/traversal", "model/random"}},
		{"owner-total-ignored", wrap(true, func(m *model) engine.Store { return ownerTotalIgnored{m} }),
			[]string{"O4/totals", "O3-O4/combined-filters", "model/random"}},
		{"owner-in-metadata", wrap(true, func(m *model) engine.Store { return ownerInMetadata{m} }),
			[]string{"O1/owner-outside-metadata", "model/random"}},
		{"replace-drops-owner", wrap(true, func(m *model) engine.Store { return replaceDropsOwner{m} }),
			[]string{"O1-O2/owner-recorded", "O2/replace-keeps-owner", "model/random", "L7-L8/concurrent"}},
		{"token-drops-owner", wrap(true, func(m *model) engine.Store { return tokenDropsOwner{m} }),
			[]string{"O3/isolation", "O3-T7/owner-tokens", "model/random"}},
		{"no-task-owners", wrap(true, func(m *model) engine.Store { return noTaskOwners{m} }),
			[]string{"O5/task-owners", "O1-O3/empty-owner", "model/random"}},
		{"ignore-revision", wrap(true, func(m *model) engine.Store { return ignoreRevision{m} }),
			[]string{"If/mismatch", "If-S3/append-dedup", "If-S3/cancel-terminal", "If-S5/max-time", "If/race", "model/random"}},
		{"condition-last", wrap(true, func(m *model) engine.Store { return conditionLast{m} }),
			[]string{"If-S3/append-dedup", "If-S3/cancel-terminal"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, name := range c.clauses {
				msgs := runClause(t, c.h, name)
				if len(msgs) == 0 {
					t.Errorf("clause %s passed on a broken store", name)
					continue
				}
				t.Logf("%s reports: %s", name, firstLine(msgs[0]))
			}
		})
	}
}

// TestSuitePassesOnModel is the control for TestSuiteCatchesBugs: the same
// clauses, run the same way on the plain model, report nothing.
func TestSuitePassesOnModel(t *testing.T) {
	h := wrap(true, func(m *model) engine.Store { return m })
	for _, c := range clauses {
		if msgs := runClause(t, h, c.name); len(msgs) > 0 {
			t.Errorf("clause %s failed on the model: %s", c.name, strings.Join(msgs, "; "))
		}
	}
}

// storeOnly is the model seen as a store that records no owners: a store
// written against engine.Store before tenancy. CreateOwned is not in its
// method set and its pages carry no owners.
type storeOnly struct{ engine.Store }

func (s storeOnly) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	resp, err := s.Store.List(ctx, req)
	if err == nil {
		resp.TaskOwners = nil
	}
	return resp, err
}

func TestModelWithoutOwners(t *testing.T) {
	Run(t, wrap(true, func(m *model) engine.Store { return storeOnly{m} }))
}

// TestOwnerClausesNeedAnOwnerStore: the owner clauses skip, saying why, on
// a store that is not an engine.OwnerStore, and run on one that is.
func TestOwnerClausesNeedAnOwnerStore(t *testing.T) {
	plain := wrap(true, func(m *model) engine.Store { return storeOnly{m} })
	owned := wrap(true, func(m *model) engine.Store { return m })
	n := 0
	for _, c := range clauses {
		if !c.owners {
			continue
		}
		n++
		f := runClauseTB(t, plain, c.name)
		if !f.Skipped() || len(f.msgs) > 0 || !strings.Contains(f.skipped, "not an engine.OwnerStore") {
			t.Errorf("%s on a plain store: skipped %q, reports %q; want a skip naming the missing OwnerStore", c.name, f.skipped, f.msgs)
		}
		if f := runClauseTB(t, owned, c.name); f.Skipped() || len(f.msgs) > 0 {
			t.Errorf("%s on the model: skipped %q, reports %q", c.name, f.skipped, f.msgs)
		}
	}
	if n < 8 {
		t.Errorf("only %d owner clauses", n)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// TestRandomReportsSeed checks a randomized failure names its seed.
func TestRandomReportsSeed(t *testing.T) {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		testRandom(f, newEnv(f, wrap(true, func(m *model) engine.Store { return repeatBoundary{m} })))
	}()
	<-done
	if len(f.msgs) == 0 || !strings.Contains(f.msgs[0], "-storetest.seed=") {
		t.Fatalf("randomized failure does not name its seed: %q", f.msgs)
	}
}

// recorder logs the calls a store receives.
type recorder struct {
	*model
	log *[]string
}

func (s recorder) Create(ctx context.Context, t *a2a.Task) (engine.Record, error) {
	*s.log = append(*s.log, "create "+canon(t))
	return s.model.Create(ctx, t)
}

func (s recorder) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	*s.log = append(*s.log, "list "+fmtReq(*req))
	return s.model.List(ctx, req)
}

// TestRandomSeedReproduces checks a seed replays the same run.
func TestRandomSeedReproduces(t *testing.T) {
	run := func(seed uint64) []string {
		var log []string
		h := wrap(true, func(m *model) engine.Store { return recorder{m, &log} })
		f := &fakeTB{}
		if err := runRandom(newEnv(f, h), seed, 300); err != nil {
			t.Fatal(err)
		}
		return log
	}
	a, b, c := run(42), run(42), run(43)
	if len(a) == 0 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("seed 42 ran differently twice (%d and %d calls)", len(a), len(b))
	}
	if strings.Join(a, "\n") == strings.Join(c, "\n") {
		t.Fatal("seeds 42 and 43 ran the same operations")
	}
}
