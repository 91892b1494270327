package taskcodec

import (
	"bytes"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// AppendTask and AppendMetadata extend dst with exactly what EncodeTask and
// EncodeMetadata return, leaving dst's bytes as they were; nil metadata
// appends nothing.
func TestAppendMatchesEncode(t *testing.T) {
	task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
		History:  []*a2a.Message{{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("hi")}}},
		Metadata: map[string]any{"k": []any{1.5, "v", nil}}}
	prefix := []byte("prefix")
	for _, c := range []struct {
		name   string
		encode func() ([]byte, error)
		append func(dst []byte) ([]byte, error)
	}{
		{"task", func() ([]byte, error) { return EncodeTask(task) }, func(dst []byte) ([]byte, error) { return AppendTask(dst, task) }},
		{"metadata", func() ([]byte, error) { return EncodeMetadata(task.Metadata) },
			func(dst []byte) ([]byte, error) { return AppendMetadata(dst, task.Metadata) }},
		{"nil metadata", func() ([]byte, error) { return EncodeMetadata(nil) }, func(dst []byte) ([]byte, error) { return AppendMetadata(dst, nil) }},
	} {
		want, err := c.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.append(bytes.Clone(prefix))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, append(bytes.Clone(prefix), want...)) {
			t.Errorf("%s: appended %q, want %q then %q", c.name, got, prefix, want)
		}
	}
	if got, err := AppendMetadata(prefix, map[string]any{"bad": make(chan int)}); err == nil || got != nil {
		t.Errorf("AppendMetadata of a channel: %q, %v; want nil and an error", got, err)
	}
}
