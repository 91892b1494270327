package a2aserver

import (
	"context"
	"errors"
	"iter"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Executions tracks the agent executions of a server so that shutdown can
// wait for them. a2a-go runs each execution (and each cancellation) in a
// goroutine detached from the request that started it — a SendMessage with
// returnImmediately has long answered when its agent is still working — so
// stopping the listeners does not wait for them, and closing the store
// under them strands their tasks in a working state forever.
//
// Wrap the agent, and at shutdown, after the listeners stopped accepting:
//
//	execs := a2aserver.NewExecutions()
//	handler := a2asrv.NewHandler(execs.Wrap(agent), …)
//	…
//	if err := execs.Wait(ctx); err != nil { // ctx: the shutdown timeout
//		execs.Abort("server shut down before the agent finished")
//		_ = execs.Wait(finishCtx)
//	}
//	store.Close()
//
// Abort cancels the context of every running execution (and of any that
// starts later); when the agent returns without having ended its task, the
// wrapper emits a final status update that moves the task to FAILED with
// the reason as its status message, and a2a-go stores it like any other
// event. When that status message would take the task past the store's
// limits (engine.Limits), the store refuses the update and a2a-go fails
// the task itself, without a status message. An agent that ignores its
// context cannot be finished this way; Wait then times out and the task
// is left as it is.
type Executions struct {
	abort       context.Context
	abortCancel context.CancelCauseFunc

	mu struct {
		sync.Mutex
		// running holds the executions and cancellations the agent was
		// asked for, from that call until a2a-go's cleanup after it stored
		// their last event.
		running map[*a2asrv.ExecutorContext]bool
		reason  string
		changed chan struct{} // closed and replaced when running shrinks
	}
}

// NewExecutions returns a tracker with nothing running.
func NewExecutions() *Executions {
	e := &Executions{}
	e.abort, e.abortCancel = context.WithCancelCause(context.Background())
	e.mu.changed = make(chan struct{})
	e.mu.running = make(map[*a2asrv.ExecutorContext]bool)
	return e
}

// errAborted is the cancellation cause of executions stopped by Abort.
var errAborted = errors.New("a2aserver: execution aborted at shutdown")

// Wrap returns agent with its executions and cancellations tracked.
func (e *Executions) Wrap(agent a2asrv.AgentExecutor) a2asrv.AgentExecutor {
	return &trackedAgent{agent: agent, execs: e}
}

// Running returns the number of executions and cancellations running.
func (e *Executions) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.mu.running)
}

// Wait returns nil once nothing is running — every execution's events
// are stored — or ctx's error when ctx ends first.
func (e *Executions) Wait(ctx context.Context) error {
	for {
		e.mu.Lock()
		n, changed := len(e.mu.running), e.mu.changed
		e.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Abort stops every running execution, and any started later, ending
// their tasks in FAILED with reason as the status message. Only the first
// call's reason is used.
func (e *Executions) Abort(reason string) {
	e.mu.Lock()
	if e.mu.reason == "" {
		e.mu.reason = reason
	}
	e.mu.Unlock()
	e.abortCancel(errAborted)
}

func (e *Executions) begin(execCtx *a2asrv.ExecutorContext) {
	e.mu.Lock()
	e.mu.running[execCtx] = true
	e.mu.Unlock()
}

// end is called from a2a-go's cleanup, which follows every execution and
// cancellation once their events are stored — also those that failed
// before the agent was called, hence the check.
func (e *Executions) end(execCtx *a2asrv.ExecutorContext) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.mu.running[execCtx] {
		return
	}
	delete(e.mu.running, execCtx)
	close(e.mu.changed)
	e.mu.changed = make(chan struct{})
}

func (e *Executions) reason() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.reason
}

// abortable returns ctx, canceled also when the tracker aborts.
func (e *Executions) abortable(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(e.abort, func() { cancel(errAborted) })
	return ctx, func() { stop(); cancel(nil) }
}

type trackedAgent struct {
	agent a2asrv.AgentExecutor
	execs *Executions
}

// Execute implements a2asrv.AgentExecutor.
func (t *trackedAgent) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	t.execs.begin(execCtx)
	return func(yield func(a2a.Event, error) bool) {
		agentCtx, stop := t.execs.abortable(ctx)
		defer stop()
		hasTask, ended := execCtx.StoredTask != nil, false
		for ev, err := range t.agent.Execute(agentCtx, execCtx) {
			if err == nil {
				hasTask = hasTask || isTaskEvent(ev)
				ended = ends(ev)
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
		if hasTask && !ended && context.Cause(agentCtx) == errAborted {
			msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, execCtx, a2a.NewTextPart(t.execs.reason()))
			yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateFailed, msg), nil)
		}
	}
}

// Cancel implements a2asrv.AgentExecutor. Cancellations are waited for
// like executions, but not aborted: they are short and end the task
// themselves.
func (t *trackedAgent) Cancel(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	t.execs.begin(execCtx)
	return t.agent.Cancel(ctx, execCtx)
}

// Cleanup implements a2asrv.AgentExecutionCleaner: a2a-go calls it after an
// execution or cancellation, once its events are stored. It forwards to
// the agent's own Cleanup, if any.
func (t *trackedAgent) Cleanup(ctx context.Context, execCtx *a2asrv.ExecutorContext, result a2a.SendMessageResult, err error) {
	defer t.execs.end(execCtx)
	if c, ok := t.agent.(a2asrv.AgentExecutionCleaner); ok {
		c.Cleanup(ctx, execCtx, result, err)
	}
}

func isTaskEvent(ev a2a.Event) bool {
	_, isMsg := ev.(*a2a.Message)
	return !isMsg
}

// ends reports whether ev ends an execution without leaving its task
// working: a message, or a task in a terminal or interrupted state.
func ends(ev a2a.Event) bool {
	var state a2a.TaskState
	switch v := ev.(type) {
	case *a2a.Message:
		return true
	case *a2a.Task:
		state = v.Status.State
	case *a2a.TaskStatusUpdateEvent:
		state = v.Status.State
	default:
		return false
	}
	return state.Terminal() || state == a2a.TaskStateInputRequired || state == a2a.TaskStateAuthRequired
}
