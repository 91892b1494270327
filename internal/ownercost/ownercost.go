// Package ownercost checks clause O6 on a backend: an owner-scoped page
// and total read only that owner's entries, however many tasks other owners
// have. The memstore and pebblestore tests call Check with 100,000 tasks of
// another owner; ListResponse.Stats says what each call read.
package ownercost

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// Foreign is how many tasks of another owner Check loads.
const Foreign = 100_000

// mine is how many tasks the owner under test has: half in the other
// owner's busy context, half in a context of its own, alternating between
// two states, without status timestamps.
const mine = 300

// Load creates tasks for owner, task i at time at(i) (a clock reading in
// µs); a backend may bypass its write path for speed, not its key layout.
type Load func(t testing.TB, owner string, tasks []*a2a.Task, at func(i int) int64)

// Counted says how many entries a backend's total inspects for owner,
// context and state together: 0 when a counter holds it, or the owner's
// tasks in the context when it scans them.
type Counted int

// Check loads Foreign tasks of owner "bob" in context "busy", 300 of
// "alice" spread among them (half in "busy", half in "alice-only") and one
// of "carol", then checks that alice's pages, alone and with a context,
// examine exactly PageSize+1 entries from the start and from a token; that
// carol filtering by bob's busy context examines and counts nothing (the
// timing oracle of a scan); and that totals by owner, owner+state and
// owner+context inspect no entry, owner+context+state inspects
// ownerContextState entries, and a status-time total only alice's.
func Check(t *testing.T, s engine.OwnerStore, load Load, ownerContextState Counted) {
	ctx := context.Background()
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}
	ts := time.UnixMicro(1000).UTC()
	bob := make([]*a2a.Task, Foreign)
	for i := range bob {
		bob[i] = &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("bob-%06d", i)), ContextID: "busy", Status: a2a.TaskStatus{State: states[i%2], Timestamp: &ts}}
	}
	alice := make([]*a2a.Task, mine)
	for k := range alice {
		contextID := "busy"
		if k >= mine/2 {
			contextID = "alice-only"
		}
		alice[k] = &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("alice-%06d", k)), ContextID: contextID, Status: a2a.TaskStatus{State: states[k%2]}}
	}
	// Many equal times; alice's tasks spread through bob's.
	load(t, "bob", bob, func(i int) int64 { return int64(1 + i/7) })
	load(t, "alice", alice, func(k int) int64 { return int64(1 + k*Foreign/mine/7) })
	load(t, "carol", []*a2a.Task{{ID: "carol-1", ContextID: "carol-only", Status: a2a.TaskStatus{State: states[0]}}}, func(int) int64 { return 1 })

	for _, req := range []engine.ListRequest{
		{Owner: "alice", PageSize: 50}, {Owner: "alice", PageSize: 1, Projection: engine.ProjectionLight},
		{Owner: "alice", ContextID: "busy", PageSize: 50}, {Owner: "alice", ContextID: "alice-only", PageSize: 7},
	} {
		for page := 0; page < 2; page++ {
			resp, err := s.List(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Tasks) != req.PageSize || resp.NextPageToken == "" || resp.Stats.Examined != req.PageSize+1 {
				t.Fatalf("%+v page %d: %d tasks, token %v, examined %d; want %d, a token, %d (O6)", req, page,
					len(resp.Tasks), resp.NextPageToken != "", resp.Stats.Examined, req.PageSize, req.PageSize+1)
			}
			if !slices.Equal(resp.TaskOwners, slices.Repeat([]string{"alice"}, req.PageSize)) {
				t.Fatalf("%+v: owners %q", req, resp.TaskOwners)
			}
			req.PageToken = resp.NextPageToken
		}
	}
	after := ts.Add(-time.Second)
	for _, c := range []struct {
		req              engine.ListRequest
		total, inspected int
		examined         int // at most
	}{
		{engine.ListRequest{Owner: "carol", ContextID: "busy"}, 0, 0, 0}, // another owner's busy context
		{engine.ListRequest{Owner: "nobody"}, 0, 0, 0},
		{engine.ListRequest{Owner: "alice"}, mine, 0, 2},
		{engine.ListRequest{Owner: "alice", Status: states[1]}, mine / 2, 0, mine},
		{engine.ListRequest{Owner: "alice", ContextID: "busy"}, mine / 2, 0, 2},
		{engine.ListRequest{Owner: "alice", ContextID: "busy", Status: states[0]}, mine / 4, int(ownerContextState), mine},
		{engine.ListRequest{Owner: "alice", StatusTimestampAfter: &after}, 0, mine, mine}, // alice's tasks have no timestamp
		{engine.ListRequest{Owner: "carol", ContextID: "busy", StatusTimestampAfter: &after}, 0, 0, 0},
	} {
		c.req.IncludeTotalSize, c.req.PageSize = true, 1
		resp, err := s.List(ctx, &c.req)
		if err != nil {
			t.Fatal(err)
		}
		if st := resp.Stats; resp.TotalSize != c.total || st.Counted != c.inspected || !st.TotalComputed || st.Examined > c.examined {
			t.Errorf("%+v: total %d (want %d), counted %d (want %d), examined %d (want at most %d) (O6)",
				c.req, resp.TotalSize, c.total, st.Counted, c.inspected, st.Examined, c.examined)
		}
	}
}
