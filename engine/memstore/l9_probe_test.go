package memstore

// TestL9PageSharing (L9): the page-wide Decoder shares nothing mutable
// between the tasks of one page or with the store. storetest's testCopies
// mutates one task at a time; this scribbles over everything reachable
// from one task of a full page — writing through every slice up to its
// capacity (so an uncapped chunk slice would clobber the next task's
// values), flipping raw file bytes in place, writing into data-part
// values, metadata maps and lists, ReferenceTasks, Extensions, nested
// messages and the status timestamp — then checks the page's other tasks,
// a second page, Get, and the input tasks (Create and Replace must not
// retain them).

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

func probeRichTask(id string, i int) *a2a.Task {
	ts := time.Date(2025, 1, 2, 3, 4, 5, i, time.FixedZone("", 3600))
	msg := func(mid string) *a2a.Message {
		return &a2a.Message{
			ID: mid, ContextID: "c", TaskID: a2a.TaskID(id), Role: a2a.MessageRoleAgent,
			Extensions:     []string{"ext-1", "ext-2"},
			ReferenceTasks: []a2a.TaskID{"ref-1", "ref-2"},
			Metadata:       map[string]any{"k": "v", "nested": map[string]any{"n": 1.0}, "list": []any{"a", 2.0}},
			Parts: a2a.ContentParts{
				a2a.NewTextPart("text " + mid),
				{Content: a2a.Raw([]byte{1, 2, 3, byte(i)}), Filename: "f.bin", MediaType: "application/octet-stream", Metadata: map[string]any{"pm": "v"}},
				{Content: a2a.Data{Value: map[string]any{"d": []any{1.0, map[string]any{"deep": "v"}}}}},
				{Content: a2a.URL("https://example.com/" + mid)},
				nil,
			},
		}
	}
	art := func(aid string) *a2a.Artifact {
		return &a2a.Artifact{
			ID: a2a.ArtifactID(aid), Name: "n", Description: "d",
			Extensions: []string{"ae"},
			Metadata:   map[string]any{"am": []any{"x", map[string]any{"y": "z"}}},
			Parts:      a2a.ContentParts{{Content: a2a.Raw([]byte{9, 8, 7})}, a2a.NewTextPart("art " + aid)},
		}
	}
	return &a2a.Task{
		ID: a2a.TaskID(id), ContextID: "c",
		Status:    a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts, Message: msg(id + "-status")},
		History:   []*a2a.Message{msg(id + "-h0"), msg(id + "-h1"), nil, msg(id + "-h3")},
		Artifacts: []*a2a.Artifact{art(id + "-a0"), nil, art(id + "-a2")},
		Metadata:  map[string]any{"owner": "o", "nested": map[string]any{"k": "v"}, "labels": []any{"l1", "l2"}},
	}
}

func probeJSON(t *testing.T, tk *a2a.Task) string {
	t.Helper()
	b, err := json.Marshal(tk)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func probeScribbleValue(v any) {
	switch v := v.(type) {
	case map[string]any:
		probeScribbleMap(v)
	case []any:
		full := v[:cap(v)]
		for i := range full {
			probeScribbleValue(full[i])
			full[i] = "x"
		}
	}
}

func probeScribbleMap(m map[string]any) {
	if m == nil {
		return
	}
	for k, v := range m {
		probeScribbleValue(v)
		m[k] = "x"
	}
	m["added"] = 1.0
}

func probeScribbleParts(ps a2a.ContentParts) {
	for _, p := range ps[:cap(ps)] {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case a2a.Raw:
			full := c[:cap(c)]
			for i := range full {
				full[i] ^= 0xff
			}
		case a2a.Data:
			probeScribbleValue(c.Value)
		}
		p.Filename, p.MediaType = "x", "x"
		probeScribbleMap(p.Metadata)
		*p = a2a.Part{Content: a2a.Text("x")}
	}
}

func probeScribbleMessage(m *a2a.Message) {
	m.ID, m.ContextID, m.TaskID, m.Role = "x", "x", "x", "x"
	ext := m.Extensions[:cap(m.Extensions)]
	for i := range ext {
		ext[i] = "x"
	}
	m.Extensions = append(m.Extensions, "appended")
	refs := m.ReferenceTasks[:cap(m.ReferenceTasks)]
	for i := range refs {
		refs[i] = "x"
	}
	m.ReferenceTasks = append(m.ReferenceTasks, "appended")
	probeScribbleMap(m.Metadata)
	probeScribbleParts(m.Parts)
	full := m.Parts[:cap(m.Parts)]
	for i := range full {
		full[i] = a2a.NewTextPart("replaced")
	}
	m.Parts = append(m.Parts, a2a.NewTextPart("appended"))
}

// probeScribble changes everything a caller can reach from tk.
func probeScribble(tk *a2a.Task) {
	tk.ID += "-x"
	tk.ContextID += "-x"
	tk.Status.State = a2a.TaskStateFailed
	if tk.Status.Timestamp != nil {
		*tk.Status.Timestamp = time.Unix(1, 0)
	}
	if tk.Status.Message != nil {
		probeScribbleMessage(tk.Status.Message)
	}
	hist := tk.History[:cap(tk.History)]
	for i, m := range hist {
		if m != nil {
			probeScribbleMessage(m)
			*m = a2a.Message{ID: "zeroed"}
		}
		hist[i] = &a2a.Message{ID: "replaced"}
	}
	tk.History = append(tk.History, &a2a.Message{ID: "appended"})
	arts := tk.Artifacts[:cap(tk.Artifacts)]
	for i, a := range arts {
		if a != nil {
			a.ID, a.Name, a.Description = "x", "x", "x"
			ext := a.Extensions[:cap(a.Extensions)]
			for j := range ext {
				ext[j] = "x"
			}
			probeScribbleMap(a.Metadata)
			probeScribbleParts(a.Parts)
			a.Parts = append(a.Parts[:cap(a.Parts)], a2a.NewTextPart("appended"))
		}
		arts[i] = &a2a.Artifact{ID: "replaced"}
	}
	tk.Artifacts = append(tk.Artifacts, &a2a.Artifact{ID: "appended"})
	probeScribbleMap(tk.Metadata)
}

func TestL9PageSharing(t *testing.T) {
	ctx := context.Background()
	var now int64
	s := New(Options{Clock: func() int64 { now += 10; return now }})
	const n = 6
	for i := range n {
		in := probeRichTask(fmt.Sprintf("t%d", i), i)
		if _, err := s.Create(ctx, in); err != nil {
			t.Fatal(err)
		}
		probeScribble(in) // the input is not retained
	}
	// The reference: each task as Get returns it before anything else.
	want := map[a2a.TaskID]string{}
	for i := range n {
		id := a2a.TaskID(fmt.Sprintf("t%d", i))
		g, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = probeJSON(t, g.Task)
	}
	checkStore := func(what string) {
		t.Helper()
		for id, w := range want {
			g, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got := probeJSON(t, g.Task); got != w {
				t.Fatalf("after %s: Get(%s) changed (L9)\n got %s\nwant %s", what, id, got, w)
			}
		}
		resp, err := s.List(ctx, &engine.ListRequest{IncludeArtifacts: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range resp.Tasks {
			if got := probeJSON(t, tk); got != want[tk.ID] {
				t.Fatalf("after %s: listed %s changed (L9)\n got %s\nwant %s", what, tk.ID, got, want[tk.ID])
			}
		}
	}

	for _, req := range []engine.ListRequest{
		{IncludeArtifacts: true},
		{IncludeArtifacts: true, HistoryLength: new(int)},
		{PageSize: 2, IncludeArtifacts: true},
		{Projection: engine.ProjectionLight},
	} {
		resp, err := s.List(ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		// Scribble over one task at a time; the page's other tasks stay.
		for i := range resp.Tasks {
			before := make([]string, len(resp.Tasks))
			for j, tk := range resp.Tasks {
				before[j] = probeJSON(t, tk)
			}
			probeScribble(resp.Tasks[i])
			for j, tk := range resp.Tasks {
				if j != i && probeJSON(t, tk) != before[j] {
					t.Fatalf("page %+v: scribbling over task %d changed task %d of the same page\n got %s\nwant %s",
						req, i, j, probeJSON(t, tk), before[j])
				}
			}
		}
		checkStore(fmt.Sprintf("scribbling over a page %+v", req))
	}

	// Get results share nothing with each other or with the store.
	g1, err := s.Get(ctx, "t0")
	if err != nil {
		t.Fatal(err)
	}
	g2, err := s.Get(ctx, "t0")
	if err != nil {
		t.Fatal(err)
	}
	before := probeJSON(t, g2.Task)
	probeScribble(g1.Task)
	if probeJSON(t, g2.Task) != before {
		t.Fatalf("scribbling over one Get result changed another")
	}
	checkStore("scribbling over a Get result")

	// Replace and AppendHistory do not retain their inputs either.
	in := probeRichTask("t1", 1)
	rec, err := s.Replace(ctx, in, 0)
	if err != nil {
		t.Fatal(err)
	}
	want["t1"] = probeJSON(t, rec.Task)
	probeScribble(in)
	msg := &a2a.Message{ID: "appended-msg", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{{Content: a2a.Raw([]byte{5})}}}
	rec, err = s.AppendHistory(ctx, "t1", msg)
	if err != nil {
		t.Fatal(err)
	}
	want["t1"] = probeJSON(t, rec.Task)
	msg.Parts[0].Content.(a2a.Raw)[0] = 6
	msg.ID = "x"
	probeScribble(rec.Task)
	checkStore("scribbling over Replace's and AppendHistory's inputs and results")
}
