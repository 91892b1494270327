package authz_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
)

// TestCrossOwnerProbes: under OwnerPolicy, bob probes alice's tasks (and
// IDs that differ from them only by case, a trailing NUL or a Unicode
// normalization) through every method and parameter, conditional writes
// at several revisions included: each answer must be exactly the answer
// for an ID nobody holds (A6), lists and totals must show only bob's
// tasks whatever filters and tokens (alice's, forged, replayed under other
// filters) are combined (A1, A2, L5, T7), and alice's tasks must be
// unchanged at the end (A6). The seed is logged and set with -authz.seed.
func TestCrossOwnerProbes(t *testing.T) {
	seed := seedValue(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	c := storetest.NewManualClock(1_000_000)
	mem := memstore.New(memstore.Options{Clock: c.Now})
	d := authz.New(mem, authz.OwnerPolicy{})
	alice := authz.WithCaller(context.Background(), "alice")
	bob := authz.WithCaller(context.Background(), "bob")
	aliceIDs := []a2a.TaskID{"T1", "caf\u00e9", "x\x00y", "shared"}
	bobIDs := []a2a.TaskID{"t1", "cafe\u0301", "x", "T1\x00"}
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateInputRequired, a2a.TaskStateWorking}
	for i, id := range aliceIDs {
		c.Advance(1)
		if _, err := d.Create(alice, &a2a.Task{ID: id, ContextID: "ctx", Status: a2a.TaskStatus{State: states[i]}}); err != nil {
			t.Fatal(err)
		}
		c.Advance(1)
		if _, err := d.Create(bob, &a2a.Task{ID: bobIDs[i], ContextID: []string{"ctx", "other"}[i%2], Status: a2a.TaskStatus{State: states[(i+1)%4]}}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[a2a.TaskID]engine.Record{}
	for _, id := range aliceIDs {
		rec, err := mem.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = rec
	}
	msg := &a2a.Message{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}
	probe := func(id a2a.TaskID) []string {
		var out []string
		add := func(what string, err error) {
			out = append(out, fmt.Sprintf("%s: %v / nf=%v", what, err, errors.Is(err, engine.ErrNotFound)))
		}
		_, err := d.Get(bob, id)
		add("get", err)
		_, err = d.Cancel(bob, id)
		add("cancel", err)
		for _, rev := range []int64{0, 1, 2, 99} {
			_, err = d.CancelIf(bob, id, rev)
			add(fmt.Sprint("cancelif", rev), err)
			_, err = d.AppendHistoryIf(bob, id, msg, rev)
			add(fmt.Sprint("appendif", rev), err)
			_, err = d.Replace(bob, &a2a.Task{ID: id, ContextID: "ctx", Status: a2a.TaskStatus{State: a2a.TaskStateFailed}}, rev)
			add(fmt.Sprint("replace", rev), err)
			err = d.DeleteIf(bob, id, rev)
			add(fmt.Sprint("deleteif", rev), err)
		}
		_, err = d.AppendHistory(bob, id, msg)
		add("append", err)
		err = d.Delete(bob, id)
		add("delete", err)
		return out
	}
	missing := probe("nobody-has-this")
	for _, id := range aliceIDs {
		got := probe(id)
		for i := range got {
			if got[i] != missing[i] {
				t.Errorf("bob on alice's %q: %s; on a missing ID: %s", id, got[i], missing[i])
			}
		}
	}
	// Tokens: alice's traversal's tokens, forged cursors at and around
	// alice's tasks, replayed under other filters.
	var tokens []string
	req := engine.ListRequest{PageSize: 1}
	for {
		resp, err := d.List(alice, &req)
		if err != nil {
			t.Fatal(err)
		}
		for _, cur := range resp.TaskCursors {
			tokens = append(tokens, engine.EncodeToken(cur), engine.EncodeToken(engine.Cursor{UpdatedAt: cur.UpdatedAt + 1, ID: cur.ID}),
				engine.EncodeToken(engine.Cursor{UpdatedAt: cur.UpdatedAt, ID: cur.ID + "\x00"}))
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	tokens = append(tokens, "")
	bobSet := map[a2a.TaskID]bool{}
	for _, id := range bobIDs {
		bobSet[id] = true
	}
	ctxs := []string{"", "ctx", "other", "nope"}
	sts := []a2a.TaskState{"", a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateInputRequired}
	for range 400 {
		req := engine.ListRequest{
			PageSize:         1 + rng.IntN(3),
			PageToken:        tokens[rng.IntN(len(tokens))],
			ContextID:        ctxs[rng.IntN(len(ctxs))],
			Status:           sts[rng.IntN(len(sts))],
			IncludeTotalSize: rng.IntN(2) == 0,
		}
		if rng.IntN(4) == 0 {
			req.Owner = []string{"bob", "alice", "Bob"}[rng.IntN(3)]
		}
		if rng.IntN(3) == 0 {
			req.Projection = engine.ProjectionLight
		}
		// The total bob may see: his tasks matching the filters.
		want := 0
		if req.Owner == "" || req.Owner == "bob" {
			for i, id := range bobIDs {
				_ = id
				if (req.ContextID == "" || req.ContextID == []string{"ctx", "other"}[i%2]) && (req.Status == "" || req.Status == states[(i+1)%4]) {
					want++
				}
			}
		}
		resp, err := d.List(bob, &req)
		if err != nil {
			t.Fatalf("list %+v: %v", req, err)
		}
		for _, tk := range resp.Tasks {
			if !bobSet[tk.ID] {
				t.Fatalf("list %+v shows bob task %q", req, tk.ID)
			}
		}
		if req.IncludeTotalSize && resp.TotalSize != want {
			t.Fatalf("list %+v: total %d, bob has %d matching", req, resp.TotalSize, want)
		}
	}
	for _, id := range aliceIDs {
		rec, err := mem.Get(context.Background(), id)
		if err != nil || rec.Revision != before[id].Revision || rec.Cursor != before[id].Cursor {
			t.Errorf("alice's %q changed by bob's probes: %v %+v", id, err, rec)
		}
	}
}
