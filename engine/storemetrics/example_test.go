package storemetrics_test

import (
	"context"
	"fmt"
	"log"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
)

// Metrics are a decorator: wrap the store once, register the wrapper, and
// use it where the store was used (a2aserver.TaskStore(m) in a server).
func Example() {
	store := memstore.New(memstore.Options{})
	m := storemetrics.New(store, storemetrics.Options{Backend: "mem"})
	defer m.Close() // closes the store it wraps
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	ctx := context.Background()
	task := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
	if _, err := m.Create(ctx, task); err != nil {
		log.Fatal(err)
	}
	_, err := m.Get(ctx, "missing")
	fmt.Println(err != nil)

	families, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "a2astore_store_operation_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			fmt.Println(labels["operation"], labels["outcome"], s.GetHistogram().GetSampleCount())
		}
	}
	// Output:
	// true
	// create ok 1
	// get not_found 1
}
