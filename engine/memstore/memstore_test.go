package memstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/ownercost"
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
// owner present (ownercost.Check); a total by owner, context and state
// scans the owner's tasks in the context.
func TestOwnerPagesReadOnlyTheOwner(t *testing.T) {
	var now int64
	s := memstore.New(memstore.Options{Clock: func() int64 { return now }})
	ownercost.Check(t, s, func(t testing.TB, owner string, tasks []*a2a.Task, at func(int) int64) {
		for i, task := range tasks {
			now = at(i)
			if _, err := s.CreateOwned(context.Background(), task, owner); err != nil {
				t.Fatal(err)
			}
		}
	}, 150)
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
