package pgcluster

import (
	"context"
	"errors"
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
//
// It also refuses, with errStepFailed, the FAILED that a2a-go writes of
// its own when an execution's step cannot be processed — its store write
// or push lookup failed, as on a connection PostgreSQL dropped at a
// restart (K6): a FAILED task saved for an event that is not itself a
// FAILED status. a2a-go writes that FAILED without a reason and reports
// the execution as finished, so the work item would never be retried.
// Refused, the execution ends with the error and its work item is
// retried (the stored task resumed); after Options.MaxAttempts the task
// is FAILED with a reason (giveUp). A FAILED the agent emits passes, and
// so does the FAILED of an execution whose agent returned an error
// (a2a-go saves it with no event).
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
	if failsStep(ctx, req) {
		return taskstore.TaskVersionMissing, errStepFailed
	}
	return s.Store.Update(ctx, req)
}

// errStepFailed is the error of an execution whose step a2a-go could not
// process (FenceTaskStore): the work item is retried.
var errStepFailed = errors.New("pgcluster: an execution step failed (store or push lookup); the execution is retried instead of failing its task without a reason")

// failsStep reports whether req is a2a-go failing an execution's task
// because a step could not be processed: in an execution, a FAILED task
// saved for an event (the step's) that is not a FAILED status itself.
func failsStep(ctx context.Context, req *taskstore.UpdateRequest) bool {
	if _, ok := ctx.Value(leaseKey{}).(*message); !ok || req.Event == nil || req.Task == nil ||
		req.Task.Status.State != a2a.TaskStateFailed {
		return false
	}
	switch ev := req.Event.(type) {
	case *a2a.TaskStatusUpdateEvent:
		return ev.Status.State != a2a.TaskStateFailed
	case *a2a.Task:
		return ev.Status.State != a2a.TaskStateFailed
	}
	return true
}
