package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// stressStore is what the interleaved model test needs of a store.
type stressStore interface {
	engine.OwnerStore
	engine.LogStore
	engine.Retainer
	engine.Checker
}

// stressStoreOf returns s as a stressStore, or fails t.
func stressStoreOf(t testing.TB, s engine.Store) stressStore {
	t.Helper()
	ss, ok := s.(stressStore)
	if !ok {
		t.Fatalf("%T is not an OwnerStore, LogStore, Retainer and Checker", s)
	}
	return ss
}

// refTask is what the interleaved model test's map keeps of a task: its
// JSON, owner, context, state, time and revision.
type refTask struct {
	data  []byte
	owner string
	ctx   string
	state a2a.TaskState
	at    int64
	rev   int64
}

// RunInterleavedModel checks a backend against a plain map under long
// interleaved writes, on Harness.OpenLogged's store with a clock it drives
// (it skips without OpenLogged, ClockInjection or BinaryIDs). Random steps
// (StressOptions.ModelSteps; fewer under -short or -race) create tasks
// with owners, contexts and states (IDs just under, at and past
// StressOptions.InlineID, some with NUL), replace them with bodies that
// grow and shrink (a few past StressOptions.LargeBody, so a store that
// compacts keeps moving them), append, cancel, delete, trim logs and sweep
// retention (R1), and with StressOptions.Reopen restart the store, while
// the clock mostly holds or creeps forward and now and then steps back up
// to 80 µs (S4). After each step it checks CheckInvariants, every task
// read back by Get against the map (content, revision, time, owner), and
// a random filtered traversal (owner, context, state, status time,
// projection) against a recount of the map, with its total on every page
// (L5). Then TrimLog walks to its end with a cutoff after every task's
// time: no task may keep a log entry (K7), whatever the clock did before.
// Last, traversals run concurrently with writers that touch only
// "volatile" tasks: cursors strictly descend, every "stable" task
// matching the filter appears exactly once and with its own bytes, a
// stable task never twice (a volatile one deleted and created again
// behind the boundary may reappear), a one-page answer's total equals its
// page (L7, L8), and afterwards the invariants hold and stable tasks are
// unchanged. The seed is logged and set with -storetest.seed.
func RunInterleavedModel(t *testing.T, h Harness, o StressOptions) {
	switch {
	case h.OpenLogged == nil:
		t.Skip("Harness.OpenLogged is nil: the interleaved model test needs the task log")
	case !h.ClockInjection:
		t.Skip("backend takes no custom clock: the interleaved model test steps it back")
	case !h.BinaryIDs:
		t.Skip("Harness.BinaryIDs is false: the interleaved model test uses IDs with NUL")
	}
	seed := stressSeed(t)
	inline, large := cmp0(o.InlineID, 40), cmp0(o.LargeBody, 32<<10)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	var now atomic.Int64
	now.Store(1_000_000)
	clock := func() int64 { return now.Load() }
	s := stressStoreOf(t, h.OpenLogged(t, clock))
	ref := map[a2a.TaskID]*refTask{}
	owners := []string{"", "alice", "bob", "Alice"}
	ctxs := []string{"c1", "c2", "", "c\x00"}
	var ids []a2a.TaskID
	for i := range 120 {
		id := fmt.Sprintf("t%03d", i)
		switch i % 5 {
		case 1:
			id += strings.Repeat("L", inline) // in the record
		case 2:
			id += strings.Repeat("l", inline-len(id)) // exactly inline
		case 3:
			id = strings.ToUpper(id) + "\x00"
		}
		ids = append(ids, a2a.TaskID(id))
	}
	nonTerminal := []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired}
	states := append(slices.Clone(nonTerminal), a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected)
	seq := 0
	body := func() string {
		n := rng.IntN(6000)
		switch rng.IntN(40) {
		case 0:
			n = large + rng.IntN(large)
		case 1, 2, 3:
			n = rng.IntN(40)
		}
		seq++
		return fmt.Sprintf("%d-", seq) + strings.Repeat(string(rune('a'+rng.IntN(26))), n)
	}
	newTask := func(id a2a.TaskID) *a2a.Task {
		ts := time.UnixMicro(int64(rng.IntN(5000))).UTC()
		return &a2a.Task{ID: id, ContextID: ctxs[rng.IntN(len(ctxs))],
			Status:   a2a.TaskStatus{State: states[rng.IntN(len(states))], Timestamp: &ts},
			Metadata: map[string]any{"text": body()}}
	}
	keep := func(id a2a.TaskID, owner string, rec engine.Record) {
		data, err := json.Marshal(rec.Task)
		if err != nil {
			t.Fatal(err)
		}
		ref[id] = &refTask{data: data, owner: owner, ctx: rec.Task.ContextID, state: rec.Task.Status.State, at: rec.Cursor.UpdatedAt, rev: rec.Revision}
	}
	var recent []string
	note := func(f string, a ...any) {
		recent = append(recent, fmt.Sprintf(f, a...))
		if len(recent) > 12 {
			recent = recent[1:]
		}
	}
	fatal := func(step int, f string, a ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d: %s\nrecent:\n  %s", seed, step, fmt.Sprintf(f, a...), strings.Join(recent, "\n  "))
	}
	randReq := func() engine.ListRequest {
		req := engine.ListRequest{PageSize: 1 + rng.IntN(7), IncludeTotalSize: true}
		if rng.IntN(2) == 0 {
			req.Owner = owners[1+rng.IntN(len(owners)-1)]
		}
		if rng.IntN(3) == 0 {
			req.ContextID = ctxs[rng.IntN(len(ctxs))]
		}
		if rng.IntN(2) == 0 {
			req.Status = states[rng.IntN(len(states))]
		}
		if rng.IntN(5) == 0 {
			ts := time.UnixMicro(int64(rng.IntN(5000))).UTC()
			req.StatusTimestampAfter = &ts
		}
		if rng.IntN(3) == 0 {
			req.Projection = engine.ProjectionLight
		}
		return req
	}
	matchModel := func(req engine.ListRequest, id a2a.TaskID, m *refTask) bool {
		if req.Owner != "" && m.owner != req.Owner || req.ContextID != "" && m.ctx != req.ContextID ||
			req.Status != a2a.TaskStateUnspecified && m.state != req.Status {
			return false
		}
		if req.StatusTimestampAfter != nil {
			var tk a2a.Task
			_ = json.Unmarshal(m.data, &tk)
			if tk.Status.Timestamp == nil || tk.Status.Timestamp.Before(*req.StatusTimestampAfter) {
				return false
			}
		}
		return true
	}

	for step := range o.modelSteps() {
		if rng.IntN(3) != 0 {
			now.Add(rng.Int64N(3) - 0) // often equal times
		} else if rng.IntN(10) == 0 {
			now.Add(-int64(rng.IntN(80)))
		}
		id := ids[rng.IntN(len(ids))]
		m := ref[id]
		switch x := rng.IntN(100); {
		case m == nil && x < 90:
			owner := owners[rng.IntN(len(owners))]
			note("create %q owner %q", id, owner)
			rec, err := s.CreateOwned(ctx, newTask(id), owner)
			if err != nil {
				fatal(step, "create: %v", err)
			}
			keep(id, owner, rec)
		case m == nil:
			note("get missing %q", id)
			if _, err := s.Get(ctx, id); !errors.Is(err, engine.ErrNotFound) {
				fatal(step, "get of deleted %q: %v", id, err)
			}
		case x < 35:
			note("replace %q", id)
			rec, err := s.Replace(ctx, newTask(id), m.rev)
			if err != nil {
				fatal(step, "replace: %v", err)
			}
			keep(id, m.owner, rec)
		case x < 55:
			note("append %q", id)
			seq++
			rec, err := s.AppendHistory(ctx, id, &a2a.Message{ID: fmt.Sprint(seq), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart(body())}})
			if err != nil {
				fatal(step, "append: %v", err)
			}
			keep(id, m.owner, rec)
		case x < 65:
			note("cancel %q (%s)", id, m.state)
			rec, err := s.Cancel(ctx, id)
			if m.state.Terminal() {
				if !errors.Is(err, engine.ErrNotCancelable) {
					fatal(step, "cancel terminal: %v", err)
				}
				break
			}
			if err != nil {
				fatal(step, "cancel: %v", err)
			}
			keep(id, m.owner, rec)
		case x < 75:
			note("delete %q", id)
			if err := s.Delete(ctx, id); err != nil {
				fatal(step, "delete: %v", err)
			}
			delete(ref, id)
		case x < 77 && o.Reopen != nil && rng.IntN(4) == 0:
			note("reopen")
			s = stressStoreOf(t, o.Reopen(t, s, clock))
		case x < 78 && rng.IntN(2) == 0:
			before := now.Load() - int64(rng.IntN(40))
			note("trim log before %d", before)
			if _, err := s.TrimLog(ctx, max(before, 0), 1+rng.IntN(5)); err != nil {
				fatal(step, "trim log: %v", err)
			}
		case x < 80:
			before := now.Load() - int64(rng.IntN(40))
			note("retain before %d", before)
			var after *engine.Cursor
			for {
				res, err := s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: before, Limit: 1 + rng.IntN(10), After: after})
				if err != nil {
					fatal(step, "retain: %v", err)
				}
				if res.Next == nil {
					break
				}
				after = res.Next
			}
			for id, m := range ref {
				if m.state.Terminal() && m.at < before {
					delete(ref, id)
				}
			}
		default:
		}

		if err := s.CheckInvariants(); err != nil {
			fatal(step, "invariants: %v", err)
		}
		// Every task reads back as last written; missing ones are missing.
		for _, id := range ids {
			m := ref[id]
			rec, err := s.Get(ctx, id)
			if m == nil {
				if !errors.Is(err, engine.ErrNotFound) {
					fatal(step, "get %q: want not found, got %v", id, err)
				}
				continue
			}
			if err != nil {
				fatal(step, "get %q: %v", id, err)
			}
			data, _ := json.Marshal(rec.Task)
			if !bytes.Equal(data, m.data) || rec.Revision != m.rev || rec.Cursor.UpdatedAt != m.at || rec.Owner != m.owner {
				fatal(step, "get %q: read back differs from the model", id)
			}
		}
		// A random filtered traversal and its totals against a recount.
		req := randReq()
		var want []engine.Cursor
		for id, m := range ref {
			if matchModel(req, id, m) {
				want = append(want, engine.Cursor{UpdatedAt: m.at, ID: id})
			}
		}
		slices.SortFunc(want, func(a, b engine.Cursor) int {
			if a.UpdatedAt != b.UpdatedAt {
				if a.UpdatedAt > b.UpdatedAt {
					return -1
				}
				return 1
			}
			return -strings.Compare(string(a.ID), string(b.ID))
		})
		var got []engine.Cursor
		for {
			resp, err := s.List(ctx, &req)
			if err != nil {
				fatal(step, "list %+v: %v", req, err)
			}
			if resp.TotalSize != len(want) {
				fatal(step, "list %+v: total %d, model %d", req, resp.TotalSize, len(want))
			}
			for i, tk := range resp.Tasks {
				m := ref[tk.ID]
				if m == nil || resp.TaskCursors[i] != (engine.Cursor{UpdatedAt: m.at, ID: tk.ID}) || resp.TaskOwners[i] != m.owner {
					fatal(step, "list %+v: task %q cursor %+v not the model's", req, tk.ID, resp.TaskCursors[i])
				}
				if md, _ := tk.Metadata["text"].(string); req.Projection == engine.ProjectionFull && !strings.Contains(string(m.data), md) {
					fatal(step, "list: task %q has another task's metadata", tk.ID)
				}
				got = append(got, resp.TaskCursors[i])
			}
			if resp.NextPageToken == "" {
				break
			}
			req.PageToken = resp.NextPageToken
		}
		if !slices.Equal(got, want) {
			fatal(step, "traversal %+v: got %d tasks %v, model %d %v", req, len(got), got, len(want), want)
		}
	}

	// Every log trimmed once TrimLog has walked to its end with a cutoff
	// after every task's time (K7), whatever the clock did before.
	cutoff := now.Load()
	for _, m := range ref {
		cutoff = max(cutoff, m.at+1) // a task's time runs ahead of a clock that stepped back (S4)
	}
	for {
		n, err := s.TrimLog(ctx, cutoff, 7)
		if err != nil {
			t.Fatal(err)
		}
		if n < 7 {
			break
		}
	}
	for id := range ref {
		if log, err := s.ReadLog(ctx, id, 0, 1000); err != nil || len(log) != 0 {
			t.Fatalf("seed %d: task %q keeps %d log entries after a full trim (%v)", seed, id, len(log), err)
		}
	}

	// Phase 2: concurrent traversals against writers touching only
	// volatile tasks.
	stable := map[a2a.TaskID]*refTask{}
	var volatile []a2a.TaskID
	for _, id := range ids {
		if m := ref[id]; m != nil && rng.IntN(2) == 0 {
			stable[id] = m
		} else {
			volatile = append(volatile, id)
		}
	}
	// Retention must not take stable tasks: sweep only before the oldest stable time.
	oldest := now.Load()
	for _, m := range stable {
		oldest = min(oldest, m.at)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w+100)))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				now.Add(r.Int64N(2))
				id := volatile[r.IntN(len(volatile))]
				text := strings.Repeat("v", r.IntN(9000))
				if r.IntN(60) == 0 {
					text = strings.Repeat("V", large+1)
				}
				tk := &a2a.Task{ID: id, ContextID: ctxs[r.IntN(len(ctxs))], Status: a2a.TaskStatus{State: states[r.IntN(len(states))]}, Metadata: map[string]any{"text": text}}
				switch r.IntN(6) {
				case 0:
					_, _ = s.CreateOwned(ctx, tk, owners[r.IntN(len(owners))])
				case 1:
					_, _ = s.Replace(ctx, tk, 0)
				case 2:
					_, _ = s.AppendHistory(ctx, id, &a2a.Message{ID: fmt.Sprint(i, w), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart(text)}})
				case 3:
					_, _ = s.Cancel(ctx, id)
				case 4:
					_ = s.Delete(ctx, id)
				case 5:
					_, _ = s.RemoveExpired(ctx, engine.RetainRequest{TerminalBefore: oldest, Limit: 5})
				}
			}
		}()
	}
	for trav := range o.modelTraversals() {
		req := randReq()
		req.IncludeTotalSize = rng.IntN(2) == 0
		if req.IncludeTotalSize && rng.IntN(2) == 0 {
			req.PageSize = 100
		}
		seen := map[a2a.TaskID]bool{}
		var last *engine.Cursor
		for {
			resp, err := s.List(ctx, &req)
			if err != nil {
				close(stop)
				wg.Wait()
				t.Fatalf("seed %d traversal %d: %v", seed, trav, err)
			}
			// L8: a first page that ends the traversal holds every match
			// its total counts, read from one view.
			if req.IncludeTotalSize && req.PageToken == "" && resp.NextPageToken == "" && resp.TotalSize != len(resp.Tasks) {
				t.Errorf("seed %d traversal %d %+v: one-page total %d, page holds %d", seed, trav, req, resp.TotalSize, len(resp.Tasks))
			}
			for i, tk := range resp.Tasks {
				c := resp.TaskCursors[i]
				if last != nil && !(c.UpdatedAt < last.UpdatedAt || c.UpdatedAt == last.UpdatedAt && c.ID < last.ID) {
					t.Errorf("seed %d traversal %d %+v: cursor %+v not after %+v", seed, trav, req, c, *last)
				}
				last = &c
				if seen[tk.ID] && stable[tk.ID] != nil { // a volatile task may be deleted and created again behind the boundary (L7)
					t.Errorf("seed %d traversal %d: %q twice", seed, trav, tk.ID)
				}
				seen[tk.ID] = true
				if m := stable[tk.ID]; m != nil {
					if md, _ := tk.Metadata["text"].(string); req.Projection == engine.ProjectionFull && !strings.Contains(string(m.data), md) {
						t.Errorf("seed %d: stable task %q read back with other bytes", seed, tk.ID)
					}
				}
			}
			if resp.NextPageToken == "" {
				break
			}
			req.PageToken = resp.NextPageToken
		}
		for id, m := range stable {
			if matchModel(req, id, m) && !seen[id] {
				t.Errorf("seed %d traversal %d %+v: stable task %q missed", seed, trav, req, id)
			}
		}
		if t.Failed() {
			break
		}
	}
	close(stop)
	wg.Wait()
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("seed %d: invariants after the concurrent phase: %v", seed, err)
	}
	for id, m := range stable {
		rec, err := s.Get(ctx, id)
		data, _ := json.Marshal(rec.Task)
		if err != nil || !bytes.Equal(data, m.data) || rec.Cursor.UpdatedAt != m.at {
			t.Fatalf("seed %d: stable task %q changed: %v", seed, id, err)
		}
	}
}
