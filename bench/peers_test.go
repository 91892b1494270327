package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/tidwall/btree"

	"github.com/a2astore/a2astore/engine"
)

// Peers measured side by side with the stores, on the same fixture, in the
// same process.

// bareItem is what a minimal ordered index must hold to serve a light page.
type bareItem struct {
	at    int64
	id    a2a.TaskID
	ctx   string
	state a2a.TaskState
	ts    time.Time
}

func bareLess(a, b bareItem) bool {
	if a.at != b.at {
		return a.at > b.at
	}
	return strings.Compare(string(a.id), string(b.id)) > 0
}

// BenchmarkPageBaseline is the floor for a light page of 50: a bare
// tidwall/btree of the fixture's keys, seeked from the same random cursors,
// plus the least copying any store must do — 50 fresh light tasks, allocated
// as cheaply as possible (one slice each for tasks, pointers and times). The
// memstore page (BenchmarkPage .../proj=light) is compared with it.
func BenchmarkPageBaseline(b *testing.B) {
	mem := backends[0]
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("backend=btree/op=page/n=%d/page=50/proj=light", n), func(b *testing.B) {
			fx := getFixture(b, mem, n)
			tr := btree.NewBTreeGOptions(bareLess, btree.Options{NoLocks: true})
			for i, t := range fx.tasks {
				c := fx.cursors[len(fx.cursors)-1-i]
				tr.Set(bareItem{c.UpdatedAt, c.ID, t.ContextID, t.Status.State, *t.Status.Timestamp})
			}
			toks := randomTokens(fx, 1024, 7)
			pivots := make([]bareItem, len(toks))
			for i, tok := range toks {
				c, _ := engine.DecodeToken(tok)
				pivots[i] = bareItem{at: c.UpdatedAt, id: c.ID}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tasks := make([]a2a.Task, 0, 50)
				times := make([]time.Time, 0, 50)
				seen := 0
				tr.Ascend(pivots[i%len(pivots)], func(it bareItem) bool {
					seen++
					if seen == 1 && it.at == pivots[i%len(pivots)].at && it.id == pivots[i%len(pivots)].id {
						return true // the boundary itself
					}
					if len(tasks) == 50 {
						return false
					}
					times = append(times, it.ts)
					tasks = append(tasks, a2a.Task{ID: it.id, ContextID: it.ctx,
						Status: a2a.TaskStatus{State: it.state, Timestamp: &times[len(times)-1]}})
					return true
				})
				ptrs := make([]*a2a.Task, len(tasks))
				for j := range tasks {
					ptrs[j] = &tasks[j]
				}
				sink = ptrs
				i++
			}
		})
	}
}

var sink any

// BenchmarkA2AInMemory compares a2a-go's taskstore.InMemory (which filters
// and sorts every task on every call) with memstore on the same request: the
// first page of 50 with its total, whole tasks.
func BenchmarkA2AInMemory(b *testing.B) {
	const n = 100_000
	mem := backends[0]
	b.Run(fmt.Sprintf("backend=a2a-inmemory/op=list-first/n=%d/page=50", n), func(b *testing.B) {
		fx := getFixture(b, mem, n)
		s := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{
			Authenticator: func(context.Context) (string, error) { return "bench", nil },
		})
		ctx := context.Background()
		for _, t := range fx.tasks {
			if _, err := s.Create(ctx, t); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.List(ctx, &a2a.ListTasksRequest{PageSize: 50}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("backend=mem/op=list-first/n=%d/page=50", n), func(b *testing.B) {
		fx := getFixture(b, mem, n)
		benchList(b, fx.store, func(int) *engine.ListRequest {
			return &engine.ListRequest{PageSize: 50, IncludeTotalSize: true, IncludeArtifacts: true}
		})
	})
}
