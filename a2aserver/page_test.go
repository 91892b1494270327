package a2aserver

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/internal/taskgen"
)

// TestListPageBytes: a ListTasks page stops before MaxPageBytes (keeping at
// least one task) and its token continues the traversal, which still sees
// every task once in order.
func TestListPageBytes(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	for i := range 7 {
		task := newTask(fmt.Sprintf("t%d", i), "c")
		task.Artifacts = []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart(strings.Repeat("x", 400<<10))}}}
		if _, err := mem.Create(t.Context(), task); err != nil {
			t.Fatal(err)
		}
	}
	ts := NewTaskStore(mem, TaskStoreOptions{MaxPageBytes: 1 << 20})
	var seen []a2a.TaskID
	req := &a2a.ListTasksRequest{PageSize: 100, IncludeArtifacts: true}
	for pages := 0; ; pages++ {
		resp, err := ts.List(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, task := range resp.Tasks {
			size += engine.TaskShape(task).Bytes
			seen = append(seen, task.ID)
		}
		if len(resp.Tasks) == 0 || (len(resp.Tasks) > 1 && size > 1<<20) {
			t.Fatalf("page %d: %d tasks of %d bytes, want 1.. tasks within 1 MiB", pages, len(resp.Tasks), size)
		}
		if resp.TotalSize != 7 {
			t.Errorf("totalSize %d, want 7", resp.TotalSize)
		}
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	want := "[t6 t5 t4 t3 t2 t1 t0]"
	if got := fmt.Sprint(seen); got != want {
		t.Errorf("traversal saw %s, want %s", got, want)
	}
	// Without artifacts the same page holds everything.
	resp, err := ts.List(t.Context(), &a2a.ListTasksRequest{PageSize: 100})
	if err != nil || len(resp.Tasks) != 7 || resp.NextPageToken != "" {
		t.Errorf("page without artifacts: %d tasks, token %q, %v; want all 7", len(resp.Tasks), resp.NextPageToken, err)
	}
}

// TestServable: content a2a-go's gRPC binding cannot send, or its gRPC
// client cannot decode, is refused with invalid params before anything is
// stored, by Create and Update alike. The review of #14 (finding 4) added
// every case after "no content": the former check let them all through
// (and skipped nil parts, on which a2a-go's conversion panics).
func TestServable(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	ts := TaskStore(mem)
	withPart := func(p *a2a.Part) func(*a2a.Task) {
		return func(task *a2a.Task) { task.History = []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, p)} }
	}
	withMessage := func(f func(*a2a.Message)) func(*a2a.Task) {
		return func(task *a2a.Task) {
			m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))
			f(m)
			task.History = []*a2a.Message{m}
		}
	}
	withArtifact := func(a *a2a.Artifact) func(*a2a.Task) {
		return func(task *a2a.Task) { task.Artifacts = []*a2a.Artifact{a} }
	}
	for name, spoil := range map[string]func(*a2a.Task){
		"list data":         withPart(a2a.NewDataPart([]any{1.0})),
		"null data":         withPart(&a2a.Part{Content: a2a.Data{Value: nil}}),
		"no content":        withPart(&a2a.Part{}),
		"nil part":          withMessage(func(m *a2a.Message) { m.Parts = append(m.Parts, nil) }),
		"role user":         withMessage(func(m *a2a.Message) { m.Role = "user" }),
		"role bogus":        withMessage(func(m *a2a.Message) { m.Role = "ROLE_BOGUS" }),
		"no role":           withMessage(func(m *a2a.Message) { m.Role = "" }),
		"no message ID":     withMessage(func(m *a2a.Message) { m.ID = "" }),
		"nil history entry": func(task *a2a.Task) { task.History = []*a2a.Message{nil} },
		"status message role": func(task *a2a.Task) {
			task.Status.Message = a2a.NewMessage("agent", a2a.NewTextPart("x"))
		},
		"nil artifact":        withArtifact(nil),
		"artifact without ID": withArtifact(&a2a.Artifact{Parts: a2a.ContentParts{a2a.NewTextPart("x")}}),
		"artifact nil part":   withArtifact(&a2a.Artifact{ID: "a", Parts: a2a.ContentParts{nil}}),
		"no context ID":       func(task *a2a.Task) { task.ContextID = "" },
	} {
		task := newTask("t-"+name, "c")
		spoil(task)
		if _, err := ts.Create(t.Context(), task); err == nil || !strings.Contains(err.Error(), msgInvalidParams) {
			t.Errorf("%s: Create = %v, want invalid params", name, err)
		}
		if _, err := mem.Get(t.Context(), task.ID); err == nil {
			t.Errorf("%s: stored anyway", name)
		}
		good := newTask("u-"+name, "c")
		if _, err := ts.Create(t.Context(), good); err != nil {
			t.Fatal(err)
		}
		task.ID = good.ID // the same content, as an update
		if _, err := ts.Update(t.Context(), &taskstore.UpdateRequest{Task: task, PrevVersion: 1}); err == nil || !strings.Contains(err.Error(), msgInvalidParams) {
			t.Errorf("%s: Update = %v, want invalid params", name, err)
		}
		if rec, err := mem.Get(t.Context(), good.ID); err != nil || rec.Revision != 1 {
			t.Errorf("%s: updated anyway", name)
		}
	}
	ok := newTask("ok", "c")
	ok.Status.Message = a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewDataPart(map[string]any{"k": []any{1.0}}))
	ok.History = []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))}
	ok.Artifacts = []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart("y")}}}
	if _, err := ts.Create(t.Context(), ok); err != nil {
		t.Errorf("servable task: %v", err)
	}
}

// jsonCases are tasks whose JSON form is large for their TaskShape: text
// that encoding/json escapes, many small fields with long keys, long
// numbers, raw bytes, control characters and invalid UTF-8.
func jsonCases() map[string]*a2a.Task {
	now := time.Now()
	mk := func(f func(*a2a.Task)) *a2a.Task {
		task := &a2a.Task{ID: "t", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &now}}
		f(task)
		return task
	}
	many := func(n int, f func(i int)) {
		for i := range n {
			f(i)
		}
	}
	return map[string]*a2a.Task{
		"empty": mk(func(*a2a.Task) {}),
		"escaped text": mk(func(t *a2a.Task) {
			t.History = []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("<>&\"\\\n\x01\u2028", 200)))}
		}),
		"invalid UTF-8": mk(func(t *a2a.Task) { t.Metadata = map[string]any{"\xff\x01": "\xfe\xff<"} }),
		"small messages": mk(func(t *a2a.Task) {
			many(500, func(int) {
				t.History = append(t.History, &a2a.Message{ID: "m", Role: a2a.MessageRoleAgent, ContextID: "c", TaskID: "t",
					ReferenceTasks: []a2a.TaskID{"a"}, Extensions: []string{"e"}, Metadata: map[string]any{}, Parts: a2a.ContentParts{a2a.NewTextPart("x")}})
			})
		}),
		"small parts": mk(func(t *a2a.Task) {
			m := &a2a.Message{ID: "m", Role: a2a.MessageRoleAgent}
			many(500, func(int) {
				m.Parts = append(m.Parts, &a2a.Part{Content: a2a.URL("u"), Filename: "f", MediaType: "m", Metadata: map[string]any{}},
					&a2a.Part{Content: a2a.Raw("r")}, &a2a.Part{Content: a2a.Data{Value: map[string]any{}}})
			})
			m.Parts = append(m.Parts, &a2a.Part{Content: a2a.Raw(strings.Repeat("<", 3001))})
			t.History = []*a2a.Message{m}
		}),
		"small artifacts": mk(func(t *a2a.Task) {
			many(500, func(int) {
				t.Artifacts = append(t.Artifacts, &a2a.Artifact{ID: "a", Name: "n", Description: "d", Extensions: []string{"e"},
					Metadata: map[string]any{}, Parts: a2a.ContentParts{a2a.NewTextPart("x")}})
			})
		}),
		"long numbers": mk(func(t *a2a.Task) {
			var l []any
			many(500, func(int) {
				l = append(l, -1.2345678901234567e-300, 1, int64(-1<<62), true, nil, []any{}, map[string]any{})
			})
			t.Metadata = map[string]any{"l": l}
		}),
		"generated": taskgen.New(taskgen.Shape{History: 5, Artifacts: 3}).Task(1),
	}
}

// TestJSONExtra: engine.TaskShape plus jsonExtra bounds the size of a
// task's JSON form (encoding/json, as a2a-go writes it), and stays within
// maxJSONFactor times TaskShape.
func TestJSONExtra(t *testing.T) {
	for name, task := range jsonCases() {
		b, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		shape, extra := engine.TaskShape(task).Bytes, jsonExtra(task)
		if len(b) > shape+extra {
			t.Errorf("%s: JSON %d bytes, over TaskShape %d + jsonExtra %d", name, len(b), shape, extra)
		}
		if shape+extra > maxJSONFactor*shape {
			t.Errorf("%s: TaskShape %d + jsonExtra %d over %d times TaskShape", name, shape, extra, maxJSONFactor)
		}
	}
}

// TestListPageBytesJSON (review of #14, finding 7): a page of tasks whose
// text JSON escapes six-fold (all '<', sent as \u003c) stays within
// MaxPageBytes in its JSON form too. Checked against the former fitPage,
// which measured the protobuf form only: the page's JSON was 5 times the
// limit.
func TestListPageBytesJSON(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	for i := range 10 {
		task := newTask(fmt.Sprintf("t%d", i), "c")
		task.Artifacts = []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.NewTextPart(strings.Repeat("<", 100<<10))}}}
		if _, err := mem.Create(t.Context(), task); err != nil {
			t.Fatal(err)
		}
	}
	const limit = 1 << 20
	ts := NewTaskStore(mem, TaskStoreOptions{MaxPageBytes: limit})
	seen := 0
	req := &a2a.ListTasksRequest{PageSize: 100, IncludeArtifacts: true}
	for {
		resp, err := ts.List(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Tasks) > 1 && len(b) > limit {
			t.Errorf("page of %d tasks: %d bytes of JSON, over MaxPageBytes %d", len(resp.Tasks), len(b), limit)
		}
		seen += len(resp.Tasks)
		if resp.NextPageToken == "" {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	if seen != 10 {
		t.Errorf("traversal saw %d tasks, want 10", seen)
	}
}
