package a2aserver

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine/memstore"
)

// TestCapabilityGuard (A2A §3.3.4): with push notifications not declared,
// the four push-config methods answer PushNotificationNotSupportedError
// before TaskGuard looks the task up — also for a task that does not
// exist, which TaskGuard alone answers not found; with push declared the
// call goes on (here to TaskGuard's not found). Streaming and the extended
// card, when not declared, are UnsupportedOperationError.
func TestCapabilityGuard(t *testing.T) {
	handler := func(caps a2a.AgentCapabilities) a2asrv.RequestHandler {
		ts := TaskStore(memstore.New(memstore.Options{}))
		return a2asrv.NewHandler(newHeldAgent(), a2asrv.WithTaskStore(ts),
			a2asrv.WithCallInterceptors(CapabilityGuard(caps), TaskGuard(ts)))
	}
	missing := a2a.TaskID("no-such-task")
	push := func(h a2asrv.RequestHandler) map[string]error {
		ctx := t.Context()
		_, getErr := h.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: missing, ID: "p"})
		_, listErr := h.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: missing})
		_, createErr := h.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: missing, URL: "https://example.com/hook"})
		deleteErr := h.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: missing, ID: "p"})
		return map[string]error{"Get": getErr, "List": listErr, "Create": createErr, "Delete": deleteErr}
	}
	for method, err := range push(handler(a2a.AgentCapabilities{Streaming: true})) {
		if !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
			t.Errorf("push not declared: %sTaskPushConfig of a missing task: %v, want PushNotificationNotSupported", method, err)
		}
	}
	for method, err := range push(handler(a2a.AgentCapabilities{Streaming: true, PushNotifications: true})) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("push declared: %sTaskPushConfig of a missing task: %v, want the call to go on (TaskGuard: not found)", method, err)
		}
	}

	none := handler(a2a.AgentCapabilities{})
	if _, err := firstErr(none.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: missing})); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Errorf("streaming not declared: SubscribeToTask: %v, want UnsupportedOperation", err)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	if _, err := firstErr(none.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Errorf("streaming not declared: SendStreamingMessage: %v, want UnsupportedOperation", err)
	}
	if _, err := none.GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{}); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Errorf("extended card not declared: %v, want UnsupportedOperation", err)
	}
	if _, err := handler(a2a.AgentCapabilities{ExtendedAgentCard: true}).GetExtendedAgentCard(t.Context(), &a2a.GetExtendedAgentCardRequest{}); errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Errorf("extended card declared: %v, want the call to go on", err)
	}
}
