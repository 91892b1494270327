package taskcodec

import (
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// EncodeMetadata returns the stored form of task metadata for light reads
// (engine.ProjectionLight), nil for none (a nil map): the version byte and
// the binary value form the task codec uses, so a light page decodes
// metadata without parsing JSON. An empty map has a form of its own and
// decodes to an empty map, as in a whole task (EncodeTask). A value it
// cannot hold is engine.ErrInvalidArgument.
func EncodeMetadata(m map[string]any) ([]byte, error) {
	if m == nil {
		return nil, nil
	}
	return AppendMetadata(make([]byte, 0, 64), m)
}

// AppendMetadata appends the stored form of m (EncodeMetadata's: nothing
// for a nil map) to dst and returns the extended buffer; on an error it
// returns nil.
func AppendMetadata(dst []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return dst, nil
	}
	w := writer{buf: append(dst, version)}
	w.value(m)
	return w.result("metadata")
}

// DecodeMetadata decodes the output of EncodeMetadata into a new map (nil
// for none, empty for an empty map).
func DecodeMetadata(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	return decodeMetadata(string(b), &Decoder{exact: true})
}

// decodeMetadata decodes EncodeMetadata's form held in s (not empty),
// allocating from d.
func decodeMetadata(s string, d *Decoder) (map[string]any, error) {
	if s[0] != version {
		return nil, fmt.Errorf("taskcodec: decode metadata: unknown format: %w", engine.ErrInternal)
	}
	r := reader{s: s[1:], d: d}
	m, _ := r.value().(map[string]any)
	if r.err == nil && (m == nil || r.off != len(r.s)) {
		r.err = errors.New("not a map")
	}
	if r.err != nil {
		return nil, fmt.Errorf("taskcodec: decode metadata: %v: %w", r.err, engine.ErrInternal)
	}
	return m, nil
}

// LightTask builds a light-projection task (engine.ProjectionLight) from
// stored fields: ID, context ID, status state and timestamp (copied), and
// metadata, the output of EncodeMetadata.
func LightTask(id a2a.TaskID, contextID string, status a2a.TaskStatus, metadata []byte) (*a2a.Task, error) {
	t := &a2a.Task{ID: id, ContextID: contextID, Status: a2a.TaskStatus{State: status.State}}
	if status.Timestamp != nil {
		ts := *status.Timestamp
		t.Status.Timestamp = &ts
	}
	m, err := DecodeMetadata(metadata)
	if err != nil {
		return nil, err
	}
	t.Metadata = m
	return t, nil
}

// AppendTimestamp appends the stored form of a timestamp to dst: time's
// binary form (MarshalBinary), which keeps the instant, the nanoseconds and
// the zone offset. An offset that form cannot hold (beyond ±32767 minutes,
// or exactly -1 minute, which marks UTC) is stored as the same instant in
// UTC; so is a negative offset with a seconds part (a historical local
// mean time such as -4:56:02), which Go's decoder reads back as a
// different offset (it takes the seconds byte as unsigned).
func AppendTimestamp(dst []byte, t time.Time) []byte {
	if _, off := t.Zone(); off%60 < 0 {
		t = t.UTC()
	}
	if b, err := t.AppendBinary(dst); err == nil {
		return b
	}
	b, _ := t.UTC().AppendBinary(dst)
	return b
}

// DecodeTimestamp decodes the output of AppendTimestamp.
func DecodeTimestamp(b []byte) (time.Time, error) {
	var t time.Time
	if err := t.UnmarshalBinary(b); err != nil {
		return time.Time{}, fmt.Errorf("taskcodec: decode timestamp: %v: %w", err, engine.ErrInternal)
	}
	return t, nil
}
