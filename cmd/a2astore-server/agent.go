package main

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// agentConfig sets how the synthetic agent behaves per task. The zero value
// is valid: submitted → completed with no intermediate updates.
type agentConfig struct {
	// StatusUpdates is the number of "working" status updates between
	// submission and completion. Each is one store Update.
	StatusUpdates int
	// HistoryMessages is how many of those status updates carry an agent
	// message; a2a-go moves a status message into the task history when the
	// next status replaces it. Clamped to StatusUpdates.
	HistoryMessages int
	// ArtifactBytes is the size of the one text artifact the agent emits
	// before completing; 0 emits none.
	ArtifactBytes int
	// ThinkTime is waited before each status update and the artifact
	// (a timer; canceled with the request). 0 = no wait.
	ThinkTime time.Duration

	// beforeComplete, when set, runs before the final status update
	// (tests use it to hold a task in flight).
	beforeComplete func(ctx context.Context, execCtx *a2asrv.ExecutorContext)
}

// syntheticAgent is an a2asrv.AgentExecutor that creates and updates tasks
// the way real agents do, without doing any work: what load tests drive.
type syntheticAgent struct {
	cfg     agentConfig
	payload string
}

var _ a2asrv.AgentExecutor = (*syntheticAgent)(nil)

func newSyntheticAgent(cfg agentConfig) *syntheticAgent {
	cfg.StatusUpdates = max(cfg.StatusUpdates, 0)
	cfg.HistoryMessages = min(max(cfg.HistoryMessages, 0), cfg.StatusUpdates)
	cfg.ArtifactBytes = max(cfg.ArtifactBytes, 0)
	return &syntheticAgent{cfg: cfg, payload: strings.Repeat("a", cfg.ArtifactBytes)}
}

// Execute implements a2asrv.AgentExecutor.
func (a *syntheticAgent) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if execCtx.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
				return
			}
		}
		for i := range a.cfg.StatusUpdates {
			if !a.think(ctx) {
				return
			}
			var msg *a2a.Message
			if i < a.cfg.HistoryMessages {
				msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, execCtx, a2a.NewTextPart(fmt.Sprintf("step %d", i+1)))
			}
			if !yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateWorking, msg), nil) {
				return
			}
		}
		if a.cfg.ArtifactBytes > 0 {
			if !a.think(ctx) {
				return
			}
			if !yield(a2a.NewArtifactEvent(execCtx, a2a.NewTextPart(a.payload)), nil) {
				return
			}
		}
		if a.cfg.beforeComplete != nil {
			a.cfg.beforeComplete(ctx, execCtx)
		}
		if ctx.Err() != nil {
			return // stopped: the task is not complete
		}
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCompleted, nil), nil)
	}
}

// Cancel implements a2asrv.AgentExecutor.
func (a *syntheticAgent) Cancel(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}

// think waits ThinkTime, or returns false when ctx ends first.
func (a *syntheticAgent) think(ctx context.Context) bool {
	return wait(ctx, a.cfg.ThinkTime)
}

// wait waits d (a timer), or returns false when ctx ends first; d <= 0
// does not wait.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
