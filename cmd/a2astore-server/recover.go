package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// finishAbandoned moves every submitted or working task in store to
// failed, with reason as its status message, and returns how many it
// finished. It runs before the server accepts requests: such a task was
// being executed by a previous run that died (kill -9, a crash, a
// shutdown that could not stop its agent), and no agent will ever finish
// it. Tasks waiting for the client (input or auth required) are left as
// they are. Each task is replaced conditionally on the revision read, so
// a concurrent writer is never overwritten.
//
// A task it cannot finish does not stop it: the error is logged with the
// task's ID and it goes on with the next (a task stored under larger
// limits than the store now has, -max-task-bytes or -max-depth lowered,
// can be written no more). Only a failure to list the tasks, or ctx
// ending, is returned.
func finishAbandoned(ctx context.Context, store engine.Store, reason string, log *slog.Logger) (int, error) {
	n := 0
	for _, state := range []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking} {
		req := &engine.ListRequest{Status: state, PageSize: engine.MaxPageSize, Projection: engine.ProjectionLight}
		for {
			resp, err := store.List(ctx, req)
			if err != nil {
				return n, err
			}
			for _, t := range resp.Tasks {
				done, err := finishTask(ctx, store, t.ID, reason)
				if ctx.Err() != nil {
					return n, ctx.Err()
				}
				if err != nil {
					log.Error("cannot finish a task a previous run left unfinished; it stays as it is", "task", t.ID, "state", state, "err", err)
				}
				if done {
					n++
				}
			}
			if resp.NextPageToken == "" {
				break
			}
			req.PageToken = resp.NextPageToken
		}
	}
	return n, nil
}

// finishTask fails one abandoned task; false when it is gone or no longer
// working. The task keeps all its content; it becomes larger only by the
// status message. When that does not fit the store's limits (a task at
// MaxTaskBytes), the task is failed without a status message, and failing
// that, without keeping the old status message in its history (as a2a-go
// fails a task whose update the store refused), which never makes it
// larger than it is.
func finishTask(ctx context.Context, store engine.Store, id a2a.TaskID, reason string) (bool, error) {
	rec, err := store.Get(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if s := rec.Task.Status.State; s != a2a.TaskStateSubmitted && s != a2a.TaskStateWorking {
		return false, nil
	}
	for _, version := range failedVersions(rec.Task, reason) {
		_, err = store.Replace(ctx, version, rec.Revision)
		if !errors.Is(err, engine.ErrLimitExceeded) {
			break // stored, or an error a smaller task would not avoid
		}
	}
	if errors.Is(err, engine.ErrRevisionConflict) || errors.Is(err, engine.ErrNotFound) {
		return false, nil // someone else got there
	}
	return err == nil, err
}

// failedVersions returns t failed, in the forms finishTask tries, each no
// larger than the one before: with reason as the status message and the
// old status message moved into the history (as a2a-go does when a status
// replaces one with a message), without the status message, and without
// either (nor a timestamp where the task had none).
func failedVersions(t *a2a.Task, reason string) []*a2a.Task {
	now := time.Now().UTC()
	history := t.History
	if m := t.Status.Message; m != nil && !slices.ContainsFunc(history, func(h *a2a.Message) bool { return h != nil && h.ID == m.ID }) {
		history = append(slices.Clip(history), m)
	}
	msg := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(reason))
	msg.TaskID, msg.ContextID = t.ID, t.ContextID
	failed := func(status *a2a.Message, history []*a2a.Message, ts *time.Time) *a2a.Task {
		v := *t
		v.Status = a2a.TaskStatus{State: a2a.TaskStateFailed, Timestamp: ts, Message: status}
		v.History = history
		return &v
	}
	last := t.Status.Timestamp // the smallest form adds no timestamp the task did not have
	if last != nil {
		last = &now
	}
	return []*a2a.Task{failed(msg, history, &now), failed(nil, history, &now), failed(nil, t.History, last)}
}
