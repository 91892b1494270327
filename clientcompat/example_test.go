package clientcompat_test

import (
	"context"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/a2astore/a2astore/clientcompat"
)

// An a2a-go client whose JSON-RPC streaming calls report a plain error
// answer (a missing task, a finished one, invalid params) as the error.
func ExampleJSONRPCStreamErrors() {
	ctx := context.Background()
	card := &a2a.AgentCard{SupportedInterfaces: []*a2a.AgentInterface{
		a2a.NewAgentInterface("http://127.0.0.1:8080/jsonrpc", a2a.TransportProtocolJSONRPC),
	}}
	hc := &http.Client{Transport: clientcompat.JSONRPCStreamErrors(http.DefaultTransport)}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return
	}
	for _, err := range client.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: "task-1"}) {
		if err != nil {
			return // errors.Is(err, a2a.ErrTaskNotFound), … as for any other call
		}
	}
}
