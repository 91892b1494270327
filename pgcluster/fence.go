package pgcluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
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
// fails, under the instance that took the task over. A cancelation's
// work item is fenced the same way. Calls outside a work item (the
// frontend's reads) pass through.
//
// The check is local (the deadline is LeaseTimeout after the claim or
// heartbeat statement was sent, never later than the database's expiry,
// measured on the monotonic clock so that a wall clock stepped back does
// not extend it), so it costs no query; a write already in flight when
// the deadline passes is not stopped. A HandOver lets the write in
// flight return before it cancels the execution, and refuses the later
// ones.
//
// It also keeps a2a-go from failing a task without a reason over a
// transient fault (K6). When an execution's store write fails for the
// server's own reasons (a2a.ErrInternalError: PostgreSQL unreachable, a
// connection it dropped at a restart), or its push configurations cannot
// be listed (FencePushConfigs), a2a-go writes the task FAILED, with no
// status message, and reports the execution as finished, so its work item
// would never be retried. After such a fault the execution's FAILED write
// is refused with errStepFailed: the execution ends with the error, its
// work item is retried (the stored task resumed), and after
// Options.MaxAttempts the task is FAILED with a reason (giveUp). A
// cancelation whose CANCELED write failed so is retried the same way,
// after RetryDelay (TestFailedCancelRetried), instead of ending the task
// FAILED; when its attempts run out, giveUp cancels the task through the
// store (TestFailedCancelGivenUp). Faults
// of the content (a task over the store's limits, an invalid agent
// response) are not transient and still fail the task at once.
func (c *Cluster) FenceTaskStore(ts taskstore.Store) taskstore.Store {
	return fencedStore{Store: ts}
}

type fencedStore struct{ taskstore.Store }

// writing marks a store write of the execution (or cancelation) of ctx
// in flight until the function it returns is called: HandOver waits for
// it before it cancels the execution (awaitWrite).
func writing(ctx context.Context) func() {
	m, ok := ctx.Value(leaseKey{}).(*message)
	if !ok {
		return func() {}
	}
	m.writes.RLock()
	return m.writes.RUnlock
}

func fence(ctx context.Context) error {
	if m, ok := ctx.Value(leaseKey{}).(*message); ok && !m.holds() {
		return fmt.Errorf("pgcluster: write of an execution whose lease this instance no longer holds: %w", ErrLeaseLost)
	}
	return nil
}

// Create implements taskstore.Store.
func (s fencedStore) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	defer writing(ctx)()
	if err := fence(ctx); err != nil {
		return taskstore.TaskVersionMissing, err
	}
	v, err := s.Store.Create(ctx, task)
	if m, ok := ctx.Value(leaseKey{}).(*message); ok && err == nil && m.payload.Type == workqueue.PayloadTypeExecute &&
		m.payload.ExecuteRequest != nil && m.payload.ExecuteRequest.Message != nil && m.payload.ExecuteRequest.Message.TaskID == "" {
		m.nameTask(ctx, task)
	}
	return v, err
}

// Update implements taskstore.Store.
func (s fencedStore) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	defer writing(ctx)()
	if err := fence(ctx); err != nil {
		return taskstore.TaskVersionMissing, err
	}
	m, _ := ctx.Value(leaseKey{}).(*message)
	if m != nil && m.faulted.Load() && req.Task != nil && req.Task.Status.State == a2a.TaskStateFailed {
		return taskstore.TaskVersionMissing, errStepFailed
	}
	v, err := s.Store.Update(ctx, req)
	if m != nil && errors.Is(err, a2a.ErrInternalError) {
		m.faulted.Store(true)
	}
	return v, err
}

// errStepFailed is the error of an execution's FAILED write after a
// transient fault (FenceTaskStore): the work item is retried instead.
var errStepFailed = errors.New("pgcluster: a transient fault interrupted the execution; it is retried instead of failing its task without a reason")

// FencePushConfigs returns ps for a2asrv.WithPushNotifications in cluster
// mode, marking an execution whose push configurations cannot be listed
// as faulted, so that its task is not failed without a reason
// (FenceTaskStore).
func FencePushConfigs(ps push.ConfigStore) push.ConfigStore {
	return fencedConfigs{ConfigStore: ps}
}

type fencedConfigs struct{ push.ConfigStore }

// List implements push.ConfigStore.
func (s fencedConfigs) List(ctx context.Context, id a2a.TaskID) ([]*a2a.PushConfig, error) {
	cs, err := s.ConfigStore.List(ctx, id)
	if m, ok := ctx.Value(leaseKey{}).(*message); ok && err != nil {
		m.faulted.Store(true)
	}
	return cs, err
}
