package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// codecFields lists, per a2a type, the fields EncodeTask stores. If a2a-go
// adds a field, TestCodecCoversEveryField fails until the codec handles it.
var codecFields = map[reflect.Type][]string{
	reflect.TypeFor[a2a.Task]():       {"ID", "Artifacts", "ContextID", "History", "Metadata", "Status"},
	reflect.TypeFor[a2a.TaskStatus](): {"Message", "State", "Timestamp"},
	reflect.TypeFor[a2a.Message]():    {"ID", "ContextID", "Extensions", "Metadata", "Parts", "ReferenceTasks", "Role", "TaskID"},
	reflect.TypeFor[a2a.Artifact]():   {"ID", "Description", "Extensions", "Metadata", "Name", "Parts"},
	reflect.TypeFor[a2a.Part]():       {"Content", "Filename", "MediaType", "Metadata"},
}

func TestCodecCoversEveryField(t *testing.T) {
	for typ, known := range codecFields {
		for f := range typ.Fields() {
			if !slices.Contains(known, f.Name) {
				t.Errorf("a2a.%s has field %s that the task codec does not store", typ.Name(), f.Name)
			}
		}
	}
}

func richTask() *a2a.Task {
	ts := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	msg := func(id string) *a2a.Message {
		return &a2a.Message{
			ID: id, ContextID: "c\x00tx", Extensions: []string{"ext:a", ""}, Role: a2a.MessageRoleUser, TaskID: "t",
			Metadata:       map[string]any{"k": []any{1.5, "x", nil, map[string]any{"n": true}}},
			ReferenceTasks: []a2a.TaskID{"r1", "\xff"},
			Parts: a2a.ContentParts{
				a2a.NewTextPart("héllo"), a2a.NewRawPart([]byte{0, 1, 2}),
				a2a.NewDataPart(map[string]any{"a": 1.0}), a2a.NewFileURLPart("https://x/y", "image/png"),
				{Content: a2a.Text(""), Filename: "f.txt", MediaType: "text/plain", Metadata: map[string]any{"m": "v"}},
			},
		}
	}
	return &a2a.Task{
		ID: "id\x00\xfe", ContextID: "ctx",
		Status:    a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts, Message: msg("s")},
		History:   []*a2a.Message{msg("m1"), msg("m2")},
		Artifacts: []*a2a.Artifact{{ID: "a", Description: "d", Name: "n", Extensions: []string{"e"}, Metadata: map[string]any{"z": 0.0}, Parts: a2a.ContentParts{a2a.NewTextPart("art")}}},
		Metadata:  map[string]any{"owner": "alice", "n": 3.0},
	}
}

// TestCodecRoundTrip: the decoded copy has the A2A JSON of the original.
func TestCodecRoundTrip(t *testing.T) {
	for _, task := range []*a2a.Task{
		richTask(),
		{ID: "x", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}},
	} {
		b, err := EncodeTask(task)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeTask(b)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(task)
		have, _ := json.Marshal(got)
		if !bytes.Equal(want, have) {
			t.Fatalf("round trip changed the task:\nwant %s\nhave %s", want, have)
		}
		if task.Status.Timestamp != nil && !got.Status.Timestamp.Equal(*task.Status.Timestamp) {
			t.Fatal("timestamp changed")
		}
	}
}

// TestCodecCopies: a decoded task shares nothing mutable with the input.
func TestCodecCopies(t *testing.T) {
	task := richTask()
	b, _ := EncodeTask(task)
	before := bytes.Clone(b)
	got, _ := DecodeTask(b)
	got.History[0].Parts[1].Content.(a2a.Raw)[0] = 9
	got.Metadata["owner"] = "mallory"
	if !bytes.Equal(b, before) {
		t.Fatal("mutating a decoded task changed the stored form")
	}
}

func FuzzDecodeTask(f *testing.F) {
	b, _ := EncodeTask(richTask())
	f.Add(b)
	f.Add([]byte{codecV1})
	f.Add([]byte{codecV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := DecodeTask(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes and decodes to the same JSON.
		b2, err := EncodeTask(task)
		if err != nil {
			return // e.g. an embedded JSON number JSON cannot re-encode
		}
		task2, err := DecodeTask(b2)
		if err != nil {
			t.Fatalf("re-encoded task does not decode: %v", err)
		}
		j1, _ := json.Marshal(task)
		j2, _ := json.Marshal(task2)
		if !bytes.Equal(j1, j2) {
			t.Fatalf("unstable: %s vs %s", j1, j2)
		}
	})
}

// TestMetadataCodec: light-projection metadata round-trips as the wire
// would carry it (Go ints become JSON numbers), and values JSON cannot carry
// are refused.
func TestMetadataCodec(t *testing.T) {
	in := map[string]any{"owner": "alice", "n": 3, "f": 1.5, "ok": true, "none": nil,
		"list": []any{"a", 2.0, map[string]any{"deep": []any{}}}, "typed": []string{"x", "y"}}
	b, err := EncodeMetadata(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(in)
	have, _ := json.Marshal(got)
	if !bytes.Equal(want, have) {
		t.Fatalf("metadata changed:\nwant %s\nhave %s", want, have)
	}
	if _, ok := got["n"].(float64); !ok {
		t.Fatalf("int metadata decoded as %T, want float64 as from JSON", got["n"])
	}
	if m, err := DecodeMetadata(nil); m != nil || err != nil {
		t.Fatalf("DecodeMetadata(nil) = %v, %v", m, err)
	}
	for _, bad := range []map[string]any{{"nan": math.NaN()}, {"inf": math.Inf(1)}, {"ch": make(chan int)}} {
		if _, err := EncodeMetadata(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("EncodeMetadata(%v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func FuzzDecodeMetadata(f *testing.F) {
	b, _ := EncodeMetadata(map[string]any{"k": []any{1.0, "s", nil, true, map[string]any{}}})
	f.Add(b)
	f.Add([]byte{codecV1, valObject, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMetadata(b)
		if err != nil || len(m) == 0 {
			return // no metadata: stored as none, like an empty map on the wire
		}
		b2, err := EncodeMetadata(m)
		if err != nil {
			t.Fatalf("decoded metadata does not re-encode: %v", err)
		}
		m2, err := DecodeMetadata(b2)
		if err != nil {
			t.Fatal(err)
		}
		j1, _ := json.Marshal(m)
		j2, _ := json.Marshal(m2)
		if !bytes.Equal(j1, j2) {
			t.Fatalf("unstable: %s vs %s", j1, j2)
		}
	})
}
