package storetest

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// Page tokens and traversals: T1–T7.

func testTraversal(t testing.TB, e *env) { // T1, L1
	e.populate(t, 37)
	s := e.snapshot(t)
	if len(s.tasks) != 37 {
		t.Fatalf("snapshot holds %d tasks, want 37", len(s.tasks))
	}
	for _, ps := range []int{1, 2, 5, 10, 36, 37, 38, 0, 100} {
		tasks, cursors := e.traverse(t, engine.ListRequest{PageSize: ps, IncludeArtifacts: true}, 37)
		if !slices.Equal(ids(tasks), ids(s.tasks)) || !slices.Equal(cursors, s.cursors) {
			t.Errorf("page size %d: traversal %q, want %q", ps, ids(tasks), ids(s.tasks))
			continue
		}
		for i := range tasks {
			if canon(tasks[i]) != canon(s.tasks[i]) {
				t.Errorf("page size %d: task %d differs:\n got %s\nwant %s", ps, i, canon(tasks[i]), canon(s.tasks[i]))
			}
		}
	}
}

func testURLSafe(t testing.TB, e *env) { // T2
	for _, id := range []a2a.TaskID{"a/b?c=d&e#f", "sp ace", "plus+slash/", "ü-ñ", "%41", "~tilde.dot_", "\"quote'", "a\tb"} {
		e.mustCreate(t, task(id, "ctx"))
		e.tick(1)
	}
	var req engine.ListRequest
	req.PageSize = 1
	n := 0
	for {
		resp := e.mustList(t, req)
		if resp.NextPageToken == "" {
			break
		}
		n++
		tok := resp.NextPageToken
		if url.QueryEscape(tok) != tok || url.PathEscape(tok) != tok {
			t.Errorf("token %q for %q is not URL-safe", tok, string(resp.Tasks[0].ID))
		}
		if strings.ContainsAny(tok, "=+/ \r\n") {
			t.Errorf("token %q has padding or non-URL characters", tok)
		}
		req.PageToken = tok
	}
	if n != 7 {
		t.Errorf("%d tokens for 8 tasks at page size 1, want 7", n)
	}
}

// rawToken builds a v1-looking token from raw bytes.
func rawToken(b []byte) string { return "v1." + base64.RawURLEncoding.EncodeToString(b) }

func invalidTokens() []string {
	valid := specToken(engine.Cursor{UpdatedAt: 5, ID: "task-001"})
	neg := make([]byte, 9)
	binary.BigEndian.PutUint64(neg, 1<<63)
	neg[8] = 'a'
	return []string{
		"0", "1", "50", "-1", "100", "100000", "3.5", "garbage", "v1", "v1.", "v2." + valid[3:], "v0." + valid[3:],
		valid + "=", valid + "==", valid + "\n", valid[:5] + "\r\n" + valid[5:], valid + "AAA", valid + "!",
		valid[:len(valid)-1] + "B", " " + valid, valid + " ", "V1." + valid[3:],
		strings.ReplaceAll(valid, "_", "/") + "+/", "v1." + base64.StdEncoding.EncodeToString([]byte("\x00\x00\x00\x00\x00\x00\x00\x05task-001")),
		rawToken(make([]byte, 8)),                                     // empty ID
		rawToken(make([]byte, 5)),                                     // short
		rawToken(neg),                                                 // time out of range
		rawToken(make([]byte, 8+specMaxIDBytes+1)),                    // ID over the limit
		strings.Repeat("A", 10000), "v1." + strings.Repeat("A", 5000), // over-long
		"%76%31%2E" + valid[3:], url.QueryEscape(valid + "="),
	}
}

func testInvalidTokens(t testing.TB, e *env) { // T4
	var msg string
	run := func(where string, req engine.ListRequest) {
		t.Helper()
		for _, tok := range invalidTokens() {
			req.PageToken = tok
			resp, err := e.s.List(e.ctx, &req)
			if !errors.Is(err, engine.ErrInvalidPageToken) {
				t.Errorf("%s: token %.40q: %v, %v; want ErrInvalidPageToken", where, tok, resp, err)
				continue
			}
			if !errors.Is(err, engine.ErrInvalidArgument) {
				t.Errorf("%s: token %.40q: %v is not an ErrInvalidArgument", where, tok, err)
			}
			if msg == "" {
				msg = err.Error()
			} else if err.Error() != msg {
				t.Errorf("%s: token %.40q: message %q, another token gave %q: messages must not differ", where, tok, err.Error(), msg)
			}
			if len(tok) >= 4 && strings.Contains(err.Error(), tok) {
				t.Errorf("%s: the error %q echoes the token", where, err.Error())
			}
		}
	}
	run("empty store", engine.ListRequest{})
	e.populate(t, 12)
	run("populated store", engine.ListRequest{})
	run("context filter", engine.ListRequest{ContextID: "ctx-1", PageSize: 1, IncludeTotalSize: true})
	run("status filter", engine.ListRequest{Status: a2a.TaskStateWorking, HistoryLength: intp(0), Projection: engine.ProjectionLight})
	run("unmatched filter", engine.ListRequest{ContextID: "no-such-context", PageSize: 100})
}

func testMissingBoundary(t testing.TB, e *env) { // T5
	e.populate(t, 15)
	s := e.snapshot(t)
	const ps = 3
	ks := []int{0, 3, 4, 7, 13, 14}
	page := func(k int) engine.ListRequest {
		return engine.ListRequest{PageSize: ps, PageToken: specToken(s.cursors[k]), IncludeTotalSize: true}
	}
	for _, k := range ks {
		e.expectPage(t, fmt.Sprintf("boundary at task %d", k), s, page(k), nil)
	}
	gone := map[a2a.TaskID]bool{}
	for _, k := range []int{4, 7, 14} {
		gone[s.cursors[k].ID] = true
		if err := e.s.Delete(e.ctx, s.cursors[k].ID); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(tk *a2a.Task) bool { return !gone[tk.ID] }
	for _, k := range ks {
		what := fmt.Sprintf("boundary at task %d (deleted: %v)", k, gone[s.cursors[k].ID])
		resp := e.expectPage(t, what, s, page(k), keep)
		if resp.TotalSize != 12 {
			t.Errorf("%s: total %d, want 12", what, resp.TotalSize)
		}
	}
	// The page after deleted task 4 is the page after task 3 minus task 4:
	// the deleted boundary pages exactly like the live one before it.
	after3 := e.mustList(t, page(3))
	after4 := e.mustList(t, page(4))
	if got, want := ids(after4.Tasks), ids(after3.Tasks); !slices.Equal(got, want) {
		t.Errorf("after deleted task 4: %q; after live task 3 (whose next was 4): %q", got, want)
	}
	// Boundaries that never existed page like their neighbours.
	for _, b := range []engine.Cursor{
		{UpdatedAt: math.MaxInt64, ID: "zzzz"},
		{UpdatedAt: s.cursors[5].UpdatedAt, ID: s.cursors[5].ID + "0"}, // just before task 5
		{UpdatedAt: s.cursors[5].UpdatedAt, ID: "task-0"},              // a prefix of every ID
		{UpdatedAt: s.cursors[9].UpdatedAt + 1, ID: "never"},
		{UpdatedAt: 0, ID: "0"}, // after everything
	} {
		req := engine.ListRequest{PageSize: ps, PageToken: specToken(b)}
		e.expectPage(t, "boundary "+fmtCursor(b)+" that never existed", s, req, keep)
	}
}

func testNextToken(t testing.TB, e *env) { // T6
	e.populate(t, 12)
	s := e.snapshot(t)
	pages := func(req engine.ListRequest) (n int, sizes []int) {
		for {
			resp := e.mustList(t, req)
			n++
			sizes = append(sizes, len(resp.Tasks))
			if resp.NextPageToken == "" || n > 20 {
				return n, sizes
			}
			req.PageToken = resp.NextPageToken
		}
	}
	for _, c := range []struct{ ps, pages int }{{12, 1}, {11, 2}, {13, 1}, {4, 3}, {5, 3}, {6, 2}, {1, 12}} {
		if n, sizes := pages(engine.ListRequest{PageSize: c.ps}); n != c.pages {
			t.Errorf("12 tasks at page size %d: %d pages %v, want %d (no trailing empty page)", c.ps, n, sizes, c.pages)
		}
	}
	// Filtered: the last match is followed by non-matching tasks.
	ctx0 := 0
	for _, tk := range s.tasks {
		if tk.ContextID == "ctx-0" {
			ctx0++
		}
	}
	if n, sizes := pages(engine.ListRequest{ContextID: "ctx-0", PageSize: ctx0}); n != 1 {
		t.Errorf("%d matches at page size %d: %d pages %v, want 1", ctx0, ctx0, n, sizes)
	}
	// An empty page after the last task has no token, whatever the total.
	last := specToken(s.cursors[len(s.cursors)-1])
	resp := e.mustList(t, engine.ListRequest{PageToken: last, IncludeTotalSize: true})
	if len(resp.Tasks) != 0 || resp.NextPageToken != "" || resp.TotalSize != 12 {
		t.Errorf("page after the last task: %s token %q total %d; want empty, no token, total 12", pageIDs(resp), resp.NextPageToken, resp.TotalSize)
	}
	if resp.Tasks == nil {
		t.Errorf("empty page: Tasks is nil, want an empty slice")
	}
	// A token whose following tasks were all deleted leads to an empty page.
	first := e.mustList(t, engine.ListRequest{PageSize: 10})
	for _, c := range s.cursors[10:] {
		if err := e.s.Delete(e.ctx, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	resp = e.mustList(t, engine.ListRequest{PageSize: 10, PageToken: first.NextPageToken, IncludeTotalSize: true})
	if len(resp.Tasks) != 0 || resp.NextPageToken != "" || resp.TotalSize != 10 {
		t.Errorf("page after deletes: %s token %q total %d; want empty, no token, total 10", pageIDs(resp), resp.NextPageToken, resp.TotalSize)
	}
}

func testChangedFilter(t testing.TB, e *env) { // T7
	e.populate(t, 20)
	s := e.snapshot(t)
	inCtx := func(c string) func(*a2a.Task) bool { return func(tk *a2a.Task) bool { return tk.ContextID == c } }
	// Tokens of an unfiltered traversal, reused with filters.
	first := e.mustList(t, engine.ListRequest{PageSize: 6})
	second := e.mustList(t, engine.ListRequest{PageSize: 6, PageToken: first.NextPageToken})
	for _, tok := range []string{first.NextPageToken, second.NextPageToken} {
		for _, c := range []string{"ctx-0", "ctx-2", "no-such"} {
			e.expectPage(t, "unfiltered token with context "+c, s, engine.ListRequest{ContextID: c, PageSize: 4, PageToken: tok}, inCtx(c))
		}
		e.expectPage(t, "unfiltered token with a status filter", s,
			engine.ListRequest{Status: a2a.TaskStateWorking, PageSize: 4, PageToken: tok},
			func(tk *a2a.Task) bool { return tk.Status.State == a2a.TaskStateWorking })
	}
	// A filtered traversal's token, reused without the filter.
	f := e.mustList(t, engine.ListRequest{ContextID: "ctx-1", PageSize: 3})
	if f.NextPageToken == "" {
		t.Fatal("no token from a filtered page")
	}
	e.expectPage(t, "filtered token without the filter", s, engine.ListRequest{PageSize: 5, PageToken: f.NextPageToken}, nil)
	e.expectPage(t, "filtered token with another context", s, engine.ListRequest{ContextID: "ctx-0", PageSize: 5, PageToken: f.NextPageToken}, inCtx("ctx-0"))
}
