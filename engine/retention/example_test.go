package retention_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/retention"
)

// One sweep by hand (what a2astore-server -retain-once does): the
// completed task older than the age goes; the young completed task and the
// old unfinished one stay (StuckAge is off).
func ExampleService_Sweep() {
	day := 24 * time.Hour
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := now.Add(-40 * day) // the store's clock: when each task is written
	store := memstore.New(memstore.Options{Clock: func() int64 { return at.UnixMicro() }})
	defer store.Close()
	ctx := context.Background()
	for _, t := range []struct {
		id    a2a.TaskID
		state a2a.TaskState
		age   time.Duration
	}{{"old-done", a2a.TaskStateCompleted, 40 * day}, {"old-working", a2a.TaskStateWorking, 40 * day}, {"new-done", a2a.TaskStateCompleted, day}} {
		at = now.Add(-t.age)
		if _, err := store.Create(ctx, &a2a.Task{ID: t.id, ContextID: "c", Status: a2a.TaskStatus{State: t.state}}); err != nil {
			log.Fatal(err)
		}
	}

	svc, err := retention.New(store, retention.Options{Age: 30 * day, Clock: fixedClock(now)})
	if err != nil {
		log.Fatal(err)
	}
	res, err := svc.Sweep(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("removed", res.Removed)
	page, err := store.List(ctx, &engine.ListRequest{})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range page.Tasks {
		fmt.Println("kept", t.ID)
	}
	// Output:
	// removed 1
	// kept new-done
	// kept old-working
}

// The background service, as a server runs it: sweeps at an interval
// (Age/10, at most a minute) until Close, its metrics registered. With
// several servers on one PostgreSQL database, set Locker to the pgstore
// Store so that one server sweeps at a time.
func ExampleService_Start() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	svc, err := retention.New(store, retention.Options{Age: 30 * 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	prometheus.NewRegistry().MustRegister(svc.Metrics())
	svc.Start()
	defer svc.Close()
}

// fixedClock is a retention.Clock stopped at one instant whose waits end
// at once.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

func (c fixedClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- time.Time(c)
	return ch
}
