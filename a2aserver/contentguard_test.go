package a2aserver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine"
)

// nestedMap is a metadata map nested depth levels deep.
func nestedMap(depth int) map[string]any {
	m := map[string]any{"leaf": true}
	for range depth - 1 {
		m = map[string]any{"k": m}
	}
	return m
}

// ContentGuardLimits refuses a message, or request metadata, beyond the
// store's limits with invalid params, and lets through what the limits
// it was given allow: metadata nested 30 deep is refused under the
// default limits (24) and passes under MaxDepth 40.
func TestContentGuardLimits(t *testing.T) {
	send := func(g a2asrv.CallInterceptor, msgMeta, reqMeta map[string]any) error {
		req := &a2a.SendMessageRequest{Metadata: reqMeta, Message: &a2a.Message{ID: "m", Role: a2a.MessageRoleUser,
			Parts: a2a.ContentParts{a2a.NewTextPart("x")}, Metadata: msgMeta}}
		_, _, err := g.Before(context.Background(), &a2asrv.CallContext{}, &a2asrv.Request{Payload: req})
		return err
	}
	deep := nestedMap(30)
	for _, c := range []struct {
		name             string
		guard            a2asrv.CallInterceptor
		msgMeta, reqMeta map[string]any
		refused          bool
	}{
		{"default, message", a2aserver.ContentGuard(), deep, nil, true},
		{"default, request", a2aserver.ContentGuard(), nil, deep, true},
		{"default, shallow", a2aserver.ContentGuard(), nestedMap(3), nestedMap(3), false},
		{"MaxDepth 40, message", a2aserver.ContentGuardLimits(engine.Limits{MaxDepth: 40}), deep, nil, false},
		{"MaxDepth 40, request", a2aserver.ContentGuardLimits(engine.Limits{MaxDepth: 40}), nil, deep, false},
	} {
		err := send(c.guard, c.msgMeta, c.reqMeta)
		if refused := errors.Is(err, a2a.ErrInvalidParams); refused != c.refused || (err != nil && !refused) {
			t.Errorf("%s: %v, want refused %v", c.name, err, c.refused)
		}
	}
}
