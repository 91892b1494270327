package storetest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storetest"
)

// A backend runs the suite from its own _test.go file, as
// func TestConformance(t *testing.T): every clause as a subtest on a fresh
// store from Open, the model-based and concurrent tests, and the owner,
// conditional-write, retention and log clauses when the store has those
// parts. (This example only compiles: Run needs the test's t.)
func ExampleRun() {
	conformance := func(t *testing.T) {
		storetest.Run(t, storetest.Harness{
			Open: func(t testing.TB, clock engine.Clock) engine.Store {
				s := memstore.New(memstore.Options{Clock: clock})
				t.Cleanup(func() { s.Close() })
				return s
			},
			ClockInjection: true, // the store reads time only from clock
			BinaryIDs:      true, // IDs may hold NUL and invalid UTF-8
		})
	}
	_ = conformance
}

// A clock the test drives, here going backward: the store still moves the
// task's time forward by 1 µs (S4).
func ExampleManualClock() {
	clock := storetest.NewManualClock(1000)
	store := memstore.New(memstore.Options{Clock: clock.Now})
	defer store.Close()
	ctx := context.Background()
	task := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	rec, err := store.Create(ctx, task)
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Cursor.UpdatedAt)
	clock.Set(500)
	if rec, err = store.Replace(ctx, task, 0); err != nil {
		panic(err)
	}
	fmt.Println(rec.Cursor.UpdatedAt)
	// Output:
	// 1000
	// 1001
}
