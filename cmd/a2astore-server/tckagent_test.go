package main

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// tckSend sends a message with the given ID (continuing task when set)
// through c and returns the result.
func tckSend(t *testing.T, c *a2aclient.Client, id string, task a2a.TaskID, cfg *a2a.SendMessageConfig) a2a.SendMessageResult {
	t.Helper()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("TCK"))
	msg.ID, msg.TaskID = id, task
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg, Config: cfg})
	if err != nil {
		t.Fatalf("SendMessage %s: %v", id, err)
	}
	return res
}

// statusText is the text of a task's status message, "" without one.
func statusText(task *a2a.Task) string {
	if task.Status.Message == nil || len(task.Status.Message.Parts) == 0 {
		return ""
	}
	return task.Status.Message.Parts[0].Text()
}

// TestTCKAgent: `-agent tck` does what the official TCK's scenarios
// (a2a-tck scenarios/*.feature) ask for the message-ID prefix, on every
// transport and as the TCK reads it: the artifact of each kind, a Message
// reply, input-required continued to completion (multi-turn), a rejected
// task, a chunked artifact, a long task that a cancel ends, and a plain
// completion for any other ID.
func TestTCKAgent(t *testing.T) {
	ts := startServer(t, config{Backend: "mem", AgentName: agentTCK, TCKLongTask: time.Hour})
	for i, tr := range transports {
		c := ts.clients[tr]
		id := func(prefix string) string { return fmt.Sprintf("%s-%d", prefix, i) }
		artifact := func(prefix string) *a2a.Part {
			t.Helper()
			task, ok := tckSend(t, c, id(prefix), "", nil).(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 || task.Artifacts[0].ID == "" {
				t.Fatalf("%s over %s: %+v, want a completed task with one artifact of one part", prefix, tr, task)
			}
			return task.Artifacts[0].Parts[0]
		}
		if p := artifact("tck-artifact-text"); p.Text() != "Generated text content" {
			t.Errorf("text artifact over %s: %+v", tr, p)
		}
		if p := artifact("tck-artifact-file"); len(p.Raw()) == 0 || p.Filename != "output.txt" || p.MediaType != "text/plain" {
			t.Errorf("file artifact over %s: %+v", tr, p)
		}
		if p := artifact("tck-artifact-file-url"); p.Content != a2a.URL("https://example.com/output.txt") || p.Filename != "output.txt" || p.MediaType != "text/plain" {
			t.Errorf("file URL artifact over %s: %+v", tr, p)
		}
		if p := artifact("tck-artifact-data"); !reflect.DeepEqual(p.Data(), map[string]any{"key": "value", "count": float64(42)}) {
			t.Errorf("data artifact over %s: %#v", tr, p.Data())
		}

		if m, ok := tckSend(t, c, id("tck-message-response"), "", nil).(*a2a.Message); !ok || len(m.Parts) != 1 || m.Parts[0].Text() != "Direct message response" || m.Role != a2a.MessageRoleAgent {
			t.Errorf("message response over %s: %+v, want the agent's Message", tr, m)
		}

		// Multi-turn: input required, a second message keeps it so, a third
		// completes it; the history holds all three.
		first := tckSend(t, c, id("tck-input-required"), "", nil).(*a2a.Task)
		if first.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("input required over %s: %s", tr, first.Status.State)
		}
		if again := tckSend(t, c, id("tck-input-required")+"-2", first.ID, nil).(*a2a.Task); again.Status.State != a2a.TaskStateInputRequired {
			t.Errorf("second turn over %s: %s, want input required", tr, again.Status.State)
		}
		done := tckSend(t, c, id("tck-complete-task"), first.ID, nil).(*a2a.Task)
		if done.ID != first.ID || done.Status.State != a2a.TaskStateCompleted || len(done.History) < 3 {
			t.Errorf("last turn over %s: %s %s, %d history messages; want %s completed with the three turns", tr, done.ID, done.Status.State, len(done.History), first.ID)
		}
		if got := statusText(done); got != "Hello from TCK" {
			t.Errorf("complete task over %s: status message %q", tr, got)
		}

		if rej := tckSend(t, c, id("tck-reject-task"), "", nil).(*a2a.Task); rej.Status.State != a2a.TaskStateRejected {
			t.Errorf("reject over %s: %s", tr, rej.Status.State)
		}
		if other := tckSend(t, c, id("tck-ver-002"), "", nil).(*a2a.Task); other.Status.State != a2a.TaskStateCompleted || statusText(other) == "" {
			t.Errorf("any other message ID over %s: %s %q, want completed with a message", tr, other.Status.State, statusText(other))
		}

		// The chunked artifact streams as two chunks of one artifact.
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("TCK"))
		msg.ID = id("tck-stream-artifact-chunked")
		var chunks []*a2a.TaskArtifactUpdateEvent
		var last a2a.Event
		for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
			if err != nil {
				t.Fatalf("chunked stream over %s: %v", tr, err)
			}
			if a, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok {
				chunks = append(chunks, a)
			}
			last = ev
		}
		if len(chunks) != 2 || chunks[0].Artifact.ID != chunks[1].Artifact.ID || chunks[0].Append || !chunks[1].Append || !chunks[1].LastChunk ||
			chunks[0].Artifact.Parts[0].Text() != "chunk-1 " || chunks[1].Artifact.Parts[0].Text() != "chunk-2" {
			t.Errorf("chunked artifact over %s: %+v", tr, chunks)
		}
		if su, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || su.Status.State != a2a.TaskStateCompleted {
			t.Errorf("chunked stream over %s ends with %+v, want completed", tr, last)
		}

		// The long task works until a cancel ends it.
		long := tckSend(t, c, id("test-resubscribe-message-id"), "", &a2a.SendMessageConfig{ReturnImmediately: true}).(*a2a.Task)
		if long.Status.State.Terminal() {
			t.Fatalf("long task over %s: %s at once", tr, long.Status.State)
		}
		canceled, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: long.ID})
		if err != nil || canceled.Status.State != a2a.TaskStateCanceled {
			t.Errorf("cancel of the long task over %s: %v %+v", tr, err, canceled)
		}
	}
}

// TestScenarioFor: the longest matching prefix wins, and IDs that name no
// scenario complete.
func TestScenarioFor(t *testing.T) {
	for id, want := range map[string]string{
		"tck-artifact-file-url-abc": "tck-artifact-file-url",
		"tck-artifact-file-abc":     "tck-artifact-file",
		"tck-stream-artifact-file":  "tck-stream-artifact-file",
		"tck-stream-001-x":          "tck-stream-001",
		"tck-complete-task-9":       "tck-complete-task",
		"tck-ver-002-x":             "",
		"":                          "",
	} {
		if got := scenarioFor(id).prefix; got != want {
			t.Errorf("scenarioFor(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestAgentFlag: -agent takes synthetic (the default) or tck.
func TestAgentFlag(t *testing.T) {
	for args, want := range map[string]string{"": agentSynthetic, "-agent tck": agentTCK, "-agent synthetic": agentSynthetic} {
		var list []string
		if args != "" {
			list = []string{"-agent", want}
		}
		cfg, _, err := parseFlags(list)
		if err != nil || cfg.AgentName != want {
			t.Errorf("%q: agent %q, %v; want %q", args, cfg.AgentName, err, want)
		}
	}
	if _, _, err := parseFlags([]string{"-agent", "echo"}); err == nil {
		t.Error("-agent echo: accepted")
	}
}
