package taskcodec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// golden is the stored form as Pebble databases and PostgreSQL rows hold
// it: a task, each part stored on its own, and light metadata (hex).
var golden = map[string]string{
	"task":      "0104696400fe03637478125441534b5f53544154455f574f524b494e47010f010000000ee29f4e30075bcd15003c01026d3101630101650601016b03000000000000f83f050102686900000002020001000000030601016102000000040b68747470733a2f2f782f790009696d6167652f706e6700ff01017209524f4c455f5553455201740201026d3101630101650601016b03000000000000f83f050102686900000002020001000000030601016102000000040b68747470733a2f2f782f790009696d6167652f706e6700ff01017209524f4c455f555345520174000201016101640101780601017a040177016e010103617274000000000601056f776e65720405616c696365",
	"message":   "0100000000000101026d3101630101650601016b03000000000000f83f050102686900000002020001000000030601016102000000040b68747470733a2f2f782f790009696d6167652f706e6700ff01017209524f4c455f5553455201740000",
	"status":    "010000000001026d3101630101650601016b03000000000000f83f050102686900000002020001000000030601016102000000040b68747470733a2f2f782f790009696d6167652f706e6700ff01017209524f4c455f555345520174000000",
	"artifacts": "010000000000000201016101640101780601017a040177016e0101036172740000000000",
	"metadata":  "010601056f776e65720405616c696365",
}

// goldenParts is what the golden forms encode (one-key maps, so the bytes
// do not depend on map order).
func goldenParts() (*a2a.Task, *a2a.Message, []*a2a.Artifact, map[string]any) {
	ts := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	m := &a2a.Message{ID: "m1", ContextID: "c", Role: a2a.MessageRoleUser, TaskID: "t", Extensions: []string{"e"},
		Metadata: map[string]any{"k": 1.5}, ReferenceTasks: []a2a.TaskID{"r"},
		Parts: a2a.ContentParts{a2a.NewTextPart("hi"), a2a.NewRawPart([]byte{0, 1}), a2a.NewDataPart(map[string]any{"a": true}), a2a.NewFileURLPart("https://x/y", "image/png"), nil}}
	art := &a2a.Artifact{ID: "a", Description: "d", Name: "n", Extensions: []string{"x"}, Metadata: map[string]any{"z": "w"}, Parts: a2a.ContentParts{a2a.NewTextPart("art")}}
	meta := map[string]any{"owner": "alice"}
	task := &a2a.Task{ID: "id\x00\xfe", ContextID: "ctx", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts, Message: m},
		History: []*a2a.Message{m, nil}, Artifacts: []*a2a.Artifact{art, nil}, Metadata: meta}
	return task, m, []*a2a.Artifact{art, nil}, meta
}

// TestStoredFormIsStable: the stored form is on disk and in database rows;
// these bytes were written by the codec before it moved out of engine and
// must still be written and read the same way.
func TestStoredFormIsStable(t *testing.T) {
	task, m, arts, meta := goldenParts()
	encode := map[string]func() ([]byte, error){
		"task":      func() ([]byte, error) { return EncodeTask(task) },
		"message":   func() ([]byte, error) { return EncodeMessage(m) },
		"status":    func() ([]byte, error) { return EncodeStatusMessage(m) },
		"artifacts": func() ([]byte, error) { return EncodeArtifacts(arts) },
		"metadata":  func() ([]byte, error) { return EncodeMetadata(meta) },
	}
	for name, want := range golden {
		got, err := encode[name]()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if hex.EncodeToString(got) != want {
			t.Errorf("%s: stored form changed:\n got %x\nwant %s", name, got, want)
		}
	}
	dec := func(name string) []byte { b, _ := hex.DecodeString(golden[name]); return b }
	gotTask, err := DecodeTask(dec("task"))
	if err != nil || jsonOf(gotTask) != jsonOf(task) {
		t.Errorf("golden task decodes to %s, %v", jsonOf(gotTask), err)
	}
	for name, decode := range map[string]func([]byte) (any, error){
		"message":   func(b []byte) (any, error) { return DecodeMessage(b) },
		"status":    func(b []byte) (any, error) { return DecodeStatusMessage(b) },
		"artifacts": func(b []byte) (any, error) { return DecodeArtifacts(b) },
		"metadata":  func(b []byte) (any, error) { return DecodeMetadata(b) },
	} {
		want := map[string]any{"message": m, "status": m, "artifacts": arts, "metadata": meta}[name]
		got, err := decode(dec(name))
		if err != nil || jsonOf(got) != jsonOf(want) {
			t.Errorf("golden %s decodes to %s, %v; want %s", name, jsonOf(got), err, jsonOf(want))
		}
	}
}

// TestPartsAreTasksHoldingOnlyThem: a part stored on its own is exactly the
// stored task that holds only that part, and its decoder refuses anything
// else.
func TestPartsAreTasksHoldingOnlyThem(t *testing.T) {
	task := richTask()
	m, arts := task.History[0], task.Artifacts
	for _, c := range []struct {
		name    string
		part    func() ([]byte, error)
		asTask  *a2a.Task
		decode  func([]byte) (any, error)
		decoded any
	}{
		{"message", func() ([]byte, error) { return EncodeMessage(m) }, &a2a.Task{History: []*a2a.Message{m}},
			func(b []byte) (any, error) { return DecodeMessage(b) }, m},
		{"nil message", func() ([]byte, error) { return EncodeMessage(nil) }, &a2a.Task{History: []*a2a.Message{nil}},
			func(b []byte) (any, error) { return DecodeMessage(b) }, (*a2a.Message)(nil)},
		{"status message", func() ([]byte, error) { return EncodeStatusMessage(m) }, &a2a.Task{Status: a2a.TaskStatus{Message: m}},
			func(b []byte) (any, error) { return DecodeStatusMessage(b) }, m},
		{"artifacts", func() ([]byte, error) { return EncodeArtifacts(arts) }, &a2a.Task{Artifacts: arts},
			func(b []byte) (any, error) { return DecodeArtifacts(b) }, arts},
	} {
		b, err := c.part()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		whole, err := EncodeTask(c.asTask)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, whole) {
			t.Errorf("%s: stored form %x differs from the task holding only it %x", c.name, b, whole)
		}
		got, err := c.decode(b)
		if err != nil || jsonOf(got) != jsonOf(c.decoded) {
			t.Errorf("%s: decodes to %s, %v", c.name, jsonOf(got), err)
		}
	}
	// A whole task, or a part of another kind, is not a part.
	wholeTask, _ := EncodeTask(task)
	msg, _ := EncodeMessage(m)
	two, _ := EncodeTask(&a2a.Task{History: []*a2a.Message{m, m}})
	for name, err := range map[string]error{
		"task as message":      second(DecodeMessage(wholeTask)),
		"two messages":         second(DecodeMessage(two)),
		"message as status":    second(DecodeStatusMessage(msg)),
		"message as artifacts": second(DecodeArtifacts(msg)),
		"task as artifacts":    second(DecodeArtifacts(wholeTask)),
		"task as status":       second(DecodeStatusMessage(wholeTask)),
	} {
		if !errors.Is(err, engine.ErrInternal) {
			t.Errorf("%s: %v, want ErrInternal", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestTimestampForm: every offset the binary form holds is kept; one it
// cannot hold becomes the same instant in UTC.
func TestTimestampForm(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 678, time.UTC)
	for _, loc := range []*time.Location{time.UTC, time.FixedZone("plus1", 3600), time.FixedZone("lmt", 3600+17), time.FixedZone("minus1min", -60), time.FixedZone("far", 40000*60)} {
		in := base.In(loc)
		got, err := DecodeTimestamp(AppendTimestamp(nil, in))
		if err != nil || !got.Equal(in) {
			t.Errorf("%s: %v, %v", loc, got, err)
		}
	}
	if _, err := DecodeTimestamp([]byte{9}); !errors.Is(err, engine.ErrInternal) {
		t.Errorf("bad timestamp: %v", err)
	}
}

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

// TestDecoderPage: a Decoder decodes a page of tasks to the A2A JSON
// DecodeTask gives, in fewer allocations (under half, for tasks of the
// benchmarks' shape), and the tasks share nothing a
// caller can change through another: appending to one task's slices or
// changing its messages, parts and timestamps leaves the others as they
// were, and the decoded metadata is a fresh map.
func TestDecoderPage(t *testing.T) {
	const n = 20
	tasks := make([]*a2a.Task, n)
	want := make([][]byte, n)
	forms := make([]string, n)
	for i := range tasks {
		tasks[i] = richTask()
		tasks[i].ID = a2a.TaskID(fmt.Sprint("t", i))
		b, err := EncodeTask(tasks[i])
		if err != nil {
			t.Fatal(err)
		}
		forms[i] = string(b)
		want[i], _ = json.Marshal(tasks[i])
	}
	var d Decoder
	got := make([]a2a.Task, n)
	for i := range got {
		got[i].Metadata = map[string]any{"stale": true} // Task starts from a zero task
		if err := d.Task(forms[i], &got[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range got {
		if have, _ := json.Marshal(&got[i]); !bytes.Equal(have, want[i]) {
			t.Fatalf("task %d:\nwant %s\nhave %s", i, want[i], have)
		}
	}
	// Change everything of task 0 a caller can change.
	g := &got[0]
	g.History = append(g.History, &a2a.Message{ID: "new"})
	g.Artifacts = append(g.Artifacts, &a2a.Artifact{ID: "new"})
	g.History[0].Parts = append(g.History[0].Parts, a2a.NewTextPart("new"))
	g.History[0].Extensions = append(g.History[0].Extensions, "new")
	g.History[0].Parts[0].Filename = "changed"
	g.History[0].Extensions[0] = "changed"
	g.Artifacts[0].Name = "changed"
	*g.Status.Timestamp = time.Time{}
	for i := 1; i < n; i++ {
		if have, _ := json.Marshal(&got[i]); !bytes.Equal(have, want[i]) {
			t.Fatalf("changing task 0 changed task %d:\nwant %s\nhave %s", i, want[i], have)
		}
	}
	md, err := d.Metadata(string(mustEncodeMetadata(t, tasks[0].Metadata)))
	if err != nil || !reflect.DeepEqual(md, tasks[0].Metadata) {
		t.Fatalf("Metadata = %v, %v", md, err)
	}
	if md, err := d.Metadata(""); md != nil || err != nil {
		t.Fatalf("Metadata(\"\") = %v, %v; want none", md, err)
	}
	// Realistic tasks (no metadata maps): the allocations go page-wide.
	for i := range forms {
		b, err := EncodeTask(benchTask())
		if err != nil {
			t.Fatal(err)
		}
		forms[i] = string(b)
	}
	exact := testing.AllocsPerRun(10, func() {
		for _, f := range forms {
			if _, err := DecodeTask([]byte(f)); err != nil {
				t.Fatal(err)
			}
		}
	})
	paged := testing.AllocsPerRun(10, func() {
		var d Decoder
		var page [n]a2a.Task
		for i, f := range forms {
			if err := d.Task(f, &page[i]); err != nil {
				t.Fatal(err)
			}
		}
	})
	if paged >= exact/2 {
		t.Errorf("a page decoded with one Decoder allocates %v times, DecodeTask task by task %v: want under half", paged, exact)
	}
}

func mustEncodeMetadata(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := EncodeMetadata(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzDecodeTask(f *testing.F) {
	b, _ := EncodeTask(richTask())
	f.Add(b)
	f.Add([]byte{version})
	f.Add([]byte{version, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := DecodeTask(b)
		var d Decoder
		var paged a2a.Task
		if perr := d.Task(string(b), &paged); (perr == nil) != (err == nil) {
			t.Fatalf("DecodeTask error %v, Decoder.Task error %v", err, perr)
		}
		if err != nil {
			return
		}
		// (json.Marshal may refuse both: a time out of JSON's range.)
		if j1, _ := json.Marshal(task); !bytes.Equal(j1, must(json.Marshal(&paged))) {
			t.Fatalf("DecodeTask %s, Decoder.Task %s", j1, must(json.Marshal(&paged)))
		}
		// Whatever decodes re-encodes and decodes to the same JSON.
		b2, err := EncodeTask(task)
		if err != nil {
			return // a task the encoder refuses has nothing to compare
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

// must is b, whatever the error.
func must(b []byte, _ error) []byte { return b }

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
		if _, err := EncodeMetadata(bad); !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("EncodeMetadata(%v) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func FuzzDecodeMetadata(f *testing.F) {
	b, _ := EncodeMetadata(map[string]any{"k": []any{1.0, "s", nil, true, map[string]any{}}})
	f.Add(b)
	f.Add([]byte{version, valObject, 0xff, 0xff, 0xff, 0x0f})
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

// TestDecoderShape (L4): a shaped Decoder builds the same task as a full
// decode trimmed by listpage's rule (last n messages, artifacts only when
// asked for), for every history length, allocating nothing for what it
// leaves out; and it still rejects a corrupt message it skips.
func TestDecoderShape(t *testing.T) {
	task := richTask()
	m := task.History[0]
	task.History = []*a2a.Message{m, nil, m, m}
	b, err := EncodeTask(task)
	if err != nil {
		t.Fatal(err)
	}
	for _, history := range []int{-1, 0, 1, 2, 4, 9} {
		for _, artifacts := range []bool{false, true} {
			var d Decoder
			d.Shape(history, artifacts)
			var got a2a.Task
			if err := d.Task(string(b), &got); err != nil {
				t.Fatal(err)
			}
			want, _ := DecodeTask(b)
			if history >= 0 && len(want.History) > history {
				want.History = want.History[len(want.History)-history:]
				if len(want.History) == 0 {
					want.History = nil
				}
			}
			if !artifacts {
				want.Artifacts = nil
			}
			wj, _ := json.Marshal(want)
			gj, _ := json.Marshal(&got)
			if !bytes.Equal(wj, gj) {
				t.Fatalf("history %d artifacts %v:\nwant %s\nhave %s", history, artifacts, wj, gj)
			}
		}
	}
	none := testing.AllocsPerRun(50, func() {
		var d Decoder
		d.Shape(0, false)
		var got a2a.Task
		_ = d.Task(string(b), &got)
	})
	all := testing.AllocsPerRun(50, func() {
		var d Decoder
		var got a2a.Task
		_ = d.Task(string(b), &got)
	})
	if none >= all/2 {
		t.Fatalf("a decode without history and artifacts allocates %.0f times, a full one %.0f: the trimmed parts were built", none, all)
	}
	// A body that ends inside a skipped message is still an error.
	var d Decoder
	d.Shape(0, false)
	for cut := 1; cut < len(b); cut++ {
		if err := d.Task(string(b[:cut]), &a2a.Task{}); err == nil {
			t.Fatalf("a body cut at %d of %d bytes decoded", cut, len(b))
		}
	}
}

// TestDecoderHead: Head decodes what precedes the history exactly as Task
// does, fails on a form cut inside it or of another version, and reads
// nothing after the status message (a cut there still decodes).
func TestDecoderHead(t *testing.T) {
	task := richTask()
	b, err := EncodeTask(task)
	if err != nil {
		t.Fatal(err)
	}
	var d Decoder
	// Into a task holding every field already (another rich task): what
	// the head does not set must come out empty, not left over.
	got := *richTask()
	got.ID, got.ContextID, got.Status = "other", "other-ctx", a2a.TaskStatus{State: a2a.TaskStateFailed}
	if err := d.Head(string(b), &got); err != nil {
		t.Fatal(err)
	}
	want := a2a.Task{ID: task.ID, ContextID: task.ContextID, Status: task.Status}
	wj, _ := json.Marshal(&want)
	gj, _ := json.Marshal(&got)
	if !bytes.Equal(wj, gj) {
		t.Fatalf("head:\nwant %s\nhave %s", wj, gj)
	}
	// The head ends where b parts from the form of the same head without
	// history (its history count: 2, not 0).
	hb, err := EncodeTask(&want)
	if err != nil {
		t.Fatal(err)
	}
	headEnd := 0
	for b[headEnd] == hb[headEnd] {
		headEnd++
	}
	for cut := 1; cut < len(b); cut++ {
		err := d.Head(string(b[:cut]), &a2a.Task{})
		if cut < headEnd && err == nil {
			t.Fatalf("a form cut inside its head, at %d of %d bytes, decoded", cut, headEnd)
		}
		if cut >= headEnd && err != nil {
			t.Fatalf("a form cut after its head (%d bytes) at %d: %v", headEnd, cut, err)
		}
	}
	if err := d.Head("\x02"+string(b[1:]), &a2a.Task{}); !errors.Is(err, engine.ErrInternal) {
		t.Fatalf("another version: %v, want ErrInternal", err)
	}
	// AppendTaskHead says where the head ends, on this form and on one
	// whose head is all it has (then the form less its three empty
	// counts), appended after other bytes.
	for _, c := range []struct {
		task *a2a.Task
		end  int
	}{{task, headEnd}, {&want, len(hb) - 3}} {
		form, n, err := AppendTaskHead([]byte("before"), c.task)
		whole := must(EncodeTask(c.task)) // its maps' order may differ after the head
		if n != c.end || err != nil || len(form)-6 != len(whole) || string(form[6:6+n]) != string(whole[:n]) {
			t.Errorf("AppendTaskHead: head %d, %v, %d bytes; the head ends at %d of %d", n, err, len(form)-6, c.end, len(whole))
		}
	}
}
