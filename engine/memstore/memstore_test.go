package memstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
)

func fill(t testing.TB, s *memstore.Store, n, contexts int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		task := &a2a.Task{
			ID:        a2a.TaskID(fmt.Sprintf("task-%06d", i)),
			ContextID: fmt.Sprintf("ctx-%d", i%contexts),
			Status:    a2a.TaskStatus{State: a2a.TaskStateWorking},
		}
		if _, err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPageVisitsPageSizePlusOne checks C2: an unfiltered page, and a page
// filtered by context alone, visit exactly PageSize+1 index entries, from the
// start and from a boundary, whatever the number of tasks.
func TestPageVisitsPageSizePlusOne(t *testing.T) {
	var now int64
	s := memstore.New(memstore.Options{Clock: func() int64 { now += 3; return now / 7 }}) // many equal times
	fill(t, s, 5000, 10)
	ctx := context.Background()
	for _, req := range []engine.ListRequest{
		{PageSize: 50}, {PageSize: 1}, {PageSize: 100, ContextID: "ctx-3"}, {PageSize: 7, ContextID: "ctx-9"},
	} {
		token := ""
		for page := 0; page < 4; page++ {
			req.PageToken = token
			resp, err := s.List(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Tasks) != req.PageSize || resp.NextPageToken == "" {
				t.Fatalf("%+v: got %d tasks, token %q", req, len(resp.Tasks), resp.NextPageToken)
			}
			if st := resp.Stats; st.Examined != req.PageSize+1 {
				t.Fatalf("%+v page %d: examined %d entries, want %d", req, page, st.Examined, req.PageSize+1)
			}
			token = resp.NextPageToken
		}
	}
}

// TestTotalsFromCounters checks that totals of every counter-backed filter
// shape inspect no entry, and that the status-timestamp total scans.
func TestTotalsFromCounters(t *testing.T) {
	s := memstore.New(memstore.Options{})
	fill(t, s, 300, 3)
	ctx := context.Background()
	if _, err := s.Cancel(ctx, "task-000000"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req  engine.ListRequest
		want int
	}{
		{engine.ListRequest{}, 300},
		{engine.ListRequest{ContextID: "ctx-0"}, 100},
		{engine.ListRequest{Status: a2a.TaskStateCanceled}, 1},
		{engine.ListRequest{Status: a2a.TaskStateWorking, ContextID: "ctx-0"}, 99},
		{engine.ListRequest{ContextID: "nope"}, 0},
	} {
		c.req.IncludeTotalSize = true
		resp, err := s.List(ctx, &c.req)
		if err != nil {
			t.Fatal(err)
		}
		if st := resp.Stats; resp.TotalSize != c.want || st.Counted != 0 || !st.TotalComputed {
			t.Errorf("%+v: total %d (want %d), counted %d", c.req, resp.TotalSize, c.want, st.Counted)
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Example shows the traversal loop: start with an empty token, copy
// NextPageToken into the next request, stop when it is empty (T1).
func Example() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	defer store.Close()
	for i := range 5 {
		_, err := store.Create(ctx, &a2a.Task{
			ID:        a2a.TaskID(fmt.Sprintf("task-%d", i)),
			ContextID: "demo",
			Status:    a2a.TaskStatus{State: a2a.TaskStateSubmitted},
		})
		if err != nil {
			panic(err)
		}
	}
	req := &engine.ListRequest{ContextID: "demo", PageSize: 2}
	for {
		resp, err := store.List(ctx, req)
		if err != nil {
			panic(err)
		}
		for _, t := range resp.Tasks {
			fmt.Println(t.ID)
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	// Unordered output:
	// task-0
	// task-1
	// task-2
	// task-3
	// task-4
}

// TestOwnerPagesReadOnlyTheOwner checks O6 with 100,000 tasks of another
// owner present: an owner's page, and a page of the owner in a context,
// visit exactly PageSize+1 index entries; an owner filtering by another
// owner's busy context (the timing oracle of a scan) visits none; totals by
// owner, by owner and state, and by owner and context inspect no entry,
// and by owner, context and state only the owner's entries in the context.
func TestOwnerPagesReadOnlyTheOwner(t *testing.T) {
	var now int64
	s := memstore.New(memstore.Options{Clock: func() int64 { now += 3; return now / 7 }}) // many equal times
	ctx := context.Background()
	create := func(id, contextID, owner string, state a2a.TaskState) {
		t.Helper()
		task := &a2a.Task{ID: a2a.TaskID(id), ContextID: contextID, Status: a2a.TaskStatus{State: state}}
		if _, err := s.CreateOwned(ctx, task, owner); err != nil {
			t.Fatal(err)
		}
	}
	const foreign, mine = 100_000, 300
	for i := range foreign {
		create(fmt.Sprintf("bob-%06d", i), "busy", "bob", states[i%2])
		if k := i / (foreign / mine); i%(foreign/mine) == 0 && k < mine {
			contextID := "busy" // alice's first half shares bob's context
			if k >= mine/2 {
				contextID = "alice-only"
			}
			create(fmt.Sprintf("alice-%06d", k), contextID, "alice", states[k%2])
		}
	}
	create("carol-1", "carol-only", "carol", a2a.TaskStateWorking)
	for _, req := range []engine.ListRequest{
		{Owner: "alice", PageSize: 50}, {Owner: "alice", PageSize: 1, Projection: engine.ProjectionLight},
		{Owner: "alice", ContextID: "busy", PageSize: 50}, {Owner: "alice", ContextID: "alice-only", PageSize: 7},
	} {
		token := ""
		for page := 0; page < 2; page++ {
			req.PageToken = token
			resp, err := s.List(ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Tasks) != req.PageSize || resp.NextPageToken == "" || resp.Stats.Examined != req.PageSize+1 {
				t.Fatalf("%+v page %d: %d tasks, token %v, examined %d; want %d, a token, %d", req, page,
					len(resp.Tasks), resp.NextPageToken != "", resp.Stats.Examined, req.PageSize, req.PageSize+1)
			}
			token = resp.NextPageToken
		}
	}
	for _, c := range []struct {
		req              engine.ListRequest
		total, inspected int
	}{
		{engine.ListRequest{Owner: "carol", ContextID: "busy"}, 0, 0}, // another owner's busy context
		{engine.ListRequest{Owner: "nobody"}, 0, 0},
		{engine.ListRequest{Owner: "alice"}, mine, 0},
		{engine.ListRequest{Owner: "alice", Status: states[1]}, mine / 2, 0},
		{engine.ListRequest{Owner: "alice", ContextID: "busy"}, mine / 2, 0},
		{engine.ListRequest{Owner: "alice", ContextID: "busy", Status: states[0]}, mine / 4, mine / 2},
		{engine.ListRequest{Owner: "bob", ContextID: "busy", Status: states[0]}, foreign / 2, foreign}, // scans bob's own
	} {
		c.req.IncludeTotalSize = true
		resp, err := s.List(ctx, &c.req)
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Stats
		if resp.TotalSize != c.total || st.Counted != c.inspected || !st.TotalComputed {
			t.Errorf("%+v: total %d (want %d), counted %d (want %d)", c.req, resp.TotalSize, c.total, st.Counted, c.inspected)
		}
		if c.total == 0 && st.Examined != 0 {
			t.Errorf("%+v: examined %d entries for an empty page", c.req, st.Examined)
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// states are two task states the owner tests alternate.
var states = []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}
