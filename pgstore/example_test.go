package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/pgstore"
)

// A paginated traversal of one context, newest first. (No Output comment:
// it needs a server, named here by A2ASTORE_PG_DSN.)
func ExampleOpen() {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, os.Getenv("A2ASTORE_PG_DSN")+" pool_max_conns=8", pgstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	req := &engine.ListRequest{ContextID: "ctx-1", PageSize: 20}
	for {
		resp, err := s.List(ctx, req)
		if err != nil {
			log.Fatal(err)
		}
		for _, t := range resp.Tasks {
			fmt.Println(t.ID, t.Status.State)
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
}
