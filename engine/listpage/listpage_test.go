package listpage_test

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/listpage"
)

func TestMatches(t *testing.T) { // L2, O3
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	before, after := t0.Add(-time.Nanosecond), t0.Add(time.Nanosecond)
	for _, c := range []struct {
		name  string
		q     engine.Query
		owner string
		ctx   string
		state a2a.TaskState
		ts    *time.Time
		want  bool
	}{
		{"no filter", engine.Query{}, "", "c", a2a.TaskStateWorking, nil, true},
		{"context", engine.Query{ContextID: "c"}, "", "c", a2a.TaskStateWorking, nil, true},
		{"other context", engine.Query{ContextID: "c"}, "", "d", a2a.TaskStateWorking, nil, false},
		{"state", engine.Query{Status: a2a.TaskStateWorking}, "", "c", a2a.TaskStateWorking, nil, true},
		{"other state", engine.Query{Status: a2a.TaskStateWorking}, "", "c", a2a.TaskStateCompleted, nil, false},
		{"timestamp equal", engine.Query{StatusAfter: &t0}, "", "c", a2a.TaskStateWorking, &t0, true},
		{"timestamp after", engine.Query{StatusAfter: &t0}, "", "c", a2a.TaskStateWorking, &after, true},
		{"timestamp before", engine.Query{StatusAfter: &t0}, "", "c", a2a.TaskStateWorking, &before, false},
		{"no timestamp", engine.Query{StatusAfter: &t0}, "", "c", a2a.TaskStateWorking, nil, false},
		{"timestamp ignored without filter", engine.Query{}, "", "c", a2a.TaskStateWorking, &before, true},
		{"all three", engine.Query{ContextID: "c", Status: a2a.TaskStateWorking, StatusAfter: &t0}, "", "c", a2a.TaskStateWorking, &after, true},
		{"owner", engine.Query{Owner: "o"}, "o", "c", a2a.TaskStateWorking, nil, true},
		{"other owner", engine.Query{Owner: "o"}, "p", "c", a2a.TaskStateWorking, nil, false},
		{"owner prefix", engine.Query{Owner: "o"}, "o\x00", "c", a2a.TaskStateWorking, nil, false},
		{"no owner", engine.Query{Owner: "o"}, "", "c", a2a.TaskStateWorking, nil, false},
		{"owner ignored without filter", engine.Query{}, "o", "c", a2a.TaskStateWorking, nil, true},
		{"owner and all three", engine.Query{Owner: "o", ContextID: "c", Status: a2a.TaskStateWorking, StatusAfter: &t0}, "o", "c", a2a.TaskStateWorking, &after, true},
		{"all three, other owner", engine.Query{Owner: "o", ContextID: "c", Status: a2a.TaskStateWorking, StatusAfter: &t0}, "p", "c", a2a.TaskStateWorking, &after, false},
	} {
		if got := listpage.Matches(&c.q, c.owner, c.ctx, c.state, c.ts); got != c.want {
			t.Errorf("%s: Matches = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestShape(t *testing.T) { // L4
	mk := func() *a2a.Task {
		return &a2a.Task{
			History:   []*a2a.Message{{ID: "1"}, {ID: "2"}, {ID: "3"}},
			Artifacts: []*a2a.Artifact{{ID: "a"}},
		}
	}
	for _, c := range []struct {
		history, want int
		artifacts     bool
	}{{-1, 3, true}, {0, 0, false}, {2, 2, true}, {5, 3, false}} {
		task := mk()
		listpage.Shape(&engine.Query{HistoryLength: c.history, IncludeArtifacts: c.artifacts}, task)
		if len(task.History) != c.want || (c.want > 0 && task.History[c.want-1].ID != "3") {
			t.Errorf("history %d: kept %d messages, want the last %d", c.history, len(task.History), c.want)
		}
		if c.want == 0 && task.History != nil {
			t.Errorf("history 0: history %v, want nil", task.History)
		}
		if (task.Artifacts != nil) != c.artifacts {
			t.Errorf("artifacts %v: got %v", c.artifacts, task.Artifacts)
		}
	}
}

func TestResponse(t *testing.T) { // T6
	q := &engine.Query{PageSize: 2}
	c := []engine.Cursor{{UpdatedAt: 9, ID: "b"}, {UpdatedAt: 8, ID: "a"}}
	tasks := []*a2a.Task{{ID: "b"}, {ID: "a"}}
	resp := listpage.Response(q, tasks, c, true)
	if resp.NextPageToken != engine.EncodeToken(c[1]) || resp.PageSize != 2 || len(resp.Tasks) != 2 {
		t.Errorf("full page with more: %+v", resp)
	}
	if resp := listpage.Response(q, tasks, c, false); resp.NextPageToken != "" {
		t.Errorf("last page has token %q", resp.NextPageToken)
	}
	empty := listpage.Response(q, nil, nil, true)
	if empty.Tasks == nil || empty.TaskCursors == nil || len(empty.Tasks) != 0 || empty.NextPageToken != "" {
		t.Errorf("empty page: %+v, want empty non-nil slices and no token", empty)
	}
}
