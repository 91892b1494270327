package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.opentelemetry.io/otel/trace"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
	"github.com/a2astore/a2astore/internal/pebblelog"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/internal/taskgen"
	"github.com/a2astore/a2astore/loadgen/load"
	"github.com/a2astore/a2astore/pebblestore"
	"github.com/a2astore/a2astore/pgstore"
	"github.com/a2astore/a2astore/pushdelivery"
)

var copySeed = flag.Uint64("copy.seed", 0, "seed of the copy tests' interruptions (0: from the time)")

// copyTasks is the size of the copy tests' stores; A2ASTORE_COPY_TASKS
// overrides it (the 1e5: A2ASTORE_COPY_TASKS=100000).
func copyTasks(t testing.TB, def int) int {
	if v := os.Getenv("A2ASTORE_COPY_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("A2ASTORE_COPY_TASKS=%q", v)
		}
		return n
	}
	return def
}

var (
	copyOwners   = []string{"", "alice", "bob"}
	copyContexts = 7
)

// fillRich writes n tasks into s (a store keeping the log, on clock) and
// push configurations into ob: owners and none, several contexts and
// states, history, artifacts, metadata, tasks sharing a storage time
// (ordered by ID), and for many tasks later revisions of every log kind
// (a Replace, one carrying a status event, an append, a cancel), every
// third task's writes made under a sampled span (their log entries keep
// its traceparent, H2), some tasks deleted and the logs of the oldest
// trimmed. It returns the number of tasks left.
func fillRich(t testing.TB, s *pebblestore.Store, clock *storetest.ManualClock, ob pushdelivery.Outbox, n int, seed uint64) int {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 56))
	gen := taskgen.New(taskgen.Shape{Contexts: copyContexts, History: 2, Artifacts: 2, ArtifactBytes: 48, Seed: seed + 1})
	left := 0
	for i := range n {
		ctx := context.Background()
		if i%3 == 0 {
			ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{0: 1, 15: byte(i)}, SpanID: trace.SpanID{0: 2, 7: byte(i)}, TraceFlags: trace.FlagsSampled}))
		}
		clock.Advance(int64(rng.IntN(3))) // 0: the same time as the task before
		task := gen.Task(i)
		task.Metadata = map[string]any{"i": float64(i), "tags": []any{"a", float64(i % 5)}, "nested": map[string]any{"ok": i%2 == 0}}
		if i%4 == 0 {
			task.Status.State = a2a.TaskStateSubmitted
		}
		rec, err := s.CreateOwned(ctx, task, copyOwners[i%len(copyOwners)])
		if err != nil {
			t.Fatal(err)
		}
		for step := range rng.IntN(4) {
			clock.Advance(int64(rng.IntN(2)))
			switch step {
			case 0:
				next := *rec.Task
				next.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: rec.Task.Status.Timestamp}
				next.Metadata = map[string]any{"i": float64(i), "step": "working"}
				ev := &a2a.TaskStatusUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Status: next.Status}
				rec, err = s.Replace(engine.WithEvent(ctx, ev), &next, rec.Revision)
			case 1:
				rec, err = s.AppendHistory(ctx, task.ID, gen.Message(task.ID, i))
			case 2:
				if rec.Task.Status.State.Terminal() {
					continue
				}
				rec, err = s.Cancel(ctx, task.ID)
			}
			if err != nil {
				t.Fatalf("task %d step %d: %v", i, step, err)
			}
		}
		if i%5 == 0 {
			for k := range 1 + i%3 {
				r := &pushdelivery.Record{TaskID: task.ID,
					Config:  a2a.PushConfig{ID: fmt.Sprintf("cfg-%d", k), URL: fmt.Sprintf("https://hooks.example/%d/%d", i, k), Token: "tok"},
					Dest:    "https://hooks.example:443",
					Created: time.UnixMicro(clock.Now()).UTC(), Delivered: rec.Revision - int64(k%2), Attempts: k,
					NextAt: time.UnixMicro(clock.Now() + 1000).UTC(), LastError: map[bool]string{true: "HTTP 503"}[k > 0], Done: k == 2}
				if k > 0 {
					r.FailingSince = time.UnixMicro(clock.Now() - 5).UTC()
				}
				if err := ob.Save(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
		}
		if i%17 == 16 {
			if err := s.Delete(ctx, task.ID); err != nil {
				t.Fatal(err)
			}
			continue
		}
		left++
	}
	// The logs of the oldest tasks trimmed (K7): tasks with no entries.
	oldest, err := s.Tail(ctx, min(10, left))
	if err != nil {
		t.Fatal(err)
	}
	if len(oldest) > 0 {
		if _, err := s.TrimLog(ctx, oldest[0].UpdatedAt, 100); err != nil {
			t.Fatal(err)
		}
	}
	return left
}

// makeRichPebble makes a Pebble store with fillRich's tasks in dir and its
// push outbox in dir.push (a2astore-server's layout); it returns the
// number of tasks.
func makeRichPebble(t testing.TB, dir string, n int, seed uint64) (left int) {
	t.Helper()
	clock := storetest.NewManualClock(1_750_000_000_000_000)
	withPebble(t, dir, pebblestore.Options{Clock: clock.Now, NoSync: true}, func(s *pebblestore.Store, ob pushdelivery.Outbox) {
		left = fillRich(t, s, clock, ob, n, seed)
	})
	return left
}

// withPebble runs f on the Pebble store in dir (opened with opts, the log
// on) and its push outbox in dir.push.
func withPebble(t testing.TB, dir string, opts pebblestore.Options, f func(*pebblestore.Store, pushdelivery.Outbox)) {
	t.Helper()
	opts.Log, opts.Logger = true, pebblelog.Quiet{}
	s, err := pebblestore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ob, err := pushdelivery.OpenPebble(dir+".push", s, pushdelivery.LocalOptions{Logger: pebblelog.Quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	f(s, ob)
}

// dumpStore describes everything a store holds, read through its public
// reads only (never Export, which copy uses): every task in list order
// with its cursor, revision, owner and content (List, Get), its log
// (ReadLog) and push configurations (the outbox's List), and the totals
// of every owner, context and state filter (the counters).
func dumpStore(t testing.TB, s engine.Store, ob pushdelivery.Outbox) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	seen := map[[2]string]bool{}
	token := ""
	for {
		resp, err := s.List(ctx, &engine.ListRequest{PageSize: 100, PageToken: token, IncludeArtifacts: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, task := range resp.Tasks {
			rec, err := s.Get(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Cursor != resp.TaskCursors[i] || rec.Owner != resp.TaskOwners[i] || canonTask(rec.Task) != canonTask(task) {
				t.Fatalf("task %q: Get and List disagree", task.ID)
			}
			fmt.Fprintf(&b, "task %q at %d rev %d owner %q %s\n", task.ID, rec.Cursor.UpdatedAt, rec.Revision, rec.Owner, canonTask(task))
			seen[[2]string{rec.Owner, task.ContextID}] = true
			logs, err := s.(engine.LogStore).ReadLog(ctx, task.ID, 0, engine.MaxLogRead)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range logs {
				fmt.Fprintf(&b, "  log %d at %d kind %d state %s trace %q %q\n", l.Revision, l.Time, l.Kind, l.State, l.Trace, l.Body)
			}
			if ob != nil {
				recs, err := ob.List(ctx, task.ID, "", pushdelivery.MaxConfigsPerTask)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					fmt.Fprintf(&b, "  push %s\n", canonRecord(r))
				}
			}
		}
		if resp.NextPageToken == "" {
			break
		}
		token = resp.NextPageToken
	}
	writeTotals(t, s, &b, seen)
	return b.String()
}

// writeTotals writes the total of every state (and none) under each
// owner and context filter: every owner and every context held, each
// alone, and each owner with each context when there are few of them,
// else each pair held (a loadgen store gives each context one owner).
func writeTotals(t testing.TB, s engine.Store, b *strings.Builder, held map[[2]string]bool) {
	t.Helper()
	owners, contexts := map[string]bool{"": true}, map[string]bool{"": true}
	for k := range held {
		owners[k[0]], contexts[k[1]] = true, true
	}
	pairs := map[[2]string]bool{}
	for o := range owners {
		for c := range contexts {
			if o == "" || c == "" || held[[2]string{o, c}] || len(owners)*len(contexts) <= 256 {
				pairs[[2]string{o, c}] = true
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(pairs), func(x, y [2]string) int {
		return cmp.Or(strings.Compare(x[0], y[0]), strings.Compare(x[1], y[1]))
	})
	states := append([]a2a.TaskState{a2a.TaskStateUnspecified}, engine.KnownStates()...)
	for _, k := range keys {
		for _, st := range states {
			resp, err := s.List(context.Background(), &engine.ListRequest{PageSize: 1, Owner: k[0], ContextID: k[1], Status: st, IncludeTotalSize: true})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(b, "total owner=%q context=%q state=%q: %d\n", k[0], k[1], st, resp.TotalSize)
		}
	}
}

// dumpPebble is dumpStore of the Pebble store in dir and its outbox.
func dumpPebble(t testing.TB, dir string) (dump string) {
	t.Helper()
	withPebble(t, dir, pebblestore.Options{NoUpgrade: true}, func(s *pebblestore.Store, ob pushdelivery.Outbox) {
		dump = dumpStore(t, s, ob)
	})
	return dump
}

// dumpPG is dumpStore of the PostgreSQL store at dsn and its outbox.
func dumpPG(t testing.TB, dsn string) string {
	t.Helper()
	s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Log: true, ExternalSchema: true, CountRollupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ob, err := pushdelivery.NewPG(context.Background(), s.Pool(), pushdelivery.PGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return dumpStore(t, s, ob)
}

// sameDump fails, showing the first differing line, unless got is want.
func sameDump(t testing.TB, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("%s differs from the source at line %d:\n got %s\nwant %s", what, i+1, gl, wl)
		}
	}
}

func mustAdmin(t testing.TB, args ...string) string {
	t.Helper()
	var out, errOut strings.Builder
	if code := run(context.Background(), args, &out, &errOut); code != exitOK {
		t.Fatalf("a2astore-admin %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String()
}

// TestCopyPebblePGPebble (X1): a Pebble store — owners, contexts, states,
// history, artifacts, metadata, shared storage times, logs of every kind
// and trimmed ones, deleted tasks, push configurations with their
// delivery state — copied into PostgreSQL and from there into a new
// Pebble store reads back identical at each step, as the stores' own
// reads see it (order, cursors, revisions, owners, content, log entries,
// configurations, every counter), and passes check. A copy run again on
// the complete target resumes, writes nothing and verifies.
func TestCopyPebblePGPebble(t *testing.T) {
	n := copyTasks(t, 400)
	dir := t.TempDir()
	src, back := filepath.Join(dir, "src"), filepath.Join(dir, "back")
	left := makeRichPebble(t, src, n, 56)
	want := dumpPebble(t, src)
	if !strings.Contains(want, `trace "00-`) || !strings.Contains(want, `trace ""`) {
		t.Fatal("the source holds no log entry with a trace, or none without")
	}
	dsn := pgtest.DSN(t)

	out := mustAdmin(t, "copy", "-from", "pebble", "-from-pebble-dir", src, "-to", "pg", "-to-pg-dsn", dsn, "-batch", "64")
	if !strings.Contains(out, fmt.Sprintf("verified: %d tasks", left)) {
		t.Fatalf("copy into pg says:\n%s", out)
	}
	t.Logf("copy pebble → pg:\n%s", out)
	sameDump(t, "the PostgreSQL copy", dumpPG(t, dsn), want)
	mustAdmin(t, "check", "-backend", "pg", "-pg-dsn", dsn)

	out = mustAdmin(t, "copy", "-from", "pg", "-from-pg-dsn", dsn, "-to", "pebble", "-to-pebble-dir", back, "-batch", "100")
	if !strings.Contains(out, fmt.Sprintf("verified: %d tasks", left)) {
		t.Fatalf("copy into pebble says:\n%s", out)
	}
	sameDump(t, "the Pebble copy of the PostgreSQL copy", dumpPebble(t, back), want)
	mustAdmin(t, "check", "-backend", "pebble", "-pebble-dir", back)

	out = mustAdmin(t, "copy", "-from", "pg", "-from-pg-dsn", dsn, "-to", "pebble", "-to-pebble-dir", back)
	if !strings.Contains(out, "resuming after") || !strings.Contains(out, "verified") {
		t.Fatalf("copy onto a complete copy says:\n%s", out)
	}
	sameDump(t, "the Pebble copy after a second copy", dumpPebble(t, back), want)
}

// errInterrupted is the interruption TestCopyResume injects.
var errInterrupted = errors.New("interrupted by the test")

// TestCopyResume (X1): copies stopped at random points — after a batch
// was read, after it was written but before its push configurations
// (always once, first), after those — with a random -batch each run,
// then run again until one finishes, leave the target identical to the source, both ways, with
// nothing duplicated or missing. Seeded: -copy.seed=N reruns a failure.
func TestCopyResume(t *testing.T) {
	seed := *copySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -copy.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	n := copyTasks(t, 300)
	dir := t.TempDir()
	src, back := filepath.Join(dir, "src"), filepath.Join(dir, "back")
	makeRichPebble(t, src, n, seed)
	want := dumpPebble(t, src)
	roundTripInterrupted(t, rng, n, src, back, want)
}

// roundTripInterrupted copies the Pebble store in src into a new
// PostgreSQL database and from there into a new Pebble store in back,
// each copy interrupted (copyInterrupted); both copies must read back as
// want (the source's dump) and pass check.
func roundTripInterrupted(t *testing.T, rng *rand.Rand, n int, src, back, want string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	copyInterrupted(t, rng, n, []string{"-from", "pebble", "-from-pebble-dir", src}, []string{"-to", "pg", "-to-pg-dsn", dsn})
	sameDump(t, "the PostgreSQL copy", dumpPG(t, dsn), want)
	mustAdmin(t, "check", "-backend", "pg", "-pg-dsn", dsn)
	copyInterrupted(t, rng, n, []string{"-from", "pg", "-from-pg-dsn", dsn}, []string{"-to", "pebble", "-to-pebble-dir", back})
	sameDump(t, "the Pebble copy", dumpPebble(t, back), want)
	mustAdmin(t, "check", "-backend", "pebble", "-pebble-dir", back)
}

// TestCopyLoadgenStore (X1): a Pebble store made by loadgen — its initial
// tasks, then a write-heavy run by 5 callers (owners; creates, replaces,
// appends, cancels, deletes), with push configurations added to every
// seventh task — copied Pebble → PostgreSQL → Pebble, each copy
// interrupted at random points and resumed, reads back identical
// (dumpStore) and passes check. A2ASTORE_COPY_TASKS=100000 is the
// issue's size.
func TestCopyLoadgenStore(t *testing.T) {
	seed := *copySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -copy.seed=%d)", seed, seed)
	n := copyTasks(t, 600)
	dir := t.TempDir()
	src, back := filepath.Join(dir, "src"), filepath.Join(dir, "back")
	withPebble(t, src, pebblestore.Options{NoSync: true}, func(s *pebblestore.Store, ob pushdelivery.Outbox) {
		res, err := load.Run(t.Context(), load.Config{Store: s, Target: "pebble", Initial: n, Ops: int64(n / 2),
			Workload: "write-heavy", Callers: 5, Concurrency: 4, Seed: seed,
			Shape: taskgen.Shape{Contexts: 40}})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Err(); err != nil {
			t.Fatalf("the loadgen run: %v", err)
		}
		addPushConfigs(t, s, ob, 7)
	})
	want := dumpPebble(t, src)
	if !strings.Contains(want, `owner "loadgen-`) || !strings.Contains(want, "  log ") || !strings.Contains(want, "  push ") {
		t.Fatal("the loadgen store has no owners, logs or push configurations to copy")
	}
	roundTripInterrupted(t, rand.New(rand.NewPCG(seed, 2)), n, src, back, want)
}

// addPushConfigs saves a push configuration, with delivery state, for
// every k-th task of s in list order.
func addPushConfigs(t testing.TB, s engine.Store, ob pushdelivery.Outbox, k int) {
	t.Helper()
	ctx := context.Background()
	token, i := "", 0
	for {
		resp, err := s.List(ctx, &engine.ListRequest{PageSize: 100, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range resp.Tasks {
			if i++; i%k != 0 {
				continue
			}
			now := time.Now().UTC().Truncate(time.Microsecond)
			r := &pushdelivery.Record{TaskID: task.ID,
				Config: a2a.PushConfig{ID: "cfg", URL: "https://hooks.example/" + string(task.ID), Token: "tok"},
				Dest:   "https://hooks.example:443", Created: now, NextAt: now.Add(time.Second), Attempts: i % 3}
			if err := ob.Save(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if token = resp.NextPageToken; token == "" {
			return
		}
	}
}

// copyInterrupted runs copy from → to, stopped by copyHook at a random
// batch and step each run (with a random -batch; the first run always
// between a batch and its push configurations), until a run finishes;
// n, the source's size, spreads the stops over it.
func copyInterrupted(t *testing.T, rng *rand.Rand, n int, from, to []string) {
	t.Helper()
	t.Cleanup(func() { copyHook = nil })
	steps := []string{"exported", "imported", "saved"}
	for attempt := 0; ; attempt++ {
		if attempt == 30 {
			t.Fatal("30 interrupted runs and still not done")
		}
		batch := 5 + rng.IntN(60)
		stopAt, stopStep := rng.IntN(max(4, n/batch/3)), steps[rng.IntN(len(steps))]
		if attempt == 0 { // always once between a batch and its push configs
			batch, stopAt, stopStep = 64, 1, "imported"
		}
		copyHook = func(step string, b int) error {
			if b == stopAt && step == stopStep {
				return errInterrupted
			}
			return nil
		}
		args := append(append([]string{"copy"}, append(from, to...)...), "-batch", strconv.Itoa(batch))
		var out, errOut strings.Builder
		code := run(context.Background(), args, &out, &errOut)
		copyHook = nil
		if code == exitOK {
			t.Logf("done after %d interrupted runs", attempt)
			return
		}
		if code != exitProblems || !strings.Contains(errOut.String(), errInterrupted.Error()) {
			t.Fatalf("run %d (batch %d, stop at %s of batch %d): exit %d\n%s%s", attempt, batch, stopStep, stopAt, code, out.String(), errOut.String())
		}
	}
}

// TestCopyRefusals (X1): copy refuses, exit 2, changing nothing: a
// target holding tasks that are not a copy of the source (PostgreSQL and
// Pebble), a source written to while it is read (without -live; the new
// target is not even created), and a resumed copy of a source written to
// since the copy began. With -live the same copies go through and catch
// up with the writes.
func TestCopyRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	makeRichPebble(t, src, 60, 7)
	srcDump := dumpPebble(t, src)
	refused := func(want string, args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		code := run(ctx, append([]string{"copy"}, args...), &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), want) {
			t.Fatalf("copy %s: exit %d, stderr %q; want exit 2 and %q\n%s", strings.Join(args, " "), code, errOut.String(), want, out.String())
		}
		return errOut.String()
	}

	// A PostgreSQL target with tasks of its own.
	other := pgtest.DSN(t)
	s, err := pgstore.Open(ctx, other, pgstore.Options{Log: true})
	if err != nil {
		t.Fatal(err)
	}
	seedTasks(t, s, 5)
	s.Close()
	before := dumpPG(t, other)
	t.Log(refused("not a copy of source", "-from", "pebble", "-from-pebble-dir", src, "-to", "pg", "-to-pg-dsn", other))
	sameDump(t, "the refused PostgreSQL target", dumpPG(t, other), before)
	sameDump(t, "the source", dumpPebble(t, src), srcDump)

	// A Pebble target with tasks of its own.
	mine := filepath.Join(dir, "mine")
	seedPebble(t, mine, 5)
	before = dumpPebble(t, mine)
	refused("not a copy of source", "-from", "pebble", "-from-pebble-dir", src, "-to", "pebble", "-to-pebble-dir", mine)
	sameDump(t, "the refused Pebble target", dumpPebble(t, mine), before)

	// A PostgreSQL source written to while copy reads it.
	dsn := pgtest.DSN(t)
	mustAdmin(t, "copy", "-from", "pebble", "-from-pebble-dir", src, "-to", "pg", "-to-pg-dsn", dsn)
	writer, err := pgstore.Open(ctx, dsn, pgstore.Options{Log: true, ExternalSchema: true, CountRollupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	written := 0
	writeAt := func(at int) {
		copyHook = func(step string, b int) error {
			if step == "exported" && b == at {
				written++
				_, err := writer.Create(ctx, &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("late-%d", written)), ContextID: "late",
					Status: a2a.TaskStatus{State: a2a.TaskStateWorking}})
				return err
			}
			return nil
		}
	}
	t.Cleanup(func() { copyHook = nil })
	target := filepath.Join(dir, "target")
	writeAt(0)
	t.Log(refused("is being written to", "-from", "pg", "-from-pg-dsn", dsn, "-to", "pebble", "-to-pebble-dir", target))
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused copy left %s: %v", target, err)
	}

	// Written to after the first batch: a failure (the target holds a
	// resumable prefix), then a rerun is refused, then -live catches up.
	writeAt(1)
	var out, errOut strings.Builder
	if code := run(ctx, []string{"copy", "-from", "pg", "-from-pg-dsn", dsn, "-to", "pebble", "-to-pebble-dir", target, "-batch", "10"}, &out, &errOut); code != exitProblems || !strings.Contains(errOut.String(), "is being written to") {
		t.Fatalf("copy of a source written to mid-copy: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	copyHook = nil
	refused("was written to since the copy", "-from", "pg", "-from-pg-dsn", dsn, "-to", "pebble", "-to-pebble-dir", target)
	writeAt(2) // once more, during the -live copy
	out.Reset()
	if code := run(ctx, []string{"copy", "-live", "-from", "pg", "-from-pg-dsn", dsn, "-to", "pebble", "-to-pebble-dir", target, "-batch", "10"}, &out, &errOut); code != exitOK {
		t.Fatalf("copy -live: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	copyHook = nil
	if !strings.Contains(out.String(), "caught up with") {
		t.Fatalf("copy -live says:\n%s", out.String())
	}
	sameDump(t, "the -live copy", dumpPebble(t, target), dumpPG(t, dsn))
}

// TestImportAllOrNothing (X1): on each backend, an Import whose batch
// holds a task the store has, a task twice, or a task that is not valid
// stored state fails (ErrAlreadyExists, ErrInvalidArgument) and writes
// none of the batch; a valid batch reads back as given.
func TestImportAllOrNothing(t *testing.T) {
	ctx := context.Background()
	stored := func(id string, rev int64, at int64) engine.StoredTask {
		task := &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		l, err := engine.NewLogEntry(task, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.Revision, l.Time = rev, at
		return engine.StoredTask{Record: engine.Record{Task: task, Revision: rev, Cursor: engine.Cursor{UpdatedAt: at, ID: task.ID}, Owner: "o"},
			Log: []engine.LogEntry{l}}
	}
	for _, backend := range []string{"memory", "pebble", "pg"} {
		t.Run("backend="+backend, func(t *testing.T) {
			var s copyStore
			switch backend {
			case "memory":
				s = memstore.New(memstore.Options{Log: true})
			case "pebble":
				ps, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Log: true, Logger: pebblelog.Quiet{}})
				if err != nil {
					t.Fatal(err)
				}
				s = ps
			case "pg":
				ps, err := pgstore.Open(ctx, pgtest.DSN(t), pgstore.Options{Log: true})
				if err != nil {
					t.Fatal(err)
				}
				s = ps
			}
			defer s.Close()
			if err := s.Import(ctx, []engine.StoredTask{stored("a", 3, 1000), stored("b", 1, 1000)}); err != nil {
				t.Fatal(err)
			}
			badLog := stored("e", 2, 2000)
			badLog.Log[0].Revision = 3
			for _, c := range []struct {
				name  string
				batch []engine.StoredTask
				want  error
			}{
				{"exists", []engine.StoredTask{stored("c", 1, 2000), stored("a", 1, 2000)}, engine.ErrAlreadyExists},
				{"twice", []engine.StoredTask{stored("d", 1, 2000), stored("d", 2, 2001)}, engine.ErrAlreadyExists},
				{"revision 0", []engine.StoredTask{stored("c", 1, 2000), stored("z", 0, 2000)}, engine.ErrInvalidArgument},
				{"negative time", []engine.StoredTask{stored("c", 1, 2000), stored("z", 1, -1)}, engine.ErrInvalidArgument},
				{"log after the task", []engine.StoredTask{stored("c", 1, 2000), badLog}, engine.ErrInvalidArgument},
			} {
				if err := s.Import(ctx, c.batch); !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", c.name, err, c.want)
				}
			}
			got, err := s.Export(ctx, nil, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 {
				t.Fatalf("after the failed imports the store holds %d tasks, want 2", len(got))
			}
			want := []engine.StoredTask{stored("b", 1, 1000), stored("a", 3, 1000)} // same time: ID descending (S6)
			for i := range want {
				if d := sameTask(&got[i], &want[i]); d != "" || got[i].Cursor != want[i].Cursor {
					t.Errorf("task %d: %s (cursor %v, want %v)", i, d, got[i].Cursor, want[i].Cursor)
				}
			}
			if err := s.(engine.Checker).CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			tail, err := s.Tail(ctx, 5)
			if err != nil || len(tail) != 2 || tail[1].ID != "a" {
				t.Fatalf("tail %v, %v", tail, err)
			}
		})
	}
}

// TestCopySkipsConfigsOfDeletedIncarnation (SPEC N1, X1): a push config
// of a task deleted and created again under its ID, not removed yet (no
// worker ran), serves nothing of the new task in the source; copy leaves
// it out, so it serves nothing in the target either (which has no mark
// of the deletion), and verifies. The configs that serve their task are
// copied, saved for its incarnation in the target.
// (Before: copy copied the records as stored, the stale one became live
// in the target, and verify, comparing the records as stored, agreed.)
func TestCopySkipsConfigsOfDeletedIncarnation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	create := func(s *pebblestore.Store, id a2a.TaskID) {
		t.Helper()
		if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
	withPebble(t, src, pebblestore.Options{}, func(s *pebblestore.Store, ob pushdelivery.Outbox) {
		for _, id := range []a2a.TaskID{"again", "kept"} {
			create(s, id)
			inc, err := pushdelivery.Incarnation(ctx, s, id)
			if err != nil {
				t.Fatal(err)
			}
			at := time.Now().Add(-time.Second)
			if err := ob.Save(ctx, &pushdelivery.Record{TaskID: id, Config: a2a.PushConfig{ID: "old", URL: "https://hooks.example/old"},
				Dest: "https://hooks.example:443", Created: at, NextAt: at, Delivered: 1, Incarnation: inc}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Delete(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		create(s, "again")
		// Another task deleted and created again, with a config saved for
		// its new incarnation in the source (which removed the old one's).
		create(s, "redone")
		if err := s.Delete(ctx, "redone"); err != nil {
			t.Fatal(err)
		}
		create(s, "redone")
		inc, err := pushdelivery.Incarnation(ctx, s, "redone")
		if err != nil || inc == 0 {
			t.Fatalf("the source's incarnation of the task created again: %d, %v", inc, err)
		}
		at := time.Now()
		if err := ob.Save(ctx, &pushdelivery.Record{TaskID: "redone", Config: a2a.PushConfig{ID: "new", URL: "https://hooks.example/new"},
			Dest: "https://hooks.example:443", Created: at, NextAt: at, Delivered: 1, Incarnation: inc}); err != nil {
			t.Fatal(err)
		}
	})
	out := mustAdmin(t, "copy", "-from", "pebble", "-from-pebble-dir", src, "-to", "pebble", "-to-pebble-dir", dst)
	if !strings.Contains(out, "verified: 3 tasks") {
		t.Fatalf("copy says:\n%s", out)
	}
	withPebble(t, dst, pebblestore.Options{NoUpgrade: true}, func(s *pebblestore.Store, ob pushdelivery.Outbox) {
		for task, want := range map[a2a.TaskID]string{"again": "", "redone": "new", "kept": "old"} {
			recs, err := ob.List(ctx, task, "", pushdelivery.MaxConfigsPerTask)
			if err != nil {
				t.Fatal(err)
			}
			if want == "" {
				if len(recs) != 0 {
					t.Errorf("the target's push configs of %s: %d, want none", task, len(recs))
				}
				continue
			}
			if len(recs) != 1 || recs[0].Config.ID != want {
				t.Errorf("the target's push configs of %s: %d, want only %s", task, len(recs), want)
				continue
			}
			// Saved for the task's incarnation in the target, not the
			// source's (a mark of the source's clock and deletions).
			inc, err := pushdelivery.Incarnation(ctx, s, task)
			if err != nil {
				t.Fatal(err)
			}
			if recs[0].Incarnation != inc {
				t.Errorf("the target's push config of %s: incarnation %d, want the target's %d", task, recs[0].Incarnation, inc)
			}
		}
	})
}
