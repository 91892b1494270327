package tasklog_test

import (
	"context"
	"fmt"
	"log"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/tasklog"
)

// A subscriber's view of one task (K7): every revision's entry, in order,
// from the revision it last saw; Next waits for the writer.
func ExampleTail() {
	store := memstore.New(memstore.Options{Log: true})
	defer store.Close()
	ctx := context.Background()
	task := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	if _, err := store.Create(ctx, task); err != nil {
		log.Fatal(err)
	}

	tail := tasklog.NewTail(store, "t1", 0, 0)
	defer tail.Close()
	go func() { // the agent, writing later
		task.Status.State = a2a.TaskStateCompleted
		if _, err := store.Replace(ctx, task, 1); err != nil {
			log.Print(err)
		}
	}()
	for range 2 {
		e, err := tail.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Revision, e.State)
	}
	// Output:
	// 1 TASK_STATE_SUBMITTED
	// 2 TASK_STATE_COMPLETED
}
