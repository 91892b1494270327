package pgcluster

import (
	"context"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// CancelAttempts is how many times a cancelation is tried.
const CancelAttempts = cancelAttempts

// Clean runs one cleaner pass (tests drive it instead of waiting).
func (c *Cluster) Clean(ctx context.Context) error { return c.cleaner.clean(ctx) }

// Rescue runs one rescuer pass.
func (c *Cluster) Rescue(ctx context.Context) error { return c.rescuer.rescue(ctx) }

// Connected is closed once the listener first listens.
func (c *Cluster) Connected() <-chan struct{} { return c.listener.connected }

// Stall moves the clock of c's lease checks d ahead, as if the instance
// had been stopped for d.
func (c *Cluster) Stall(d time.Duration) { c.skew.Add(int64(d)) }

// OnIdle makes c call f when one of its readers has read every stored
// event and waits to be woken. Set before the readers read.
func (c *Cluster) OnIdle(f func(a2a.TaskID)) { c.onIdle = f }

// BeforeReconnect makes c's listener call f before it connects again after
// losing its connection.
func (c *Cluster) BeforeReconnect(f func()) { c.beforeReconnect.Store(&f) }

// BeforeComplete makes c call f at each attempt to complete a work item of
// c's; an error fails the attempt (as a lost connection would).
func (c *Cluster) BeforeComplete(f func() error) { c.beforeComplete.Store(&f) }

// NotifyWork notifies every instance that id has a work item due (what
// inserting or returning one does).
func (c *Cluster) NotifyWork(ctx context.Context, id a2a.TaskID) error {
	return c.notify(ctx, c.pool, 'w', id)
}

// BeforeExecution makes c call f when a claimed execution of task id is
// about to start (before it counts as running).
func (c *Cluster) BeforeExecution(f func(id a2a.TaskID)) { c.beforeExecution.Store(&f) }

// AfterHandOverLook makes HandOver call f once it has listed the running
// executions.
func (c *Cluster) AfterHandOverLook(f func()) { c.afterHandOverLook.Store(&f) }

// AwaitingCancel makes c call f when an execution of task id waits for
// the cancelation of id running on c.
func (c *Cluster) AwaitingCancel(f func(id a2a.TaskID)) { c.awaitingCancel.Store(&f) }

// AwaitingWrite makes c's HandOver call f when it waits for a store
// write of the execution of task id before canceling it.
func (c *Cluster) AwaitingWrite(f func(id a2a.TaskID)) { c.awaitingWrite.Store(&f) }

// Heartbeat runs the heartbeat statement for the item id under token, as
// an execution's Heartbeat does, and returns the rows it renewed.
func (c *Cluster) Heartbeat(ctx context.Context, id int64, token string) (int64, error) {
	tag, err := c.pool.Exec(ctx, c.sql.heartbeat, id, token, c.opts.LeaseTimeout)
	return tag.RowsAffected(), err
}
