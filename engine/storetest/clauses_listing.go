package storetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// ListTasks semantics: filters, validation, trimming, totals, cursors,
// live traversal and copies (L1–L9).

func testFilters(t testing.TB, e *env) { // L1, L2
	e.populate(t, 40)
	s := e.snapshot(t)
	at := func(sec int) *time.Time { return statusAt(sec) }
	plus1 := statusAt(3).Add(time.Microsecond)
	type filter struct {
		name string
		req  engine.ListRequest
		keep func(*a2a.Task) bool
	}
	tsAtLeast := func(min time.Time) func(*a2a.Task) bool {
		return func(tk *a2a.Task) bool { return tk.Status.Timestamp != nil && !tk.Status.Timestamp.Before(min) }
	}
	filters := []filter{
		{"none", engine.ListRequest{}, nil},
		{"context", engine.ListRequest{ContextID: "ctx-1"}, func(tk *a2a.Task) bool { return tk.ContextID == "ctx-1" }},
		{"unknown context", engine.ListRequest{ContextID: "ctx-9"}, func(*a2a.Task) bool { return false }},
		{"context prefix", engine.ListRequest{ContextID: "ctx"}, func(*a2a.Task) bool { return false }},
		{"status", engine.ListRequest{Status: a2a.TaskStateCompleted}, func(tk *a2a.Task) bool { return tk.Status.State == a2a.TaskStateCompleted }},
		{"status timestamp >= (equal included)", engine.ListRequest{StatusTimestampAfter: at(3)}, tsAtLeast(*at(3))},
		{"status timestamp >= +1µs", engine.ListRequest{StatusTimestampAfter: &plus1}, tsAtLeast(plus1)},
		{"status timestamp in the past", engine.ListRequest{StatusTimestampAfter: at(-1000)}, tsAtLeast(*at(-1000))},
		{"status timestamp in the future", engine.ListRequest{StatusTimestampAfter: at(1000)}, func(*a2a.Task) bool { return false }},
		{"context+status", engine.ListRequest{ContextID: "ctx-2", Status: a2a.TaskStateWorking}, func(tk *a2a.Task) bool {
			return tk.ContextID == "ctx-2" && tk.Status.State == a2a.TaskStateWorking
		}},
		{"all three", engine.ListRequest{ContextID: "ctx-0", Status: a2a.TaskStateSubmitted, StatusTimestampAfter: at(1)}, func(tk *a2a.Task) bool {
			return tk.ContextID == "ctx-0" && tk.Status.State == a2a.TaskStateSubmitted && tsAtLeast(*at(1))(tk)
		}},
	}
	for _, f := range filters {
		if f.name == "status timestamp >= (equal included)" && !slices.ContainsFunc(s.tasks, func(tk *a2a.Task) bool {
			return tk.Status.Timestamp != nil && tk.Status.Timestamp.Equal(*at(3)) && f.keep(tk)
		}) {
			t.Fatal("test data has no task exactly at the timestamp bound")
		}
		e.expectFilter(t, s, f.name, f.req, f.keep)
	}
}

// expectFilter checks the filters of req (which sets nothing else) against
// the snapshot: walked page by page at several page sizes, every page as
// the snapshot says and every total the number of matches (L1, L2, L5),
// then a whole traversal. Filters apply before the boundary, so every page
// is full until the matches run out. It returns the matching IDs.
func (e *env) expectFilter(t testing.TB, s snapshot, name string, req engine.ListRequest, keep func(*a2a.Task) bool) []a2a.TaskID {
	t.Helper()
	want, _ := s.expect(nil, keep, len(s.tasks))
	for _, ps := range []int{2, 7, 100} {
		r := req
		r.PageSize, r.IncludeTotalSize = ps, true
		for page := 0; ; page++ {
			resp := e.expectPage(t, fmt.Sprintf("filter %s, page size %d, page %d", name, ps, page), s, r, keep)
			if resp.TotalSize != len(want) {
				t.Errorf("filter %s: total %d, want %d (L5)", name, resp.TotalSize, len(want))
			}
			if resp.NextPageToken == "" || page > len(s.tasks) {
				break
			}
			r.PageToken = resp.NextPageToken
		}
	}
	r := req
	r.PageSize = 4
	tasks, _ := e.traverse(t, r, len(s.tasks))
	if got := ids(tasks); !slices.Equal(got, want) {
		t.Errorf("filter %s: traversal %q, want %q", name, got, want)
	}
	return want
}

func testValidation(t testing.TB, e *env) { // L3
	e.populate(t, 60)
	resp := e.mustList(t, engine.ListRequest{})
	if resp.PageSize != 50 || len(resp.Tasks) != 50 || resp.NextPageToken == "" {
		t.Errorf("page size 0: PageSize %d, %d tasks, token %v; want 50, 50, a token", resp.PageSize, len(resp.Tasks), resp.NextPageToken != "")
	}
	for _, ps := range []int{1, 7, 60, 100} {
		resp := e.mustList(t, engine.ListRequest{PageSize: ps})
		if want := min(ps, 60); resp.PageSize != ps || len(resp.Tasks) != want {
			t.Errorf("page size %d: PageSize %d, %d tasks; want %d, %d", ps, resp.PageSize, len(resp.Tasks), ps, want)
		}
	}
	bad := []struct {
		name string
		req  engine.ListRequest
	}{
		{"page size -1", engine.ListRequest{PageSize: -1}},
		{"page size 101", engine.ListRequest{PageSize: 101}},
		{"page size MinInt", engine.ListRequest{PageSize: math.MinInt}},
		{"page size MaxInt", engine.ListRequest{PageSize: math.MaxInt}},
		{"unknown status", engine.ListRequest{Status: "TASK_STATE_BOGUS"}},
		{"lower-case status", engine.ListRequest{Status: "completed"}},
		{"history length -1", engine.ListRequest{HistoryLength: intp(-1)}},
		{"history length MinInt", engine.ListRequest{HistoryLength: intp(math.MinInt)}},
		{"1025-byte context", engine.ListRequest{ContextID: string(make([]byte, specMaxIDBytes+1))}},
	}
	for _, b := range bad {
		resp, err := e.s.List(e.ctx, &b.req)
		if !errors.Is(err, engine.ErrInvalidArgument) {
			t.Errorf("%s: %v, %v; want ErrInvalidArgument", b.name, resp, err)
		}
		if errors.Is(err, engine.ErrInvalidPageToken) {
			t.Errorf("%s: reported as a bad token", b.name)
		}
	}
}

func testShape(t testing.TB, e *env) { // L4
	full := spec{id: "h5", ctx: "c", ts: statusAt(0), history: 5, artifacts: 2, tag: "v1"}.build()
	e.mustCreate(t, full)
	e.tick(1)
	bare := spec{id: "h0", ctx: "c", ts: statusAt(0), tag: "v1"}.build()
	e.mustCreate(t, bare)
	for _, hl := range []*int{nil, intp(0), intp(1), intp(3), intp(5), intp(10)} {
		for _, art := range []bool{false, true} {
			resp := e.mustList(t, engine.ListRequest{HistoryLength: hl, IncludeArtifacts: art})
			for _, got := range resp.Tasks {
				src := full
				if got.ID == "h0" {
					src = bare
				}
				want := clone(src)
				if hl != nil && len(want.History) > *hl {
					want.History = want.History[len(want.History)-*hl:]
				}
				if !art {
					want.Artifacts = nil
				}
				if canon(got) != canon(want) {
					t.Errorf("history %v artifacts %v: task %q\n got %s\nwant %s", fmtIntp(hl), art, got.ID, canon(got), canon(want))
				}
				if hl != nil && *hl == 0 && len(got.History) != 0 {
					t.Errorf("history 0: %d messages", len(got.History))
				}
				if !art && len(got.Artifacts) != 0 {
					t.Errorf("artifacts excluded: %d artifacts", len(got.Artifacts))
				}
			}
		}
	}
	// Trimming a page never trims the stored task.
	if got := e.mustGet(t, "h5"); canon(got.Task) != canon(full) {
		t.Errorf("Get after trimmed lists:\n got %s\nwant %s", canon(got.Task), canon(full))
	}
}

func testHugeHistoryLength(t testing.TB, e *env) { // L4
	full := spec{id: "h3", ctx: "c", ts: statusAt(0), history: 3, artifacts: 1, tag: "v1"}.build()
	e.mustCreate(t, full)
	// Every n from 0 to MaxInt is valid; n at or above the history's
	// length returns all of it, also beyond 32-bit range.
	for _, n := range []int{3, 4, math.MaxInt32, math.MaxInt32 + 1, 1 << 32, 3_000_000_000, math.MaxInt - 1, math.MaxInt} {
		for _, total := range []bool{false, true} {
			req := engine.ListRequest{HistoryLength: intp(n), IncludeArtifacts: true, IncludeTotalSize: total}
			resp, err := e.s.List(e.ctx, &req)
			if err != nil {
				t.Errorf("%s: %v", fmtReq(req), err)
				continue
			}
			if len(resp.Tasks) != 1 || canon(resp.Tasks[0]) != canon(full) {
				t.Errorf("%s: got %d tasks, want the task with its whole history", fmtReq(req), len(resp.Tasks))
			}
		}
	}
}

func fmtIntp(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func testLight(t testing.TB, e *env) { // L4, ProjectionLight
	withMeta := spec{id: "l1", ctx: "ctx-l", state: a2a.TaskStateInputRequired, ts: statusAt(5), history: 4, artifacts: 2, tag: "v1"}.build()
	e.mustCreate(t, withMeta)
	e.tick(1)
	noMeta := spec{id: "l2", ctx: "ctx-l", state: a2a.TaskStateSubmitted, history: 1, tag: "v1"}.build()
	noMeta.Metadata = nil
	e.mustCreate(t, noMeta)
	light := func(src *a2a.Task) *a2a.Task {
		c := clone(src)
		return &a2a.Task{ID: c.ID, ContextID: c.ContextID, Status: a2a.TaskStatus{State: c.Status.State, Timestamp: c.Status.Timestamp}, Metadata: c.Metadata}
	}
	for _, req := range []engine.ListRequest{
		{Projection: engine.ProjectionLight},
		{Projection: engine.ProjectionLight, IncludeArtifacts: true, HistoryLength: intp(10)},
		{Projection: engine.ProjectionLight, ContextID: "ctx-l", PageSize: 1},
	} {
		resp := e.mustList(t, req)
		for _, got := range resp.Tasks {
			src := withMeta
			if got.ID == "l2" {
				src = noMeta
			}
			if canon(got) != canon(light(src)) {
				t.Errorf("light task %q:\n got %s\nwant %s", got.ID, canon(got), canon(light(src)))
			}
			if got.Status.Message != nil || len(got.History) != 0 || len(got.Artifacts) != 0 {
				t.Errorf("light task %q carries a status message, history or artifacts", got.ID)
			}
			if got.ID == "l1" && (got.Status.Timestamp == nil || !got.Status.Timestamp.Equal(*statusAt(5))) {
				t.Errorf("light task: status timestamp %v, want %v", got.Status.Timestamp, statusAt(5))
			}
		}
		if len(resp.Tasks) == 0 {
			t.Errorf("light list %s returned nothing", fmtReq(req))
		}
	}
}

// testEmptyMetadata: a task's metadata that is an empty map reads back as
// an empty map, not as none, from Get and from full and light pages alike
// (none stays none: testLight).
func testEmptyMetadata(t testing.TB, e *env) { // L4
	tk := spec{id: "e1", ctx: "ctx-e", state: a2a.TaskStateWorking, tag: "v1"}.build()
	tk.Metadata = map[string]any{}
	e.mustCreate(t, tk)
	check := func(how string, got *a2a.Task) {
		t.Helper()
		if got.Metadata == nil || len(got.Metadata) != 0 {
			t.Errorf("%s: metadata %#v, want an empty map", how, got.Metadata)
		}
	}
	check("Get", e.mustGet(t, "e1").Task)
	for _, proj := range []engine.Projection{engine.ProjectionFull, engine.ProjectionLight} {
		resp := e.mustList(t, engine.ListRequest{ContextID: "ctx-e", Projection: proj})
		if len(resp.Tasks) != 1 {
			t.Fatalf("projection %v: %d tasks, want 1", proj, len(resp.Tasks))
		}
		check(fmt.Sprintf("List, projection %v", proj), resp.Tasks[0])
	}
}

func testTotalSize(t testing.TB, e *env) { // L5
	resp := e.mustList(t, engine.ListRequest{IncludeTotalSize: true})
	if resp.TotalSize != 0 {
		t.Errorf("empty store: total %d", resp.TotalSize)
	}
	e.populate(t, 25)
	s := e.snapshot(t)
	for _, f := range []struct {
		req  engine.ListRequest
		want int
	}{
		{engine.ListRequest{}, 25},
		{engine.ListRequest{ContextID: "ctx-0"}, countIf(s.tasks, func(tk *a2a.Task) bool { return tk.ContextID == "ctx-0" })},
		{engine.ListRequest{Status: a2a.TaskStateFailed}, countIf(s.tasks, func(tk *a2a.Task) bool { return tk.Status.State == a2a.TaskStateFailed })},
		{engine.ListRequest{StatusTimestampAfter: statusAt(4)}, countIf(s.tasks, func(tk *a2a.Task) bool {
			return tk.Status.Timestamp != nil && !tk.Status.Timestamp.Before(*statusAt(4))
		})},
	} {
		e.expectTotal(t, f.req, f.want)
	}
}

// expectTotal pages through req (which sets filters only) two tasks at a
// time and checks that every page's total is want, whatever its boundary,
// and that a request without IncludeTotalSize has total 0 (L5).
func (e *env) expectTotal(t testing.TB, req engine.ListRequest, want int) {
	t.Helper()
	r := req
	r.PageSize, r.IncludeTotalSize = 2, true
	for page := 0; ; page++ {
		resp := e.mustList(t, r)
		if resp.TotalSize != want {
			t.Errorf("%s page %d: total %d, want %d (ignoring the boundary)", fmtReq(req), page, resp.TotalSize, want)
		}
		if resp.NextPageToken == "" || page > want {
			break
		}
		r.PageToken = resp.NextPageToken
	}
	if resp := e.mustList(t, req); resp.TotalSize != 0 {
		t.Errorf("%s without IncludeTotalSize: total %d, want 0", fmtReq(req), resp.TotalSize)
	}
}

func countIf(tasks []*a2a.Task, f func(*a2a.Task) bool) int {
	n := 0
	for _, tk := range tasks {
		if f(tk) {
			n++
		}
	}
	return n
}

func testCursors(t testing.TB, e *env) { // L6
	e.populate(t, 20)
	for i := 0; i < 20; i += 3 {
		e.tick(1)
		id := a2a.TaskID(fmt.Sprintf("task-%03d", i))
		if _, err := e.s.AppendHistory(e.ctx, id, newMessage("moved")); err != nil {
			t.Fatal(err)
		}
	}
	for _, req := range []engine.ListRequest{{PageSize: 7}, {ContextID: "ctx-2", PageSize: 2}, {Projection: engine.ProjectionLight, PageSize: 5}} {
		for {
			resp := e.mustList(t, req)
			for i, tk := range resp.Tasks {
				if r := e.mustGet(t, tk.ID); resp.TaskCursors[i] != r.Cursor {
					t.Errorf("TaskCursors[%d] = %s, Get says %s", i, fmtCursor(resp.TaskCursors[i]), fmtCursor(r.Cursor))
				}
			}
			if resp.NextPageToken == "" {
				break
			}
			req.PageToken = resp.NextPageToken
		}
	}
}

func testLiveTraversal(t testing.TB, e *env) { // L7
	e.populate(t, 20)
	s := e.snapshot(t)
	start := map[a2a.TaskID]bool{}
	for _, tk := range s.tasks {
		start[tk.ID] = true
	}
	c := newTravCheck(start)
	req := engine.ListRequest{PageSize: 3}
	deleted := map[a2a.TaskID]bool{}
	for page := 0; ; page++ {
		resp := e.mustList(t, req)
		if err := c.page(resp); err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		for _, tk := range resp.Tasks {
			if deleted[tk.ID] {
				t.Errorf("page %d: task %q listed after its Delete (S9)", page, string(tk.ID))
			}
		}
		if resp.NextPageToken == "" {
			break
		}
		if page > 30 {
			t.Fatal("traversal does not end")
		}
		req.PageToken = resp.NextPageToken
		// Between pages: mutate a seen task (it moves ahead of the boundary
		// and must not be seen again), mutate and delete unseen tasks, and
		// insert a new one.
		e.tick(1)
		seenID := resp.Tasks[0].ID
		if _, err := e.s.AppendHistory(e.ctx, seenID, newMessage(fmt.Sprintf("between-%d", page))); err != nil {
			t.Fatal(err)
		}
		c.touched[seenID] = true
		if k := len(s.tasks) - 1 - page; k > 0 && c.seen[s.tasks[k].ID] == 0 && !deleted[s.tasks[k].ID] {
			id := s.tasks[k].ID
			if _, err := e.s.Replace(e.ctx, clone(s.tasks[k]), 0); err != nil {
				t.Fatal(err)
			}
			c.touched[id] = true
		}
		if k := len(s.tasks) - 2 - page; page%2 == 0 && k > 0 && c.seen[s.tasks[k].ID] == 0 && !c.touched[s.tasks[k].ID] {
			id := s.tasks[k].ID
			if err := e.s.Delete(e.ctx, id); err != nil {
				t.Fatal(err)
			}
			c.touched[id], deleted[id] = true, true
		}
		e.mustCreate(t, task(a2a.TaskID(fmt.Sprintf("new-%02d", page)), "ctx-0"))
	}
	if err := c.finish(); err != nil {
		t.Error(err)
	}
	if len(deleted) == 0 || len(c.touched) < 5 {
		t.Fatalf("the traversal touched too little to test: %d touched, %d deleted", len(c.touched), len(deleted))
	}
}

func testEqualTimeInsert(t testing.TB, e *env) { // L7 with equal times
	e.clock.Set(9_000)
	start := map[a2a.TaskID]bool{}
	for i := range 10 {
		id := a2a.TaskID(fmt.Sprintf("t%02d", i*10))
		e.mustCreate(t, task(id, "ctx"))
		start[id] = true
	}
	c := newTravCheck(start)
	req := engine.ListRequest{PageSize: 2}
	resp := e.mustList(t, req)
	if err := c.page(resp); err != nil {
		t.Fatal(err)
	}
	if got := ids(resp.Tasks); !slices.Equal(got, []a2a.TaskID{"t90", "t80"}) {
		t.Fatalf("first page %q", got)
	}
	// Inserts at the boundary's time: one after the boundary ID (may appear
	// later), one before it (must not).
	e.mustCreate(t, task("t05", "ctx"))
	e.mustCreate(t, task("t85", "ctx"))
	for req.PageToken = resp.NextPageToken; req.PageToken != ""; req.PageToken = resp.NextPageToken {
		resp = e.mustList(t, req)
		if err := c.page(resp); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.finish(); err != nil {
		t.Error(err)
	}
	if c.seen["t85"] != 0 {
		t.Errorf("task t85 inserted before the boundary (t80) at its time was listed after it")
	}
}

// mutate scribbles over every part of a task a caller could reach.
func mutate(tk *a2a.Task) {
	if tk == nil {
		return
	}
	tk.ContextID += "-mutated"
	tk.Status.State = a2a.TaskStateFailed
	if tk.Status.Timestamp != nil {
		*tk.Status.Timestamp = time.Unix(1, 0)
	}
	if tk.Status.Message != nil {
		tk.Status.Message.ID = "mutated"
		tk.Status.Message.Parts[0] = a2a.NewTextPart("mutated")
	}
	for _, m := range tk.History {
		m.ID += "-mutated"
		m.Parts[0] = a2a.NewTextPart("mutated")
		if m.Metadata != nil {
			m.Metadata["first"] = "mutated"
		}
	}
	tk.History = append(tk.History, newMessage("mutated"))
	for _, a := range tk.Artifacts {
		a.Name = "mutated"
		a.Parts = append(a.Parts[:0], a2a.NewTextPart("mutated"))
	}
	if tk.Metadata != nil {
		tk.Metadata["owner"] = "mutated"
		if n, ok := tk.Metadata["nested"].(map[string]any); ok {
			n["k"] = "mutated"
		}
		if l, ok := tk.Metadata["labels"].([]any); ok && len(l) > 0 {
			l[0] = "mutated"
		}
	}
}

func testCopies(t testing.TB, e *env) { // L9
	sp := spec{id: "cp", ctx: "ctx", ts: statusAt(0), history: 2, artifacts: 2, tag: "v1"}
	in := sp.build()
	want := clone(in)
	rec := e.mustCreate(t, in)
	mutate(in)
	mutate(rec.Task)
	check := func(what string) {
		t.Helper()
		if got := e.mustGet(t, "cp"); canon(got.Task) != canon(want) {
			t.Fatalf("after mutating %s: stored task changed (L9)\n got %s\nwant %s", what, canon(got.Task), canon(want))
		}
	}
	check("Create's input and result")
	g := e.mustGet(t, "cp")
	mutate(g.Task)
	check("Get's result")
	for _, req := range []engine.ListRequest{{IncludeArtifacts: true}, {Projection: engine.ProjectionLight}, {HistoryLength: intp(1), IncludeArtifacts: true}} {
		resp := e.mustList(t, req)
		for _, tk := range resp.Tasks {
			mutate(tk)
		}
		check("List's result (" + fmtReq(req) + ")")
	}
	e.tick(1)
	in = clone(want)
	in.Metadata["owner"] = "bob"
	want = clone(in)
	r, err := e.s.Replace(e.ctx, in, 0)
	if err != nil {
		t.Fatal(err)
	}
	mutate(in)
	mutate(r.Task)
	check("Replace's input and result")
	e.tick(1)
	msg := newMessage("appended")
	msg.Metadata = map[string]any{"k": "v"}
	want.History = append(want.History, newMessage("appended"))
	want.History[len(want.History)-1].Metadata = map[string]any{"k": "v"}
	r, err = e.s.AppendHistory(e.ctx, "cp", msg)
	if err != nil {
		t.Fatal(err)
	}
	msg.ID = "mutated"
	msg.Parts[0] = a2a.NewTextPart("mutated")
	msg.Metadata["k"] = "mutated"
	mutate(r.Task)
	check("AppendHistory's input and result")
	r, err = e.s.AppendHistory(e.ctx, "cp", newMessage("appended")) // deduplicated
	if err != nil {
		t.Fatal(err)
	}
	mutate(r.Task)
	check("a deduplicated AppendHistory's result")
	e.tick(1)
	r, err = e.s.Cancel(e.ctx, "cp")
	if err != nil {
		t.Fatal(err)
	}
	want = clone(r.Task)
	mutate(r.Task)
	check("Cancel's result")
}

// testWithoutTask: Create, CreateOwned and Replace made with
// engine.WithoutTask return their record without the task — the revision,
// cursor and owner Get reads afterwards — and store what they were given;
// reads and other writes with that context are unchanged.
func testWithoutTask(t testing.TB, e *env) { // L9, engine.WithoutTask
	ctx := engine.WithoutTask(e.ctx)
	check := func(what string, rec engine.Record, err error, want *a2a.Task) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if rec.Task != nil {
			t.Errorf("%s under WithoutTask returned a task", what)
		}
		got := e.mustGet(t, want.ID)
		if canon(got.Task) != canon(want) {
			t.Errorf("%s stored\n got %s\nwant %s", what, canon(got.Task), canon(want))
		}
		got.Task = nil
		if d := diffRecord(rec, got); d != "" {
			t.Errorf("%s returned a record Get does not read: %s", what, d)
		}
	}
	in := spec{id: "wt", ctx: "ctx", ts: statusAt(0), history: 2, artifacts: 2, tag: "v1"}.build()
	rec, err := e.s.Create(ctx, clone(in))
	check("Create", rec, err, in)
	e.tick(1)
	in.Metadata["tag"] = "v2"
	rec, err = e.s.Replace(ctx, clone(in), 0)
	check("Replace", rec, err, in)
	e.tick(1)
	in.Status.State = a2a.TaskStateCompleted
	rec, err = e.s.Replace(ctx, clone(in), rec.Revision)
	check("Replace with its expected revision", rec, err, in)
	if _, err := e.s.Replace(ctx, clone(in), rec.Revision+1); !errors.Is(err, engine.ErrRevisionConflict) {
		t.Errorf("Replace with a stale revision under WithoutTask: %v, want ErrRevisionConflict", err)
	}
	if e.o != nil {
		other := spec{id: "wt-owned", ctx: "ctx", ts: statusAt(0), history: 1, tag: "v1"}.build()
		rec, err := e.o.CreateOwned(ctx, clone(other), "alice")
		check("CreateOwned", rec, err, other)
		if rec.Owner != "alice" {
			t.Errorf("CreateOwned under WithoutTask returned owner %q, want alice (O2)", rec.Owner)
		}
	}
	if got, err := e.s.Get(ctx, in.ID); err != nil || canon(got.Task) != canon(in) {
		t.Errorf("Get under WithoutTask: %v, task %s", err, canon(got.Task))
	}
	if got, err := e.s.AppendHistory(ctx, in.ID, newMessage("appended")); err != nil || got.Task == nil {
		t.Errorf("AppendHistory under WithoutTask: %v, task %v (only Create, CreateOwned and Replace drop it)", err, got.Task)
	}
	if resp, err := e.s.List(ctx, &engine.ListRequest{}); err != nil || len(resp.Tasks) == 0 || resp.Tasks[0] == nil {
		t.Errorf("List under WithoutTask: %v", err)
	}
}
