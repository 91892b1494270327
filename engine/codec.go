package engine

import (
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// EncodeTask is the stored form of a task that backends share: its A2A JSON
// encoding. Decoding it yields an independent copy (L9).
func EncodeTask(t *a2a.Task) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("engine: encode task: %v: %w", err, ErrInvalidArgument)
	}
	return b, nil
}

// DecodeTask decodes a task stored by EncodeTask.
func DecodeTask(b []byte) (*a2a.Task, error) {
	t := new(a2a.Task)
	if err := json.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("engine: decode task: %v: %w", err, ErrInternal)
	}
	return t, nil
}

// EncodeMetadata is the stored form of task metadata for light projections:
// nil for none, JSON otherwise.
func EncodeMetadata(m map[string]any) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("engine: encode metadata: %v: %w", err, ErrInvalidArgument)
	}
	return b, nil
}

// LightTask builds a light-projection task (ProjectionLight) from stored
// fields. metadata is the output of EncodeMetadata.
func LightTask(id a2a.TaskID, contextID string, status a2a.TaskStatus, metadata []byte) (*a2a.Task, error) {
	t := &a2a.Task{ID: id, ContextID: contextID, Status: a2a.TaskStatus{State: status.State}}
	if status.Timestamp != nil {
		ts := *status.Timestamp
		t.Status.Timestamp = &ts
	}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &t.Metadata); err != nil {
			return nil, fmt.Errorf("engine: decode metadata: %v: %w", err, ErrInternal)
		}
	}
	return t, nil
}
