package a2aserver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
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
