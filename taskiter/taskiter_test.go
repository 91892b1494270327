package taskiter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/taskiter"
)

// TestAllCopiesTokensAndFilters (T1): every request after the first carries
// the previous NextPageToken unchanged and the original filters.
func TestAllCopiesTokensAndFilters(t *testing.T) {
	store := memstore.New(memstore.Options{})
	for i := range 23 {
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%02d", i)), ContextID: []string{"a", "b"}[i%2], Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		if _, err := store.Create(t.Context(), task); err != nil {
			t.Fatal(err)
		}
	}
	inner := a2aserver.TaskStore(store)
	var reqs []a2a.ListTasksRequest
	var tokens []string
	lister := taskiter.ListerFunc(func(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
		reqs = append(reqs, *req)
		resp, err := inner.List(ctx, req)
		if err == nil {
			tokens = append(tokens, resp.NextPageToken)
		}
		return resp, err
	})
	orig := &a2a.ListTasksRequest{ContextID: "a", PageSize: 5, HistoryLength: new(0), IncludeArtifacts: true}
	seen := map[a2a.TaskID]bool{}
	for task, err := range taskiter.All(t.Context(), lister, orig) {
		if err != nil {
			t.Fatal(err)
		}
		if seen[task.ID] || task.ContextID != "a" {
			t.Errorf("task %s (context %s) repeated or unfiltered", task.ID, task.ContextID)
		}
		seen[task.ID] = true
	}
	if len(seen) != 12 || len(reqs) != 3 {
		t.Fatalf("saw %d tasks in %d pages, want 12 in 3", len(seen), len(reqs))
	}
	for i, r := range reqs {
		wantTok := ""
		if i > 0 {
			wantTok = tokens[i-1]
		}
		if r.PageToken != wantTok || r.ContextID != "a" || r.PageSize != 5 || r.HistoryLength == nil || *r.HistoryLength != 0 || !r.IncludeArtifacts {
			t.Errorf("request %d = %+v, want filters kept and token %q", i, r, wantTok)
		}
	}
	if orig.PageToken != "" {
		t.Errorf("caller's request was modified: %+v", orig)
	}
}

// TestAllStopsOnErrorAndBreak: an error is yielded once and ends the
// loop; breaking early makes no further calls.
func TestAllStopsOnErrorAndBreak(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	failing := taskiter.ListerFunc(func(context.Context, *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
		calls++
		if calls == 2 {
			return nil, boom
		}
		return &a2a.ListTasksResponse{Tasks: []*a2a.Task{{ID: "x"}}, NextPageToken: fmt.Sprint("tok", calls)}, nil
	})
	var got []error
	n := 0
	for task, err := range taskiter.All(t.Context(), failing, nil) {
		if err != nil {
			got = append(got, err)
			continue
		}
		if task == nil {
			t.Fatal("nil task without error")
		}
		n++
	}
	if n != 1 || len(got) != 1 || !errors.Is(got[0], boom) || calls != 2 {
		t.Errorf("tasks %d, errors %v, calls %d; want 1, [boom], 2", n, got, calls)
	}

	calls = 0
	for range taskiter.All(t.Context(), failing, nil) {
		break
	}
	if calls != 1 {
		t.Errorf("break after the first task made %d calls, want 1", calls)
	}
}

// TestStalledToken: a server that hands back the token it was given would
// loop forever; the traversal reports it instead.
func TestStalledToken(t *testing.T) {
	stuck := taskiter.ListerFunc(func(_ context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
		return &a2a.ListTasksResponse{Tasks: []*a2a.Task{{ID: "x"}}, NextPageToken: "same"}, nil
	})
	var last error
	n := 0
	for _, err := range taskiter.All(t.Context(), stuck, nil) {
		n++
		last = err
	}
	if !errors.Is(last, taskiter.ErrStalledToken) || n != 3 {
		t.Errorf("got %d items ending in %v, want 2 tasks then ErrStalledToken", n, last)
	}
}

// TestFromStoreMatchesWire: the in-process traversal returns the same tasks
// in the same order as the one through the a2a-go adapter.
func TestFromStoreMatchesWire(t *testing.T) {
	store := memstore.New(memstore.Options{})
	for i := range 17 {
		if _, err := store.Create(t.Context(), &a2a.Task{ID: a2a.TaskID(fmt.Sprint("id", i)), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
	var direct, wire []a2a.TaskID
	for task, err := range taskiter.FromStore(t.Context(), store, engine.ListRequest{PageSize: 4}) {
		if err != nil {
			t.Fatal(err)
		}
		direct = append(direct, task.ID)
	}
	for task, err := range taskiter.All(t.Context(), taskiter.ListerFunc(a2aserver.TaskStore(store).List), &a2a.ListTasksRequest{PageSize: 4}) {
		if err != nil {
			t.Fatal(err)
		}
		wire = append(wire, task.ID)
	}
	if len(direct) != 17 || fmt.Sprint(direct) != fmt.Sprint(wire) {
		t.Errorf("direct %v\nwire   %v", direct, wire)
	}
	for _, err := range taskiter.FromStore(t.Context(), store, engine.ListRequest{PageToken: "50"}) {
		if !errors.Is(err, engine.ErrInvalidPageToken) {
			t.Errorf("bad token: %v, want ErrInvalidPageToken", err)
		}
	}
}

// TestWalk: the loop over any page type copies each next token into the
// next call, stops on the empty token, on an error and on a stalled token.
func TestWalk(t *testing.T) {
	type page struct{ n int }
	next := map[string]string{"": "a", "a": "b", "b": ""}
	var asked []string
	var got []int
	for p, err := range taskiter.Walk("", func(tok string) (page, string, error) {
		asked = append(asked, tok)
		return page{len(asked)}, next[tok], nil
	}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.n)
	}
	if fmt.Sprint(asked) != "[ a b]" || fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("asked %q, got pages %v", asked, got)
	}
	boom := errors.New("boom")
	for name, c := range map[string]struct {
		list func(string) (page, string, error)
		want error
	}{
		"error":   {func(string) (page, string, error) { return page{}, "", boom }, boom},
		"stalled": {func(tok string) (page, string, error) { return page{}, "x", nil }, taskiter.ErrStalledToken},
	} {
		var last error
		n := 0
		for _, err := range taskiter.Walk("", c.list) {
			last = err
			if n++; n > 3 {
				t.Fatalf("%s: the walk does not stop", name)
			}
		}
		if !errors.Is(last, c.want) {
			t.Errorf("%s: last error %v, want %v", name, last, c.want)
		}
	}
}
