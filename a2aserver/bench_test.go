package a2aserver

import (
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
)

// BenchmarkList measures what the adapter and the metrics decorator add to
// one 50-task page of the in-memory store (total included, as the adapter
// always asks for it).
func BenchmarkList(b *testing.B) {
	store := memstore.New(memstore.Options{})
	for i := range 10000 {
		task := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("task-%05d", i)), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		if _, err := store.Create(b.Context(), task); err != nil {
			b.Fatal(err)
		}
	}
	metered := storemetrics.New(store, storemetrics.Options{Backend: "mem"})
	b.Run("backend=mem/layer=engine/page=50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := store.List(b.Context(), &engine.ListRequest{PageSize: 50, IncludeTotalSize: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backend=mem/layer=metrics/page=50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := metered.List(b.Context(), &engine.ListRequest{PageSize: 50, IncludeTotalSize: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, s := range map[string]engine.Store{"adapter": store, "adapter+metrics": metered} {
		ts := TaskStore(s)
		b.Run("backend=mem/layer="+name+"/page=50", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ts.List(b.Context(), &a2a.ListTasksRequest{PageSize: 50}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
