// Package storetest is the conformance suite for engine.Store
// implementations, in the manner of testing/fstest.TestFS: a backend's own
// test calls
//
//	storetest.Run(t, storetest.Harness{
//		Open: func(t testing.TB, clock engine.Clock) engine.Store {
//			s := mystore.New(mystore.Options{Clock: clock})
//			t.Cleanup(func() { s.Close() })
//			return s
//		},
//		ClockInjection: true, // the store reads time only from clock
//		BinaryIDs:      true, // IDs may hold NUL and invalid UTF-8
//	})
//
// and Run checks every S, T and L clause of the a2astore contract (see the
// engine package) as one subtest per clause group, named by clause id
// ("S4/clock-backward", "T5/missing-boundary", "L9/copies", …), each on a
// fresh store. A store that implements Checker has its invariants checked
// when each subtest ends.
//
// A store that is an engine.OwnerStore (tenancy) also gets the owner
// clauses O1–O5 ("O1-O2/owner-recorded", "O3/isolation", "O4/totals", …):
// owners recorded by CreateOwned and returned by every operation, kept by
// Replace whatever the content says, never read from or written into
// metadata; the length limit, binary owners (with BinaryIDs) and the empty
// owner; owner filters alone and combined with the others, their totals,
// tokens carried across owners, and ListResponse.TaskOwners. On any other
// store those subtests skip and say so. O6, the cost of owner-scoped
// lists, is for each backend's own tests (ListResponse.Stats).
//
// A store that is an engine.Retainer (engine.AsRetainer: decorators are
// seen through) also gets the retention clauses R1–R2 (clauses_retain.go):
// only terminal tasks go, the age boundary is strict, the stuck age is off
// by default, batches go oldest first within their Limit and resume with
// Next, bad requests fail with ErrInvalidArgument and remove nothing,
// totals by state, context and owner stay exact, a traversal across a
// batch keeps L7, and a task rewritten during a sweep is never removed.
// Expectations come from the cursors the store returned, so the clauses
// run without an injected clock too.
//
// Every store also gets the bulk clauses "X1/bulk-load" and, on
// Harness.OpenLogged's store, "X1-K7/bulk-load-log": a store filled by
// engine/bulkload (through its engine.Importer when it has one, Create
// otherwise), with a load stopped and resumed, holds each task once as
// generated, in order, with exact totals by state, context and owner, the
// Create log entry of each task, and clean invariants; and, on an
// Importer keeping a log, "X1-K7/trim-imported-older": a task imported
// older than where TrimLog goes on has its log trimmed by the next pass.
//
// Besides the clause tests, Run includes:
//
//   - "model/random": a model-based randomized test. A deliberately simple
//     reference store (a sorted slice whose validation, time, owner,
//     filter, trimming, paging and token rules are written from the SPEC,
//     sharing no code with the backends) runs beside the backend; random
//     creates (on an OwnerStore, half of them for one of a few owners),
//     replaces, cancels, appends (new and duplicate message IDs) and
//     deletes, with a clock that sometimes goes backward, interleave with
//     the pages of several live traversals under random filters (owners
//     included). Every result must equal the model's, and each traversal
//     must keep the L7 guarantees. The seed is logged and set with
//     -storetest.seed; the length with -storetest.ops.
//   - "L7-L8/concurrent": writers and traversers on goroutines (meaningful
//     under -race), checking L7 per traversal against tasks no writer
//     touches (on an OwnerStore, traversals by owner too), L8 (count and
//     page from one view), that concurrent Creates of one ID let exactly
//     one win, and that no call fails.
//
// Beside Run, three stress tests take the same Harness and
// StressOptions (a backend's own test calls them, each once per store
// variant worth it):
//
//   - RunInterleavedModel: long random interleavings of creates, growing
//     and shrinking replaces, appends, cancels, deletes, log trims,
//     retention sweeps and (StressOptions.Reopen) restarts, with a clock
//     that steps back, checked after each step against a plain map
//     (invariants, Get, a filtered traversal and its total); then a full
//     TrimLog that must leave no log entry (K7), then traversals under
//     concurrent writers (L7, L8). -short and -race run fewer steps.
//   - RunSameIDHammer: writers racing on three IDs; no revision returned
//     twice within an incarnation (S7), invariants hold.
//   - RunTrimLogClockBack: TrimLog still trims a task written behind the
//     point it goes on from after the clock stepped back (K7, S4).
//
// Their seeds are logged and set with -storetest.seed too.
//
// Clauses that drive time (S4, S5, parts of S6 and L7) need
// Harness.ClockInjection; without it the suite still checks that every
// mutation strictly advances UpdatedAt. ManualClock is a clock tests can
// drive by hand.
package storetest
