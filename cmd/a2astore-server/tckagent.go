package main

import (
	"context"
	"iter"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Agents -agent selects.
const (
	agentSynthetic = "synthetic" // the staging agent (agent.go), the default
	agentTCK       = "tck"       // the official TCK's scenarios (this file)
)

// defaultTCKLongTask is how long the TCK's long-running task works before
// it completes (unless canceled): twice the TCK's 2-second streaming
// timeout, so a subscriber that reconnects finds it still working.
const defaultTCKLongTask = 4 * time.Second

// tckAgent is the agent behind `a2astore-server -agent tck`: it does what
// the official A2A TCK (a2aproject/a2a-tck, A2A 1.0; its scenarios in
// scenarios/*.feature) asks of the agent under test, chosen by the prefix
// of the message ID. Every other message completes its task with a
// message, so the TCK's protocol tests (errors, versions, lists) run
// against any a2astore backend the way they run against the SDKs' own
// test agents.
type tckAgent struct {
	longTask time.Duration // the long-running task's work; 0 = defaultTCKLongTask
}

var _ a2asrv.AgentExecutor = tckAgent{}

// tckScenario is what the agent does for one message-ID prefix.
type tckScenario struct {
	prefix string
	// message answers with a Message instead of a task.
	message string
	// working reports the working state first.
	working bool
	// artifacts are sent in order; chunks of one artifact share its ID.
	artifacts []tckArtifact
	// hold, when set, waits for the long task's time (or a cancel)
	// before the final state.
	hold bool
	// final is the state the task ends in (for this message); its status
	// carries finalText as an agent message when set.
	final     a2a.TaskState
	finalText string
}

// tckArtifact is one artifact update: its parts, and for a chunk of the
// previous update's artifact, sameAsPrev (its ID), append and lastChunk.
type tckArtifact struct {
	parts                         func() []*a2a.Part
	sameAsPrev, append, lastChunk bool
}

func textParts(s string) func() []*a2a.Part {
	return func() []*a2a.Part { return []*a2a.Part{a2a.NewTextPart(s)} }
}

// fileParts is a file part: bytes with a file name and media type.
func fileParts() []*a2a.Part {
	p := a2a.NewRawPart([]byte("a2astore TCK file artifact\n"))
	p.Filename, p.MediaType = "output.txt", "text/plain"
	return []*a2a.Part{p}
}

// fileURLParts is a file given by URL, with a file name and media type.
func fileURLParts() []*a2a.Part {
	p := a2a.NewFileURLPart("https://example.com/output.txt", "text/plain")
	p.Filename = "output.txt"
	return []*a2a.Part{p}
}

func dataParts() []*a2a.Part {
	return []*a2a.Part{a2a.NewDataPart(map[string]any{"key": "value", "count": 42})}
}

// tckScenarios, longest prefix first where one prefix starts another
// (tck-artifact-file-url before tck-artifact-file). The texts are the
// TCK's expectations.
var tckScenarios = []tckScenario{
	{prefix: "tck-complete-task", final: a2a.TaskStateCompleted, finalText: "Hello from TCK"},
	{prefix: "tck-artifact-text", artifacts: []tckArtifact{{parts: textParts("Generated text content")}}, final: a2a.TaskStateCompleted},
	{prefix: "tck-artifact-file-url", artifacts: []tckArtifact{{parts: fileURLParts}}, final: a2a.TaskStateCompleted},
	{prefix: "tck-artifact-file", artifacts: []tckArtifact{{parts: fileParts}}, final: a2a.TaskStateCompleted},
	{prefix: "tck-artifact-data", artifacts: []tckArtifact{{parts: dataParts}}, final: a2a.TaskStateCompleted},
	{prefix: "tck-message-response", message: "Direct message response"},
	{prefix: "tck-input-required", final: a2a.TaskStateInputRequired},
	{prefix: "tck-reject-task", final: a2a.TaskStateRejected, finalText: "rejected"},
	{prefix: "tck-stream-001", working: true, artifacts: []tckArtifact{{parts: textParts("Stream hello from TCK")}}, final: a2a.TaskStateCompleted},
	{prefix: "tck-stream-002", final: a2a.TaskStateCompleted},
	{prefix: "tck-stream-003", working: true, artifacts: []tckArtifact{{parts: textParts("Stream task lifecycle")}}, final: a2a.TaskStateCompleted},
	{prefix: "tck-stream-ordering-001", working: true, artifacts: []tckArtifact{{parts: textParts("Ordered output")}}, final: a2a.TaskStateCompleted},
	{prefix: "tck-stream-artifact-text", working: true, artifacts: []tckArtifact{{parts: textParts("Streamed text content")}}, final: a2a.TaskStateCompleted},
	{prefix: "tck-stream-artifact-file", working: true, artifacts: []tckArtifact{{parts: fileParts}}, final: a2a.TaskStateCompleted},
	{prefix: "tck-stream-artifact-chunked", working: true, artifacts: []tckArtifact{
		{parts: textParts("chunk-1 ")},
		{parts: textParts("chunk-2"), sameAsPrev: true, append: true, lastChunk: true},
	}, final: a2a.TaskStateCompleted},
	{prefix: "test-resubscribe-message-id", working: true, hold: true, final: a2a.TaskStateCompleted},
}

// tckDefault is the scenario of any other message ID.
var tckDefault = tckScenario{final: a2a.TaskStateCompleted, finalText: "a2astore TCK agent: no scenario for this message ID; task completed"}

// scenarioFor returns the scenario of a message ID.
func scenarioFor(messageID string) tckScenario {
	for _, s := range tckScenarios {
		if strings.HasPrefix(messageID, s.prefix) {
			return s
		}
	}
	return tckDefault
}

// Execute implements a2asrv.AgentExecutor.
func (a tckAgent) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		var id string
		if execCtx.Message != nil {
			id = execCtx.Message.ID
		}
		sc := scenarioFor(id)
		if sc.message != "" && execCtx.StoredTask == nil {
			yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(sc.message)), nil)
			return
		}
		if execCtx.StoredTask == nil && !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
			return
		}
		if sc.working && !yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateWorking, nil), nil) {
			return
		}
		var last a2a.ArtifactID
		for _, art := range sc.artifacts {
			ev := a2a.NewArtifactEvent(execCtx, art.parts()...)
			if art.sameAsPrev {
				ev.Artifact.ID = last
			}
			ev.Append, ev.LastChunk = art.append, art.lastChunk
			last = ev.Artifact.ID
			if !yield(ev, nil) {
				return
			}
		}
		if sc.hold && !a.work(ctx) {
			return // canceled: the cancel writes the final state
		}
		var msg *a2a.Message
		if sc.finalText != "" {
			msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, execCtx, a2a.NewTextPart(sc.finalText))
		}
		if sc.message != "" { // a Message scenario continuing a task: answer in the task
			msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, execCtx, a2a.NewTextPart(sc.message))
		}
		final := sc.final
		if final == "" {
			final = a2a.TaskStateCompleted
		}
		yield(a2a.NewStatusUpdateEvent(execCtx, final, msg), nil)
	}
}

// work waits the long task's time; false when ctx ends first.
func (a tckAgent) work(ctx context.Context) bool {
	d := a.longTask
	if d <= 0 {
		d = defaultTCKLongTask
	}
	return wait(ctx, d)
}

// Cancel implements a2asrv.AgentExecutor.
func (tckAgent) Cancel(_ context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}
