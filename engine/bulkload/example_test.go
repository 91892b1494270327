package bulkload_test

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/bulkload"
	"github.com/a2astore/a2astore/engine/memstore"
)

// ExampleLoad fills a store with 2,500 tasks in five contexts, one in
// three owned by alice, then runs the same load again: the second finds
// every task and writes none (a stopped load is completed the same way).
func ExampleLoad() {
	ctx := context.Background()
	s := memstore.New(memstore.Options{})
	defer s.Close()
	cfg := bulkload.Config{
		N: 2500,
		Task: func(i int) (*a2a.Task, string) {
			t := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("task-%05d", i)), ContextID: fmt.Sprintf("ctx-%d", i%5),
				Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
			if i%3 == 0 {
				return t, "alice"
			}
			return t, ""
		},
	}
	for range 2 {
		res, err := bulkload.Load(ctx, s, cfg)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d written, %d found\n", res.Written, res.Found) // res.Path: import, or create on a store without an Importer
	}
	resp, err := s.List(ctx, &engine.ListRequest{PageSize: 1, Owner: "alice", IncludeTotalSize: true})
	if err != nil {
		panic(err)
	}
	fmt.Println("alice's tasks:", resp.TotalSize)
	// Output:
	// 2500 written, 0 found
	// 0 written, 2500 found
	// alice's tasks: 834
}
