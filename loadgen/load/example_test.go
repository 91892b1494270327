package load_test

import (
	"context"
	"fmt"
	"log"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/loadgen/load"
)

// A short run of the default mix against a store of your own, with the
// live-traversal checks (L7) on: what `go run ./loadgen` does with its
// defaults, smaller. res.WriteTable(os.Stdout) prints loadgen's table.
func ExampleRun() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	res, err := load.Run(context.Background(), load.Config{
		Store:       store,
		Concurrency: 2,
		Ops:         300,
		Initial:     100,
		Seed:        42,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := res.Err(); err != nil { // a violation or an internal error
		log.Fatal(err)
	}
	fmt.Println(res.Workload, res.Total.Count, "operations,", res.ViolationCount, "violations")
	// Output:
	// traversal-under-churn 300 operations, 0 violations
}
