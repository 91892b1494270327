package storetest

import (
	"context"
	"flag"
	"sync/atomic"
	"testing"

	"github.com/a2astore/a2astore/engine"
)

// Harness describes a backend to the conformance suite.
type Harness struct {
	// Open returns a new, empty store. When ClockInjection is true the store
	// must read time only from clock; otherwise clock is nil and the store
	// uses its own (for example the database's).
	Open func(t testing.TB, clock engine.Clock) engine.Store
	// ClockInjection reports whether the backend takes a custom clock; the
	// clauses that drive time (S4, S5) run only when it does.
	ClockInjection bool
	// BinaryIDs reports whether task and context IDs may hold any bytes (NUL
	// and invalid UTF-8 included). When false the suite checks such IDs are
	// rejected with ErrInvalidArgument (S8).
	BinaryIDs bool
	// OpenLogged, when set, opens a new, empty store as Open does but with
	// its task log on: an engine.LogStore. The K7 clauses run on it (and
	// are skipped without it).
	OpenLogged func(t testing.TB, clock engine.Clock) engine.Store
	// ListStats reports whether the store fills ListResponse.Stats with
	// what each page read (Examined: the index entries or rows visited).
	// The cost clause "C7/cost" runs only when it does: every page,
	// filtered by status alone or with an owner, reads at most
	// PageSize+1 entries, exactly that when more follow; with a context,
	// at most the tasks of that context.
	ListStats bool
}

// Checker is engine.Checker: a store that implements it has its invariants
// checked at the cleanup of every test Run runs.
type Checker = engine.Checker

var (
	flagSeed = flag.Uint64("storetest.seed", 0, "seed of the storetest randomized tests (0 = random)")
	flagOps  = flag.Int("storetest.ops", 600, "operations per storetest model-based randomized test")
)

// ManualClock is an engine.Clock the test drives: it returns the time last
// set and moves only when told to. It is safe for concurrent use. Pass its
// Now method as the store's clock.
type ManualClock struct {
	now atomic.Int64
}

// NewManualClock returns a clock reading start (µs since the Unix epoch).
func NewManualClock(start int64) *ManualClock {
	c := new(ManualClock)
	c.now.Store(start)
	return c
}

// Now returns the current reading; c.Now is an engine.Clock.
func (c *ManualClock) Now() int64 { return c.now.Load() }

// Set moves the clock to t, forward or backward (negative readings are
// allowed: stores count them as 0, S5).
func (c *ManualClock) Set(t int64) { c.now.Store(t) }

// Advance moves the clock by d microseconds (d may be negative) and returns
// the new reading.
func (c *ManualClock) Advance(d int64) int64 { return c.now.Add(d) }

// Run runs every S, T and L clause against the harness's backend, and the O
// clauses when the store is an engine.OwnerStore. Each clause (or small
// group of clauses) is a subtest named by its clause id and opens a fresh
// store; clauses that drive the clock are skipped when the harness has no
// ClockInjection, owner clauses when the store does not record owners and
// retention clauses (R1, R2) when it is no engine.Retainer (the skip
// message says so). Run also runs a model-based randomized test
// ("model/random", seeded by -storetest.seed, length -storetest.ops) and a
// concurrent test ("L7-L8/concurrent"), both with owners on an OwnerStore.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	for _, c := range clauses {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

// A clause is one subtest of Run.
type clause struct {
	name   string
	clock  bool // needs Harness.ClockInjection
	owners bool // needs an engine.OwnerStore
	cond   bool // needs an engine.ConditionalStore
	log    bool // runs on Harness.OpenLogged's store
	stats  bool // needs Harness.ListStats
	fn     func(t testing.TB, e *env)
}

// run runs the clause on a fresh store from h, or skips it (saying why)
// when the store lacks what it needs.
func (c *clause) run(t testing.TB, h Harness) {
	if c.clock && !h.ClockInjection {
		t.Skip("backend takes no custom clock")
	}
	if c.stats && !h.ListStats {
		t.Skip("Harness.ListStats is false: the store reports no ListStats, cost clause skipped")
	}
	if c.log {
		if h.OpenLogged == nil {
			t.Skip("Harness.OpenLogged is nil: log clause skipped")
		}
		h.Open = h.OpenLogged
	}
	e := newEnv(t, h)
	if c.log && e.l == nil {
		t.Fatalf("%T from Harness.OpenLogged is not an engine.LogStore", e.s)
	}
	if c.owners && e.o == nil {
		t.Skipf("%T is not an engine.OwnerStore: owner clause skipped", e.s)
	}
	if c.cond && e.c == nil {
		t.Skipf("%T is not an engine.ConditionalStore: conditional-write clause skipped", e.s)
	}
	c.fn(t, e)
}

// clauses lists Run's subtests in SPEC order, then the owner clauses (O1–O6,
// written on engine.OwnerStore), which run only on an OwnerStore. The tests
// live in files by topic: clauses_time.go (S1, S2, S4–S6),
// clauses_writes.go (S3, S7–S9), clauses_tokens.go (T), clauses_listing.go
// (L), clauses_filtered.go (C7: status-filtered pages), clauses_limits.go (engine.Limits), clauses_owners.go (O),
// clauses_conditional.go (If: engine.ConditionalStore, run only on one),
// clauses_retain.go (R, on an engine.Retainer), clauses_bulk.go (X1: a
// store filled by engine/bulkload), random.go and concurrent.go.
var clauses = []clause{
	{name: "S1-S2/time-advances", fn: testTimeAdvances},
	{name: "S3/rejected-writes", fn: testRejectedWrites},
	{name: "S3/rejected-cancel", fn: testRejectedCancel},
	{name: "S4/clock-backward", clock: true, fn: testClockBackward},
	{name: "S5/negative-clock", clock: true, fn: testNegativeClock},
	{name: "S5/max-time", clock: true, fn: testMaxTime},
	{name: "S6/equal-times", clock: true, fn: testEqualTimes},
	{name: "S6/order", fn: testOrder},
	{name: "S7/revisions", fn: testRevisions},
	{name: "S7/not-found-exists", fn: testNotFoundExists},
	{name: "S7/replace-terminal-and-context", fn: testReplaceTerminalContext},
	{name: "S8/id-limits", fn: testIDLimits},
	{name: "S8-T3/binary-ids", fn: testBinaryIDs},
	{name: "S8/invalid-input", fn: testInvalidInput},
	{name: "S9/cancel", fn: testCancel},
	{name: "S9/delete", fn: testDelete},

	{name: "T1/traversal", fn: testTraversal},
	{name: "T2/url-safe", fn: testURLSafe},
	{name: "T4/invalid-tokens", fn: testInvalidTokens},
	{name: "T5/missing-boundary", fn: testMissingBoundary},
	{name: "T6/next-token", fn: testNextToken},
	{name: "T7/changed-filter", fn: testChangedFilter},

	{name: "L1-L2/filters", fn: testFilters},
	{name: "L3/validation", fn: testValidation},
	{name: "L4/history-artifacts", fn: testShape},
	{name: "L4/history-length-huge", fn: testHugeHistoryLength},
	{name: "L4/projection-light", fn: testLight},
	{name: "L4/empty-metadata", fn: testEmptyMetadata},
	{name: "L5/total-size", fn: testTotalSize},
	{name: "L6/cursors", fn: testCursors},
	{name: "L7/live-traversal", fn: testLiveTraversal},
	{name: "L7/equal-time-insert", clock: true, fn: testEqualTimeInsert},
	{name: "L9/copies", fn: testCopies},
	{name: "L9/without-task", fn: testWithoutTask},

	{name: "C7/status-pages", fn: testFilteredPages},
	{name: "C7-L7/status-traversal", fn: testFilteredTraversal},
	{name: "C7-T7/status-tokens", fn: testFilteredTokens},
	{name: "C7/cost", stats: true, fn: testFilteredCost},

	{name: "limits/depth", fn: testDepthLimit},
	{name: "limits/size", fn: testSizeLimit},

	{name: "O1-O2/owner-recorded", owners: true, fn: testOwnerRecorded},
	{name: "O1/owner-outside-metadata", owners: true, fn: testOwnerOutsideMetadata},
	{name: "O1/owner-limits", owners: true, fn: testOwnerLimits},
	{name: "O1-O3/empty-owner", owners: true, fn: testEmptyOwner},
	{name: "O2/replace-keeps-owner", owners: true, fn: testReplaceKeepsOwner},
	{name: "O3/isolation", owners: true, fn: testOwnerIsolation},
	{name: "O3-O4/combined-filters", owners: true, fn: testOwnerFilters},
	{name: "O4/totals", owners: true, fn: testOwnerTotals},
	{name: "O3-T7/owner-tokens", owners: true, fn: testOwnerTokens},
	{name: "O5/task-owners", owners: true, fn: testTaskOwners},

	{name: "If/match", cond: true, fn: testIfMatch},
	{name: "If/mismatch", cond: true, fn: testIfMismatch},
	{name: "If/missing", cond: true, fn: testIfMissing},
	{name: "If/invalid", cond: true, fn: testIfInvalid},
	{name: "If-S3/append-dedup", cond: true, fn: testIfAppendDedup},
	{name: "If-S3/cancel-terminal", cond: true, fn: testIfCancelTerminal},
	{name: "If-S5/max-time", cond: true, clock: true, fn: testIfMaxTime},
	{name: "If/race", cond: true, fn: testIfRace},
	{name: "R1-R2/terminal-only", fn: testRetainTerminalOnly},
	{name: "R1/age-boundary-and-stuck", fn: testRetainAgeBoundary},
	{name: "R1/oldest-first-batches", fn: testRetainOldestFirst},
	{name: "R1/bad-input", fn: testRetainBadInput},
	{name: "R2/during-traversal", fn: testRetainDuringTraversal},
	{name: "R2/concurrent-writers", fn: testRetainConcurrentWriters},

	{name: "X1/bulk-load", fn: testBulkLoad},
	{name: "X1-K7/bulk-load-log", log: true, fn: testBulkLoad},
	{name: "X1-K7/trim-imported-older", log: true, fn: testLogTrimImportedOlder},

	{name: "model/random", fn: testRandom},
	{name: "L7-L8/concurrent", fn: testConcurrent},

	{name: "K7/entries", log: true, fn: testLogEntries},
	{name: "K7/events", log: true, fn: testLogEvents},
	{name: "K7/no-entry-for-no-revision", log: true, fn: testLogRejected},
	{name: "K7/delete", log: true, fn: testLogDelete},
	{name: "K7/read", log: true, fn: testLogRead},
	{name: "K7/watch", log: true, fn: testLogWatch},
	{name: "K7/trim", log: true, fn: testLogTrim},
	{name: "K7/random", log: true, fn: testLogRandom},
	{name: "K7/concurrent", log: true, fn: testLogConcurrent},
	{name: "K7/tail-trimmed-whole", log: true, fn: testLogTailTrimmedAll},
	{name: "K7/tail-incarnation", log: true, fn: testLogTailIncarnation},
	{name: "K7/tail-message-moves-state", log: true, fn: testLogTailMessageMoves},
	{name: "K7/tail-deleted-before-first-read", log: true, fn: testLogTailDeletedUnseen},
	{name: "H2/log-trace", log: true, fn: testLogTrace},
}

// env is one clause's fresh store and, with ClockInjection, its clock.
type env struct {
	h     Harness
	s     engine.Store
	o     engine.OwnerStore       // s, when it records owners; else nil
	c     engine.ConditionalStore // s, when it has conditional writes; else nil
	l     engine.LogStore         // s, when it keeps a task log; else nil
	clock *ManualClock            // nil without ClockInjection
	ctx   context.Context
}

// clockStart is where injected clocks start: 2025-01-01T00:00:00Z in µs.
const clockStart = 1735689600_000000

func newEnv(t testing.TB, h Harness) *env {
	t.Helper()
	e := &env{h: h, ctx: context.Background()}
	var clk engine.Clock
	if h.ClockInjection {
		e.clock = NewManualClock(clockStart)
		clk = e.clock.Now
	}
	e.s = h.Open(t, clk)
	if e.s == nil {
		t.Fatal("storetest: Harness.Open returned nil")
	}
	e.o, _ = e.s.(engine.OwnerStore)
	e.c, _ = e.s.(engine.ConditionalStore)
	e.l, _ = e.s.(engine.LogStore)
	if c, ok := e.s.(Checker); ok {
		t.Cleanup(func() {
			if err := c.CheckInvariants(); err != nil {
				t.Errorf("CheckInvariants at cleanup: %v", err)
			}
		})
	}
	return e
}

// tick advances an injected clock by d; without one it does nothing.
func (e *env) tick(d int64) {
	if e.clock != nil {
		e.clock.Advance(d)
	}
}
