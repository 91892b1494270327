package pebblestore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pebblestore"
)

// A paginated traversal: copy NextPageToken into the next request until it
// is empty.
func Example() {
	var now int64
	s, err := pebblestore.Open("db", pebblestore.Options{
		FS:    vfs.NewMem(), // nil: the disk
		Clock: func() int64 { now++; return now },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		t := &a2a.Task{ID: a2a.TaskID(id), ContextID: "chat", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		if _, err := s.Create(ctx, t); err != nil {
			log.Fatal(err)
		}
	}
	req := &engine.ListRequest{ContextID: "chat", PageSize: 2, IncludeTotalSize: true}
	for {
		resp, err := s.List(ctx, req)
		if err != nil {
			log.Fatal(err)
		}
		for _, t := range resp.Tasks {
			fmt.Print(t.ID, " ")
		}
		fmt.Printf("(total %d)\n", resp.TotalSize)
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	// Output:
	// e d (total 5)
	// c b (total 5)
	// a (total 5)
}
