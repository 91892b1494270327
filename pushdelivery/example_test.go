package pushdelivery_test

import (
	"context"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/pushdelivery"
)

// A webhook registered through the ConfigStore, then one round of a
// worker: claim the due record, deliver the log entries after Delivered
// (here: pretend), commit the new cursor.
func Example() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	outbox := pushdelivery.NewMemory(store, pushdelivery.LocalOptions{})
	configs := pushdelivery.NewConfigStore(outbox, store)

	// The client registers a webhook on a task not written yet: its
	// cursor starts at 0, so it gets every event of the task.
	cfg, err := configs.Save(ctx, "task-1", &a2a.PushConfig{ID: "hook", URL: "https://hook.example/a2a"})
	if err != nil {
		panic(err)
	}
	fmt.Println("saved", cfg.ID)

	// The agent writes the task; the worker hears of it and touches it.
	task := &a2a.Task{ID: "task-1", ContextID: "ctx", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if _, err := store.Create(ctx, task); err != nil {
		panic(err)
	}
	outbox.Touch("task-1")

	lease, err := outbox.Claim(ctx, time.Now(), nil)
	if err != nil || lease == nil {
		panic(fmt.Sprint("nothing claimed: ", err))
	}
	r := lease.Record()
	fmt.Printf("deliver revisions %d..%d of %s to %s\n", r.Delivered+1, lease.Revision(), r.TaskID, r.Dest)
	r.Delivered = lease.Revision()
	if err := lease.Commit(ctx, r); err != nil {
		panic(err)
	}
	next, _ := outbox.Claim(ctx, time.Now(), nil)
	fmt.Println("due after commit:", next != nil)
	// Output:
	// saved hook
	// deliver revisions 1..1 of task-1 to https://hook.example:443
	// due after commit: false
}
