package pgcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/workqueue"
)

// blankingConfigs blanks the token of the config a2a-go saves, as
// pushdelivery.ConfigStore does to a config it fails to save (SPEC N3).
type blankingConfigs struct{ push.ConfigStore }

func (s blankingConfigs) Save(ctx context.Context, id a2a.TaskID, cfg *a2a.PushConfig) (*a2a.PushConfig, error) {
	saved, err := s.ConfigStore.Save(ctx, id, cfg)
	cfg.Token = ""
	return saved, err
}

// A hand-over writes back the work item as it was claimed: a push config
// whose token was blanked in the payload a2a-go ran (a failed save hides
// it from a2a-go's error) keeps its token for the next instance.
func TestHandOverKeepsClaimedPayload(t *testing.T) {
	h := newHarness(t)
	h.push = blankingConfigs{push.NewInMemoryStore()}
	agent := newGateAgent(1)
	a := h.start(t, "a", agent)
	ctx := t.Context()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))
	req := &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{
		PushConfig: &a2a.PushConfig{URL: "https://hook.example/", Token: "kept-token"}}}
	events, _ := stream(a.handler.SendStreamingMessage(ctx, req))
	task, ok := next(t, events).(*a2a.Task)
	if !ok {
		t.Fatal("first event is not the submitted task")
	}
	// The first event may come from the enqueue, before any claim: hand
	// over once the execution runs (a claim between HandOver's look at the
	// executions and its Settle would leave Settle waiting for the agent).
	select {
	case <-agent.started:
	case <-time.After(waitFor):
		t.Fatal("the execution did not start")
	}
	hctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	if n, err := a.cluster.HandOver(hctx); err != nil || n != 1 {
		t.Fatalf("HandOver = %d, %v; want 1 execution", n, err)
	}
	var body []byte
	q := fmt.Sprintf(`SELECT payload FROM %q.a2a_cluster_work WHERE task_id = $1`, h.schema)
	if err := a.pool.QueryRow(ctx, q, string(task.ID)).Scan(&body); err != nil {
		t.Fatal(err)
	}
	var p workqueue.Payload
	if err := json.Unmarshal(body, &p); err != nil || p.ExecuteRequest == nil || p.ExecuteRequest.Config == nil {
		t.Fatalf("payload after hand-over: %s (%v)", body, err)
	}
	if got := p.ExecuteRequest.Config.PushConfig.Token; got != "kept-token" {
		t.Errorf("handed-over payload's token %q, want kept-token", got)
	}
	if p.ExecuteRequest.Message.TaskID != task.ID || !strings.Contains(string(body), string(task.ID)) {
		t.Errorf("handed-over payload does not name the stored task: %s", body)
	}
}
