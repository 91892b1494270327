package authz_test

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
)

// A store shared by two callers: each creates tasks (the store records the
// creator as owner) and traverses only its own, page by page; each page and
// its total are one read of the store's owner index.
func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	tasks := authz.New(store, authz.OwnerPolicy{})

	alice := authz.WithCaller(context.Background(), "alice")
	bob := authz.WithCaller(context.Background(), "bob")
	for i := range 5 {
		caller := alice
		if i%2 == 1 {
			caller = bob
		}
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprint("task-", i)), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
		if _, err := tasks.Create(caller, task); err != nil {
			panic(err)
		}
	}

	// The traversal loop: copy NextPageToken into the next request until
	// it is empty (T1).
	req := engine.ListRequest{PageSize: 2, IncludeTotalSize: true}
	for {
		page, err := tasks.List(alice, &req)
		if err != nil {
			panic(err)
		}
		for _, t := range page.Tasks {
			fmt.Println(t.ID, "of", page.TotalSize)
		}
		if page.NextPageToken == "" {
			break
		}
		req.PageToken = page.NextPageToken
	}

	// Bob cannot tell alice's task from a missing one (A6).
	_, err := tasks.Get(bob, "task-0")
	_, missing := tasks.Get(bob, "no-such-task")
	fmt.Println(err, err == missing)
	// Unordered output:
	// task-4 of 3
	// task-2 of 3
	// task-0 of 3
	// authz: engine: task not found true
}
