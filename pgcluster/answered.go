package pgcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"

	"github.com/a2astore/a2astore/engine"
)

// answered reports whether the message of execution item p was answered
// already (K8). It is the one answered check of cluster mode: every path
// that could run a message again or finish its task goes through it — a
// claim of an item claimed before (a retry, or the first attempt after a
// handover, which gives the attempt back), Return (a failed or
// handed-over attempt) and giveUp (out of attempts).
//
// A message is answered when
//   - a task-less reply answered it (a Message, the task never stored:
//     a2a_cluster_events), or
//   - the task's log shows an entry that leaves the task terminal or
//     interrupted after the entry that brought the message in — the
//     history entry that added it, or the task's first entry when the
//     message created the task (it is in that task's history). A message
//     the log does not show brought in (a follow-up whose history
//     revision never committed) is not answered.
//
// When the log no longer starts at the task's first revision (trimmed:
// the task was idle for the log retention) and does not show the message
// brought in, the stored task decides: the message is in its history
// and the task waits for input or has ended. (A follow-up whose history
// revision committed but whose execution then wrote nothing before the
// log was trimmed counts as answered then: after a whole log retention
// nobody waits for it, and a message run twice is the worse outcome.)
//
// A read that fails is an error, never "not answered": the caller
// neither runs the message nor finishes its task on it.
func (c *Cluster) answered(ctx context.Context, p *workqueue.Payload) (bool, error) {
	if p == nil || p.Type != workqueue.PayloadTypeExecute || p.ExecuteRequest == nil || p.ExecuteRequest.Message == nil {
		return false, nil
	}
	var replied bool
	if err := c.pool.QueryRow(ctx, c.sql.replied, string(p.TaskID), gaveUpProtocol).Scan(&replied); err != nil {
		return false, fmt.Errorf("pgcluster: answered check: %w", err)
	}
	if replied {
		return true, nil
	}
	msgID := p.ExecuteRequest.Message.ID
	added, first := int64(-1), int64(0)
	for after := int64(0); ; {
		log, err := c.opts.Log.ReadLog(ctx, p.TaskID, after, engine.MaxLogRead)
		if err != nil {
			return false, fmt.Errorf("pgcluster: answered check: %w", err)
		}
		if len(log) == 0 {
			break
		}
		if first == 0 {
			first = log[0].Revision
		}
		for _, l := range log {
			if broughtIn(l, msgID) {
				added = l.Revision
			} else if added >= 0 && engine.Final(l.State) {
				return true, nil
			}
		}
		after = log[len(log)-1].Revision
	}
	if first == 1 || added >= 0 {
		return false, nil // the whole log, or the message's part of it, says not answered
	}
	rec, err := c.opts.Log.Get(ctx, p.TaskID)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return false, nil // never stored (or deleted since)
	case err != nil:
		return false, fmt.Errorf("pgcluster: answered check: %w", err)
	}
	return engine.Final(rec.Task.Status.State) && slices.ContainsFunc(rec.Task.History, func(m *a2a.Message) bool {
		return m != nil && m.ID == msgID
	}), nil
}

// broughtIn reports whether entry l brought message msgID into its task:
// a history entry of it, or the first entry of a task whose history holds
// it.
func broughtIn(l engine.LogEntry, msgID string) bool {
	switch {
	case l.Kind == engine.LogMessage:
		var m a2a.Message
		return json.Unmarshal(l.Body, &m) == nil && m.ID == msgID
	case l.Kind == engine.LogTask && l.Revision == 1:
		var sr a2a.StreamResponse
		if json.Unmarshal(l.Body, &sr) != nil {
			return false
		}
		task, ok := sr.Event.(*a2a.Task)
		return ok && slices.ContainsFunc(task.History, func(m *a2a.Message) bool { return m != nil && m.ID == msgID })
	}
	return false
}

// finishItem finishes work item id (held under token, or under none when
// its lease expired: "") with outcome and notifies kind ('d' an
// execution done, 'c' a cancelation done), in one transaction.
func (c *Cluster) finishItem(ctx context.Context, id int64, token string, task a2a.TaskID, outcome string, kind byte) error {
	var tok any = token
	if token == "" {
		tok = nil
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgcluster: finish work item: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, c.sql.finish, id, tok, outcome); err != nil {
		return fmt.Errorf("pgcluster: finish work item: %w", err)
	}
	if err := c.notify(ctx, tx, kind, task); err != nil {
		return fmt.Errorf("pgcluster: finish work item: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgcluster: finish work item: %w", err)
	}
	return nil
}

// outcomeAnswered is the outcome of an item whose message the answered
// check found answered.
const outcomeAnswered = "answered"
