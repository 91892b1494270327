package main

import (
	"context"
	"errors"
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
func finishAbandoned(ctx context.Context, store engine.Store, reason string) (int, error) {
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
				if err != nil {
					return n, err
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
// working.
func finishTask(ctx context.Context, store engine.Store, id a2a.TaskID, reason string) (bool, error) {
	rec, err := store.Get(ctx, id)
	if errors.Is(err, engine.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	t := rec.Task
	if s := t.Status.State; s != a2a.TaskStateSubmitted && s != a2a.TaskStateWorking {
		return false, nil
	}
	// As a2a-go does when a status replaces one with a message: the old
	// message moves into the history.
	if m := t.Status.Message; m != nil && !slices.ContainsFunc(t.History, func(h *a2a.Message) bool { return h != nil && h.ID == m.ID }) {
		t.History = append(t.History, m)
	}
	now := time.Now().UTC()
	msg := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(reason))
	msg.TaskID, msg.ContextID = t.ID, t.ContextID
	t.Status = a2a.TaskStatus{State: a2a.TaskStateFailed, Timestamp: &now, Message: msg}
	_, err = store.Replace(ctx, t, rec.Revision)
	if errors.Is(err, engine.ErrRevisionConflict) || errors.Is(err, engine.ErrNotFound) {
		return false, nil // someone else got there
	}
	return err == nil, err
}
