package memstore

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

// modelTask is what a map model keeps of a task: its JSON, owner,
// context, state and cursor.
type modelTask struct {
	data  []byte
	owner string
	ctx   string
	state a2a.TaskState
	at    int64
	rev   int64
}

// TestSlabModelInterleaved (review rev14-C) interleaves creates, replaces
// that grow and shrink bodies (some past largeRecord), appends, cancels,
// deletes and retention sweeps on a store whose slab keeps compacting,
// with owners, contexts and states, and after each step checks
// CheckInvariants, every task read back (Get) against a map model, and a
// random filtered traversal plus its total against a recount of the model.
// Meanwhile (second phase) traversals run concurrently with writers that
// touch only "volatile" tasks: every "stable" task matching the filter must
// appear exactly once (L7).
func TestSlabModelInterleaved(t *testing.T) {
	t.Run("plain", func(t *testing.T) { runSlabModel(t, New) })
	t.Run("colliding", func(t *testing.T) { runSlabModel(t, func(o Options) *Store { return NewColliding(o, 16) }) })
	t.Run("idsInRecords", func(t *testing.T) { runSlabModel(t, NewIDsInRecords) })
}

func runSlabModel(t *testing.T, mk func(Options) *Store) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	var now atomic.Int64
	now.Store(1_000_000)
	s := mk(Options{Log: true, Clock: func() int64 { return now.Load() }})
	model := map[a2a.TaskID]*modelTask{}
	owners := []string{"", "alice", "bob", "Alice"}
	ctxs := []string{"c1", "c2", "", "c\x00"}
	var ids []a2a.TaskID
	for i := range 120 {
		id := fmt.Sprintf("t%03d", i)
		switch i % 5 {
		case 1:
			id += strings.Repeat("L", idInline) // in the record
		case 2:
			id += strings.Repeat("l", idInline-len(id)) // exactly inline
		case 3:
			id = strings.ToUpper(id) + "\x00"
		}
		ids = append(ids, a2a.TaskID(id))
	}
	nonTerminal := []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired}
	allStates := append(slices.Clone(nonTerminal), a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected)
	seq := 0
	body := func() string {
		n := rng.IntN(6000)
		switch rng.IntN(40) {
		case 0:
			n = largeRecord + rng.IntN(largeRecord)
		case 1, 2, 3:
			n = rng.IntN(40)
		}
		seq++
		return fmt.Sprintf("%d-", seq) + strings.Repeat(string(rune('a'+rng.IntN(26))), n)
	}
	newTask := func(id a2a.TaskID) *a2a.Task {
		ts := time.UnixMicro(int64(rng.IntN(5000))).UTC()
		return &a2a.Task{ID: id, ContextID: ctxs[rng.IntN(len(ctxs))],
			Status:   a2a.TaskStatus{State: allStates[rng.IntN(len(allStates))], Timestamp: &ts},
			Metadata: map[string]any{"text": body()}}
	}
	keep := func(id a2a.TaskID, owner string, rec engine.Record) {
		data, err := json.Marshal(rec.Task)
		if err != nil {
			t.Fatal(err)
		}
		model[id] = &modelTask{data: data, owner: owner, ctx: rec.Task.ContextID, state: rec.Task.Status.State, at: rec.Cursor.UpdatedAt, rev: rec.Revision}
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
			req.Status = allStates[rng.IntN(len(allStates))]
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
	matchModel := func(req engine.ListRequest, id a2a.TaskID, m *modelTask) bool {
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

	for step := range 1200 {
		if rng.IntN(3) != 0 {
			now.Add(rng.Int64N(3) - 0) // often equal times
		} else if rng.IntN(10) == 0 {
			now.Add(-int64(rng.IntN(80)))
		}
		id := ids[rng.IntN(len(ids))]
		m := model[id]
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
			delete(model, id)
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
			for id, m := range model {
				if m.state.Terminal() && m.at < before {
					delete(model, id)
				}
			}
		default:
		}

		if err := s.CheckInvariants(); err != nil {
			fatal(step, "invariants: %v", err)
		}
		// Every task reads back as last written; missing ones are missing.
		for _, id := range ids {
			m := model[id]
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
		for id, m := range model {
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
				m := model[tk.ID]
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
	for _, m := range model {
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
	for id := range model {
		if log, err := s.ReadLog(ctx, id, 0, 1000); err != nil || len(log) != 0 {
			t.Fatalf("seed %d: task %q keeps %d log entries after a full trim (%v)", seed, id, len(log), err)
		}
	}

	// Phase 2: concurrent traversals against writers touching only
	// volatile tasks.
	stable := map[a2a.TaskID]*modelTask{}
	var volatile []a2a.TaskID
	for _, id := range ids {
		if m := model[id]; m != nil && rng.IntN(2) == 0 {
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
					text = strings.Repeat("V", largeRecord+1)
				}
				tk := &a2a.Task{ID: id, ContextID: ctxs[r.IntN(len(ctxs))], Status: a2a.TaskStatus{State: allStates[r.IntN(len(allStates))]}, Metadata: map[string]any{"text": text}}
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
	for trav := range 150 {
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
