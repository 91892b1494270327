package taskiter_test

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/taskiter"
)

// fill stores five tasks in two contexts at times 1..5 µs.
func fill(s engine.Store) {
	for i := range 5 {
		task := &a2a.Task{
			ID:        a2a.TaskID(fmt.Sprintf("task-%d", i)),
			ContextID: []string{"red", "blue"}[i%2],
			Status:    a2a.TaskStatus{State: a2a.TaskStateCompleted},
		}
		if _, err := s.Create(context.Background(), task); err != nil {
			panic(err)
		}
	}
}

// A traversal over anything with a ListTasks method — here the a2a-go task
// store adapter in process; an *a2aclient.Client works the same over any
// transport. Pages are fetched as the loop needs them, two tasks at a time.
func ExampleAll() {
	var now int64
	store := memstore.New(memstore.Options{Clock: func() int64 { now++; return now }})
	fill(store)
	lister := taskiter.ListerFunc(a2aserver.TaskStore(store).List)

	for task, err := range taskiter.All(context.Background(), lister, &a2a.ListTasksRequest{PageSize: 2}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(task.ID, task.ContextID)
	}
	// Output:
	// task-4 red
	// task-3 blue
	// task-2 red
	// task-1 blue
	// task-0 red
}

// Filters stay on every page; only the token changes.
func ExampleFromStore() {
	var now int64
	store := memstore.New(memstore.Options{Clock: func() int64 { now++; return now }})
	fill(store)

	for task, err := range taskiter.FromStore(context.Background(), store, engine.ListRequest{ContextID: "blue", PageSize: 1}) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(task.ID)
	}
	// Output:
	// task-3
	// task-1
}

// Listing every task of a context from a remote agent, over whichever
// transport the client picked from the agent card.
func ExampleAll_client() {
	ctx := context.Background()
	card := &a2a.AgentCard{SupportedInterfaces: []*a2a.AgentInterface{
		a2a.NewAgentInterface("http://127.0.0.1:8080/jsonrpc", a2a.TransportProtocolJSONRPC),
	}}
	client, err := a2aclient.NewFromCard(ctx, card)
	if err != nil {
		panic(err)
	}
	defer client.Destroy()

	n := 0
	for task, err := range taskiter.All(ctx, client, &a2a.ListTasksRequest{ContextID: "ctx-1", Status: a2a.TaskStateCompleted}) {
		if err != nil {
			fmt.Println("list:", err)
			return
		}
		_ = task
		n++
	}
	fmt.Println(n, "completed tasks")
}
