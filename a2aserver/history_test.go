package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine/memstore"
)

// chattyAgent completes each task after two working updates that carry
// agent messages: the task ends with three history messages (the user's
// and the two agent messages a2a-go moves there).
type chattyAgent struct{}

func (chattyAgent) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
			return
		}
		for i := range 2 {
			msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, execCtx, a2a.NewTextPart(fmt.Sprintf("step %d", i)))
			if !yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateWorking, msg), nil) {
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCompleted, nil), nil)
	}
}

func (chattyAgent) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(func(a2a.Event, error) bool) {}
}

// TestHistoryLength (A2A §3.2.4): SendMessage's configuration.historyLength
// trims the returned task's history to its last n messages (0: none, and
// no history field), each Task SendStreamingMessage streams too; unset
// keeps it whole; negative is invalid params. The stored task keeps its
// history. a2a-go v2.3.1 ignores the field (the task came back with all
// three messages).
func TestHistoryLength(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	h := a2asrv.NewHandler(chattyAgent{}, a2asrv.WithTaskStore(TaskStore(mem)),
		a2asrv.WithCallInterceptors(HistoryLength()))
	send := func(n *int) (*a2a.Task, error) {
		res, err := h.SendMessage(t.Context(), &a2a.SendMessageRequest{
			Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")),
			Config:  &a2a.SendMessageConfig{HistoryLength: n},
		})
		if err != nil {
			return nil, err
		}
		return res.(*a2a.Task), nil
	}
	for _, c := range []struct {
		n    *int
		want []string // texts of the history returned
	}{
		{nil, []string{"hi", "step 0", "step 1"}},
		{new(5), []string{"hi", "step 0", "step 1"}},
		{new(3), []string{"hi", "step 0", "step 1"}},
		{new(1), []string{"step 1"}},
		{new(0), nil},
	} {
		task, err := send(c.n)
		if err != nil {
			t.Fatalf("historyLength %v: %v", c.n, err)
		}
		var got []string
		for _, m := range task.History {
			got = append(got, m.Parts[0].Text())
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) || (c.want == nil && task.History != nil) {
			t.Errorf("historyLength %v: history %q, want %q", deref(c.n), got, c.want)
		}
		rec, err := mem.Get(t.Context(), task.ID)
		if err != nil || len(rec.Task.History) != 3 {
			t.Errorf("historyLength %v: the stored task has %d history messages (%v), want all 3", deref(c.n), len(rec.Task.History), err)
		}
	}
	if _, err := send(new(-1)); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("historyLength -1: %v, want invalid params", err)
	}

	// A stream's Task events are trimmed too.
	n := 0
	for ev, err := range h.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")),
		Config:  &a2a.SendMessageConfig{HistoryLength: new(0)},
	}) {
		if err != nil {
			t.Fatal(err)
		}
		if task, ok := ev.(*a2a.Task); ok {
			n++
			if task.History != nil {
				t.Errorf("streamed task with historyLength 0 has history %v", task.History)
			}
		}
	}
	if n == 0 {
		t.Error("the stream had no Task event")
	}
}

func deref(n *int) any {
	if n == nil {
		return "unset"
	}
	return *n
}
