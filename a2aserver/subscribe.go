package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/tasklog"
)

// SubscribeFromLog makes h, a handler made by a2asrv.NewHandler, answer
// SubscribeToTask from the task log (SPEC W9, K7) instead of from a2a-go's
// execution manager, in local and cluster mode alike: the task as tasks
// (the handler's own task store, with its policy) reads it first, then
// every entry logs records after that revision, in order, until one
// leaves the task terminal or interrupted (input or auth required: the
// A2A stream closes there). So a subscription works on any task that is
// not terminal — INPUT_REQUIRED and AUTH_REQUIRED included, with no
// execution running, on any instance — where a2a-go v2.3.1 answers "task
// not found" without a running execution. A task in a terminal state
// when read gets the task, and the stream ends (the TaskGuard interceptor
// answers UnsupportedOperationError before that, W6); a task deleted
// during the stream ends it with task not found.
//
// The call interceptors (identity, TaskGuard, …) run before it as before;
// a2a-go's capability check is skipped: h must declare streaming. poll
// is the safety net for a lost wake-up (0: tasklog.DefaultPoll). h is
// returned, changed; an h not made by a2asrv.NewHandler is an error.
func SubscribeFromLog(h a2asrv.RequestHandler, tasks taskstore.Store, logs engine.LogStore, poll time.Duration) (a2asrv.RequestHandler, error) {
	ih, ok := h.(*a2asrv.InterceptedHandler)
	if !ok {
		return nil, fmt.Errorf("a2aserver: SubscribeFromLog needs the handler of a2asrv.NewHandler, not %T", h)
	}
	ih.Handler = &logSubscriber{RequestHandler: ih.Handler, tasks: tasks, logs: logs, poll: poll}
	return ih, nil
}

type logSubscriber struct {
	a2asrv.RequestHandler
	tasks taskstore.Store
	logs  engine.LogStore
	poll  time.Duration
}

// SubscribeToTask implements a2asrv.RequestHandler.
func (s *logSubscriber) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if req == nil || req.ID == "" {
			yield(nil, a2a.ErrInvalidParams)
			return
		}
		stored, err := s.tasks.Get(ctx, req.ID)
		if err != nil {
			yield(nil, err)
			return
		}
		if !yield(stored.Task, nil) || stored.Task.Status.State.Terminal() {
			return
		}
		tail := tasklog.NewTail(s.logs, req.ID, int64(stored.Version), s.poll)
		defer tail.Close()
		for {
			l, err := tail.Next(ctx)
			switch {
			case errors.Is(err, tasklog.ErrGone):
				yield(nil, a2a.NewError(a2a.ErrTaskNotFound, msgTaskNotFound))
				return
			case err != nil:
				yield(nil, wireError(ctx, "subscribe", err))
				return
			case l.Kind == engine.LogMessage:
				continue // a history revision: nothing to deliver
			}
			ev, err := l.Event(req.ID)
			if err != nil {
				yield(nil, wireError(ctx, "subscribe", err))
				return
			}
			if !yield(ev, nil) || engine.Final(l.State) {
				return
			}
		}
	}
}
