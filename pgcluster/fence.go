package pgcluster

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// leaseKey is the context key of the execution's work item (*message),
// set on the execution's context by the work queue.
type leaseKey struct{}

// FenceTaskStore returns ts for a2asrv.ClusterConfig.TaskStore with the
// writes of executions fenced by their lease (K4): a Create or Update
// made by an execution of this instance whose lease it no longer holds —
// handed over (HandOver), or its lease deadline passed without a
// successful heartbeat, as after a stall longer than the lease timeout,
// when another instance may already be running the task — fails with
// ErrLeaseLost and writes nothing. Without it such an execution writes
// the task (and, once it notices, FAILED) until its next heartbeat
// fails, under the instance that took the task over. Calls outside an
// execution (the frontend's reads, cancelations) pass through.
//
// The check is local (the deadline is LeaseTimeout after the claim or
// heartbeat statement was sent, never later than the database's expiry),
// so it costs no query; a write already in flight when the deadline
// passes is not stopped.
func (c *Cluster) FenceTaskStore(ts taskstore.Store) taskstore.Store {
	return fencedStore{Store: ts}
}

type fencedStore struct{ taskstore.Store }

func fence(ctx context.Context) error {
	if m, ok := ctx.Value(leaseKey{}).(*message); ok && !m.holds() {
		return fmt.Errorf("pgcluster: write of an execution whose lease this instance no longer holds: %w", ErrLeaseLost)
	}
	return nil
}

// Create implements taskstore.Store.
func (s fencedStore) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	if err := fence(ctx); err != nil {
		return taskstore.TaskVersionMissing, err
	}
	return s.Store.Create(ctx, task)
}

// Update implements taskstore.Store.
func (s fencedStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if err := fence(ctx); err != nil {
		return taskstore.TaskVersionMissing, err
	}
	return s.Store.Update(ctx, req)
}
