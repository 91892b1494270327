// Package clientcompat closes, on the client side, a gap of the official A2A
// Go SDK's JSON-RPC client (github.com/a2aproject/a2a-go/v2 v2.3.1): it
// reads the plain JSON-RPC error answer to a streaming call as an empty
// event stream.
//
// A server answers a SendStreamingMessage or SubscribeToTask that fails
// before its first event — a missing task, a task already finished, invalid
// params, no identity — with a plain JSON-RPC error response (HTTP 200,
// application/json): a2astore-server does (SPEC W7), and so do the
// JavaScript and Python SDKs' servers; the official TCK requires it and the
// JavaScript and Python clients read it as the error. a2a-go's client takes
// any 200 answer to a streaming call for an event stream and finds no event
// in it: the loop over the events ends without one and without an error.
// JSONRPCStreamErrors makes such an answer the one-event stream a2a-go
// reads as the error, so the caller gets it (errors.Is(err,
// a2a.ErrTaskNotFound) …):
//
//	hc := &http.Client{Transport: clientcompat.JSONRPCStreamErrors(http.DefaultTransport)}
//	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
package clientcompat
