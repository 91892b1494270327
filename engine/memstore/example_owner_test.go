package memstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
)

// Task owners (engine.OwnerStore, O1–O6): the owner is recorded beside the
// task, never in its metadata, and an owner's page and total read only
// that owner's index and counters.
func ExampleStore_CreateOwned() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	defer store.Close()
	for i, owner := range []string{"alice", "bob", "alice"} {
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprint("task-", i)), ContextID: "ctx-1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		rec, err := store.CreateOwned(ctx, task, owner) // rec.Owner == owner, in every Record from now on
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(rec.Task.ID, rec.Owner)
	}
	resp, err := store.List(ctx, &engine.ListRequest{Owner: "alice", ContextID: "ctx-1", IncludeTotalSize: true})
	if err != nil {
		log.Fatal(err)
	}
	// resp.Tasks are alice's only; resp.TaskOwners[i] is the owner of resp.Tasks[i]
	fmt.Println(resp.TotalSize, resp.TaskOwners)
	// Output:
	// task-0 alice
	// task-1 bob
	// task-2 alice
	// 2 [alice alice]
}
