package pgcluster_test

import (
	"context"
	"iter"
	"log"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/pgcluster"
	"github.com/a2astore/a2astore/pgstore"
)

// One instance of an a2a-go service in cluster mode: run the same program
// on N hosts against one database, behind any load balancer. The task
// store is pgstore (through a2aserver.TaskStore); pgcluster adds the work
// queue and the event queue on the same pool.
func Example() {
	ctx := context.Background()
	// The store keeps the task log and notifies the cluster's channel.
	store, err := pgstore.Open(ctx, "postgres://a2a@db/a2a", pgcluster.StoreOptions(pgstore.Options{}))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	tasks := a2aserver.TaskStore(store)
	cluster, err := pgcluster.New(ctx, store.Pool(), pgcluster.Options{TaskStore: tasks, Log: store})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close() // before the store closes the pool
	handler, err := a2aserver.SubscribeFromLog(a2asrv.NewHandler(echoAgent{}, a2asrv.WithClusterMode(a2asrv.ClusterConfig{
		QueueManager: cluster.QueueManager(),
		WorkQueue:    cluster.WorkQueue(),
		TaskStore:    tasks,
	})), tasks, store, 0)
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe(":8080", a2asrv.NewJSONRPCHandler(handler)))
}

// echoAgent completes every task it is given.
type echoAgent struct{}

func (echoAgent) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (echoAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}
