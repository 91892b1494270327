package a2aserver

import (
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// checkServable rejects content that a2a-go v2.3.1 stores but cannot send
// over gRPC: its protobuf conversion fails on a data part whose value is
// not a JSON object and on a part without content. Such a task, created
// over JSON-RPC or HTTP+JSON, would make every gRPC GetTask of it and
// every gRPC ListTasks page holding it fail — and a failed page delivers
// no token, so a gRPC traversal could not get past it. The TaskStore
// adapter refuses it up front with invalid params, so what it stores can
// be served on all three transports.
func checkServable(t *a2a.Task) error {
	if t == nil {
		return nil
	}
	for _, m := range append([]*a2a.Message{t.Status.Message}, t.History...) {
		if m == nil {
			continue
		}
		if err := servableParts(m.Parts); err != nil {
			return err
		}
	}
	for _, a := range t.Artifacts {
		if a == nil {
			continue
		}
		if err := servableParts(a.Parts); err != nil {
			return err
		}
	}
	return nil
}

func servableParts(ps a2a.ContentParts) error {
	for _, p := range ps {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case nil:
			return fmt.Errorf("a2aserver: part without content: %w", engine.ErrInvalidArgument)
		case a2a.Data:
			if _, ok := c.Value.(map[string]any); !ok {
				return fmt.Errorf("a2aserver: data part whose value is not an object: %w", engine.ErrInvalidArgument)
			}
		}
	}
	return nil
}
