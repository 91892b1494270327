package bench

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// BenchmarkStatusPage is C7's pair: the first page filtered by a rare
// state (0.1 % of the tasks, the oldest: a page of them without a
// status-ordered index walks every other task), alone and with an owner
// (every list under OwnerPolicy), against the unfiltered first page, on
// every backend, named
//
//	BenchmarkStatusPage/backend=B/n=N/filter=none|status|owner+status|context+status
//
// Each size loads its own store: n tasks written by CreateOwned, of 20
// owners in 50 contexts, the first max(n/1000, 1) input-required and the
// rest working or completed. examined/page is what C7 bounds: PageSize+1
// on memory and Pebble (PostgreSQL reports the rows returned; its plans
// are checked by pgstore's TestStatusPlans). Figures for the results page
// come from a quiet machine only.
func BenchmarkStatusPage(b *testing.B) {
	for _, be := range backends {
		b.Run("backend="+be.name, func(b *testing.B) {
			e := be.setup(b)
			for _, n := range sizes() {
				b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
					s := loadStatusFixture(b, e, n)
					for _, f := range []struct {
						name string
						req  engine.ListRequest
					}{
						{"none", engine.ListRequest{}},
						{"status", engine.ListRequest{Status: a2a.TaskStateInputRequired}},
						{"owner+status", engine.ListRequest{Owner: "owner-00", Status: a2a.TaskStateInputRequired}},
						{"context+status", engine.ListRequest{ContextID: "ctx-00", Status: a2a.TaskStateInputRequired}},
					} {
						b.Run("filter="+f.name, func(b *testing.B) {
							benchList(b, s, func(int) *engine.ListRequest { r := f.req; return &r })
						})
					}
				})
			}
		})
	}
}

// loadStatusFixture opens a store of e and loads BenchmarkStatusPage's n
// tasks into it; the store is closed when b ends.
func loadStatusFixture(b *testing.B, e *env, n int) engine.OwnerStore {
	b.Helper()
	st, err := e.open(b, fmt.Sprintf("status_%d", n), nil)
	if err != nil {
		b.Fatal(err)
	}
	if c, ok := st.(io.Closer); ok {
		b.Cleanup(func() { c.Close() })
	}
	s, ok := st.(engine.OwnerStore)
	if !ok {
		b.Fatalf("%T is not an engine.OwnerStore", st)
	}
	rare := max(n/1000, 1)
	ctx := context.Background()
	for i := range n {
		state := a2a.TaskStateWorking
		switch {
		case i < rare:
			state = a2a.TaskStateInputRequired
		case i%3 == 0:
			state = a2a.TaskStateCompleted
		}
		t := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("status-%08d", i)), ContextID: fmt.Sprintf("ctx-%02d", i%50), Status: a2a.TaskStatus{State: state}}
		if _, err := s.CreateOwned(ctx, t, fmt.Sprintf("owner-%02d", i%20)); err != nil {
			b.Fatal(err)
		}
	}
	return s
}
