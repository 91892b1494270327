package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/taskiter"
)

// SPEC's numbers, written here rather than taken from engine, so that the
// suite checks them.
const (
	specMaxIDBytes      = 1024 // S8: task and context IDs
	specMaxOwnerBytes   = 1024 // O1
	specDefaultPageSize = 50   // L3: PageSize 0
	specMaxPageSize     = 100  // L3
)

// The task states tests draw from: engine's one list, and its active and
// terminal parts (terminal: completed, failed, canceled, rejected, the
// states S3 says Cancel rejects).
var (
	allStates      = engine.KnownStates()
	activeStates   = slices.DeleteFunc(engine.KnownStates(), a2a.TaskState.Terminal)
	terminalStates = slices.DeleteFunc(engine.KnownStates(), func(s a2a.TaskState) bool { return !s.Terminal() })
)

// statusBase is the first status timestamp test tasks carry (µs precision,
// UTC): 2024-06-01T12:00:00Z.
var statusBase = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// statusAt returns statusBase + sec seconds.
func statusAt(sec int) *time.Time {
	ts := statusBase.Add(time.Duration(sec) * time.Second)
	return &ts
}

// spec describes a realistic test task.
type spec struct {
	id        a2a.TaskID
	ctx       string
	state     a2a.TaskState
	ts        *time.Time // status timestamp; nil = none
	history   int        // number of history messages
	artifacts int        // number of artifacts
	tag       string     // varies content between versions
}

// msgID returns the ID of history message i of a task whose ID may hold any
// bytes: message IDs stay printable.
func msgID(id a2a.TaskID, tag string, i int) string {
	return fmt.Sprintf("msg-%x-%s-%d", string(id), tag, i)
}

// build returns a fresh task for sp: history messages with IDs and text
// parts, artifacts with text and data parts, metadata and a status message.
func (sp spec) build() *a2a.Task {
	if sp.state == "" {
		sp.state = a2a.TaskStateWorking
	}
	t := &a2a.Task{
		ID:        sp.id,
		ContextID: sp.ctx,
		Status: a2a.TaskStatus{
			State: sp.state,
			Message: &a2a.Message{
				ID:    msgID(sp.id, sp.tag, -1),
				Role:  a2a.MessageRoleAgent,
				Parts: a2a.ContentParts{a2a.NewTextPart("status of " + sp.tag)},
			},
		},
		Metadata: map[string]any{
			"owner":  "alice",
			"tag":    sp.tag,
			"weight": 3.5,
			"labels": []any{"a", "b"},
			"nested": map[string]any{"k": "v", "n": 2.0},
		},
	}
	if sp.ts != nil {
		ts := *sp.ts
		t.Status.Timestamp = &ts
	}
	for i := range sp.history {
		role := a2a.MessageRoleUser
		if i%2 == 1 {
			role = a2a.MessageRoleAgent
		}
		m := &a2a.Message{
			ID:    msgID(sp.id, sp.tag, i),
			Role:  role,
			Parts: a2a.ContentParts{a2a.NewTextPart("message " + strconv.Itoa(i) + " " + sp.tag)},
		}
		if i == 0 {
			m.Metadata = map[string]any{"first": true}
		}
		t.History = append(t.History, m)
	}
	for i := range sp.artifacts {
		t.Artifacts = append(t.Artifacts, &a2a.Artifact{
			ID:          a2a.ArtifactID("art-" + strconv.Itoa(i)),
			Name:        "result-" + strconv.Itoa(i) + ".txt",
			Description: "artifact " + sp.tag,
			Parts: a2a.ContentParts{
				a2a.NewTextPart("artifact body " + strconv.Itoa(i)),
				a2a.NewDataPart(map[string]any{"score": float64(i), "ok": true}),
			},
		})
	}
	return t
}

// task is shorthand for a working task with two messages and one artifact.
func task(id a2a.TaskID, ctx string) *a2a.Task {
	return spec{id: id, ctx: ctx, ts: statusAt(0), history: 2, artifacts: 1, tag: "v1"}.build()
}

// newMessage returns a user message with the given ID.
func newMessage(id string) *a2a.Message {
	return &a2a.Message{ID: id, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart("appended " + id)}}
}

// canon is a task's comparable form: raw ID and context ID bytes (JSON would
// replace invalid UTF-8) and the JSON of the rest, status timestamp in UTC.
// Stores return decoded copies, so tasks compare by canon, not by pointer.
func canon(t *a2a.Task) string {
	if t == nil {
		return "<nil task>"
	}
	c := *t
	c.ID, c.ContextID = "", ""
	if t.Status.Timestamp != nil {
		ts := t.Status.Timestamp.UTC()
		c.Status.Timestamp = &ts
	}
	b, err := json.Marshal(&c)
	if err != nil {
		return "<unencodable task: " + err.Error() + ">"
	}
	return fmt.Sprintf("id=%q ctx=%q %s", string(t.ID), t.ContextID, b)
}

// clone returns a deep copy of t by its canonical encoding.
func clone(t *a2a.Task) *a2a.Task {
	b, err := json.Marshal(t)
	if err != nil {
		panic(err)
	}
	c := new(a2a.Task)
	if err := json.Unmarshal(b, c); err != nil {
		panic(err)
	}
	c.ID, c.ContextID = t.ID, t.ContextID
	if t.Metadata != nil && len(t.Metadata) == 0 {
		c.Metadata = map[string]any{} // JSON leaves an empty map out
	}
	return c
}

// sentinels in the order errClass tests them (the token error first: it is
// also an invalid argument).
var sentinels = []error{
	engine.ErrInvalidPageToken, engine.ErrInvalidArgument, engine.ErrNotFound,
	engine.ErrAlreadyExists, engine.ErrRevisionConflict, engine.ErrNotCancelable,
	engine.ErrInternal,
}

// errClass returns the engine sentinel err is, nil for nil, or err itself
// when it is none of them.
func errClass(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// sameClass reports whether got and want are the same outcome.
func sameClass(got, want error) bool { return errClass(got) == errClass(want) }

// diffRecord describes how got differs from want, or returns "".
func diffRecord(got, want engine.Record) string {
	switch {
	case got.Revision != want.Revision:
		return fmt.Sprintf("revision %d, want %d", got.Revision, want.Revision)
	case got.Cursor != want.Cursor:
		return fmt.Sprintf("cursor %s, want %s", fmtCursor(got.Cursor), fmtCursor(want.Cursor))
	case got.Owner != want.Owner:
		return fmt.Sprintf("owner %q, want %q (O1, O2)", got.Owner, want.Owner)
	case canon(got.Task) != canon(want.Task):
		return fmt.Sprintf("task\n got %s\nwant %s", canon(got.Task), canon(want.Task))
	}
	return ""
}

func fmtCursor(c engine.Cursor) string { return fmt.Sprintf("(%d,%q)", c.UpdatedAt, string(c.ID)) }

// diffPage describes how got differs from want, or returns "". With owners
// it compares the pages' TaskOwners too (O5).
func diffPage(got, want *engine.ListResponse, owners bool) string {
	if got == nil {
		return "nil response"
	}
	if len(got.Tasks) != len(got.TaskCursors) {
		return fmt.Sprintf("%d tasks but %d cursors (L6)", len(got.Tasks), len(got.TaskCursors))
	}
	if g, w := pageIDs(got), pageIDs(want); g != w {
		return fmt.Sprintf("tasks %s, want %s", g, w)
	}
	for i := range got.Tasks {
		if got.TaskCursors[i] != want.TaskCursors[i] {
			return fmt.Sprintf("cursor[%d] %s, want %s", i, fmtCursor(got.TaskCursors[i]), fmtCursor(want.TaskCursors[i]))
		}
		if g, w := canon(got.Tasks[i]), canon(want.Tasks[i]); g != w {
			return fmt.Sprintf("task[%d]\n got %s\nwant %s", i, g, w)
		}
		if owners && (len(got.TaskOwners) != len(got.Tasks) || got.TaskOwners[i] != want.TaskOwners[i]) {
			return fmt.Sprintf("owners %q, want %q (O5)", got.TaskOwners, want.TaskOwners)
		}
	}
	switch {
	case got.NextPageToken != want.NextPageToken:
		return fmt.Sprintf("next token %q, want %q", got.NextPageToken, want.NextPageToken)
	case got.TotalSize != want.TotalSize:
		return fmt.Sprintf("total size %d, want %d", got.TotalSize, want.TotalSize)
	case got.PageSize != want.PageSize:
		return fmt.Sprintf("page size %d, want %d", got.PageSize, want.PageSize)
	}
	return ""
}

// pageIDs formats a page's task IDs.
func pageIDs(r *engine.ListResponse) string {
	ids := make([]string, len(r.Tasks))
	for i, t := range r.Tasks {
		if t == nil {
			ids[i] = "<nil>"
			continue
		}
		ids[i] = strconv.Quote(string(t.ID))
	}
	return fmt.Sprint(ids)
}

// mustCreate creates t and fails the test on error.
func (e *env) mustCreate(t testing.TB, tk *a2a.Task) engine.Record {
	t.Helper()
	r, err := e.s.Create(e.ctx, tk)
	if err != nil {
		t.Fatalf("Create(%q): %v", string(tk.ID), err)
	}
	return r
}

// mustCreateOwned creates t for owner with CreateOwned and fails the test
// on error or when the record does not carry the owner (O1, O2).
// REQUIRES: e.o is set.
func (e *env) mustCreateOwned(t testing.TB, tk *a2a.Task, owner string) engine.Record {
	t.Helper()
	r, err := e.o.CreateOwned(e.ctx, tk, owner)
	if err != nil {
		t.Fatalf("CreateOwned(%q, owner %q): %v", string(tk.ID), owner, err)
	}
	if r.Owner != owner {
		t.Fatalf("CreateOwned(%q, owner %q) returned owner %q (O2)", string(tk.ID), owner, r.Owner)
	}
	return r
}

// mustGet gets id and fails the test on error.
func (e *env) mustGet(t testing.TB, id a2a.TaskID) engine.Record {
	t.Helper()
	r, err := e.s.Get(e.ctx, id)
	if err != nil {
		t.Fatalf("Get(%q): %v", string(id), err)
	}
	return r
}

// mustList lists and fails the test on error; it also checks the shape
// every response must have (L6 alignment, T2 URL-safe tokens).
func (e *env) mustList(t testing.TB, req engine.ListRequest) *engine.ListResponse {
	t.Helper()
	resp, err := e.s.List(e.ctx, &req)
	if err != nil {
		t.Fatalf("List(%s): %v", fmtReq(req), err)
	}
	if msg := e.checkPage(req, resp); msg != "" {
		t.Fatalf("List(%s): %s", fmtReq(req), msg)
	}
	return resp
}

// checkPage is checkPage, and on an OwnerStore checkOwners too.
func (e *env) checkPage(req engine.ListRequest, resp *engine.ListResponse) string {
	if msg := checkPage(req, resp); msg != "" || e.o == nil {
		return msg
	}
	return checkOwners(req, resp)
}

// checkOwners checks what holds of every page of an OwnerStore: one owner
// per task (O5) and, on a page filtered by owner, only that owner's tasks
// (O3).
func checkOwners(req engine.ListRequest, resp *engine.ListResponse) string {
	if len(resp.TaskOwners) != len(resp.Tasks) {
		return fmt.Sprintf("%d tasks but %d owners (O5)", len(resp.Tasks), len(resp.TaskOwners))
	}
	for i, o := range resp.TaskOwners {
		if req.Owner != "" && o != req.Owner {
			return fmt.Sprintf("task %q of owner %q on a page filtered by owner %q (O3)", string(resp.Tasks[i].ID), o, req.Owner)
		}
	}
	return ""
}

// checkPage checks a successful response against its request: the shape
// checkResponse checks, at most the page size of tasks (L1, L3), and every
// task strictly after the request's boundary (L1) — so a traversal always
// makes progress.
func checkPage(req engine.ListRequest, resp *engine.ListResponse) string {
	if msg := checkResponse(resp); msg != "" {
		return msg
	}
	size := req.PageSize
	if size == 0 {
		size = specDefaultPageSize
	}
	if len(resp.Tasks) > size {
		return fmt.Sprintf("%d tasks on a page of size %d (L1)", len(resp.Tasks), size)
	}
	if resp.PageSize != size {
		return fmt.Sprintf("response page size %d, want %d (L3)", resp.PageSize, size)
	}
	if req.PageToken == "" {
		return ""
	}
	b, ok := specBoundary(req.PageToken)
	if !ok {
		return ""
	}
	for _, c := range resp.TaskCursors {
		if c.Compare(b) <= 0 {
			return fmt.Sprintf("task at %s is not strictly after the boundary %s (L1)", fmtCursor(c), fmtCursor(b))
		}
	}
	return ""
}

// checkResponse checks what holds of every successful List response: aligned
// cursors naming their tasks (L6), cursors strictly descending (S6), and a
// next token that is URL-safe and encodes the last task's cursor (T2, T6).
func checkResponse(resp *engine.ListResponse) string {
	if resp == nil {
		return "nil response"
	}
	if len(resp.TaskCursors) != len(resp.Tasks) {
		return fmt.Sprintf("%d tasks but %d cursors (L6)", len(resp.Tasks), len(resp.TaskCursors))
	}
	for i, tk := range resp.Tasks {
		if tk == nil {
			return fmt.Sprintf("task %d is nil", i)
		}
		if resp.TaskCursors[i].ID != tk.ID {
			return fmt.Sprintf("cursor %d names %q, task is %q (L6)", i, string(resp.TaskCursors[i].ID), string(tk.ID))
		}
		if i > 0 && resp.TaskCursors[i-1].Compare(resp.TaskCursors[i]) >= 0 {
			return fmt.Sprintf("cursors %s then %s not strictly descending (S6)", fmtCursor(resp.TaskCursors[i-1]), fmtCursor(resp.TaskCursors[i]))
		}
	}
	if resp.NextPageToken != "" {
		if len(resp.Tasks) == 0 {
			return "next token on an empty page (T6)"
		}
		if msg := checkToken(resp.NextPageToken); msg != "" {
			return msg
		}
		c, _ := specBoundary(resp.NextPageToken)
		if last := resp.TaskCursors[len(resp.TaskCursors)-1]; c != last {
			return fmt.Sprintf("next token encodes %s, last task is at %s (T6)", fmtCursor(c), fmtCursor(last))
		}
	}
	return ""
}

// checkToken checks a token is URL-safe and canonical v1 (T2, T3).
func checkToken(tok string) string {
	for i := 0; i < len(tok); i++ {
		b := tok[i]
		if !('A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_' || b == '.' || b == '~') {
			return fmt.Sprintf("token %q has a character outside RFC 3986 unreserved (T2)", tok)
		}
	}
	if _, ok := specBoundary(tok); !ok {
		return fmt.Sprintf("token %q is not the canonical v1 token of a valid cursor (T2, T3)", tok)
	}
	return ""
}

// traverse runs a whole traversal (T1) with the request's filters and page
// size and returns the tasks and cursors in order. It fails when a page is
// malformed, when cursors do not strictly descend across pages, when an ID
// repeats (L7), or after more pages than tasks could fill.
func (e *env) traverse(t testing.TB, req engine.ListRequest, maxTasks int) ([]*a2a.Task, []engine.Cursor) {
	t.Helper()
	tasks, cursors, err := traverse(e, req, maxTasks)
	if err != nil {
		t.Fatalf("traversal %s: %v", fmtReq(req), err)
	}
	return tasks, cursors
}

func traverse(e *env, req engine.ListRequest, maxTasks int) ([]*a2a.Task, []engine.Cursor, error) {
	var tasks []*a2a.Task
	var cursors []engine.Cursor
	seen := map[a2a.TaskID]bool{}
	req.PageToken = ""
	page := 0
	for resp, err := range taskiter.StorePages(e.ctx, e.s, req) {
		if err != nil {
			return nil, nil, fmt.Errorf("page %d: %w", page, err)
		}
		if msg := e.checkPage(req, resp); msg != "" {
			return nil, nil, fmt.Errorf("page %d: %s", page, msg)
		}
		for i, tk := range resp.Tasks {
			c := resp.TaskCursors[i]
			if n := len(cursors); n > 0 && cursors[n-1].Compare(c) >= 0 {
				return nil, nil, fmt.Errorf("page %d: cursor %s after %s: not strictly descending (L7)", page, fmtCursor(c), fmtCursor(cursors[n-1]))
			}
			if seen[tk.ID] {
				return nil, nil, fmt.Errorf("page %d: task %q seen twice (L7)", page, string(tk.ID))
			}
			seen[tk.ID] = true
			tasks, cursors = append(tasks, tk), append(cursors, c)
		}
		if resp.NextPageToken != "" && len(resp.Tasks) == 0 {
			return nil, nil, fmt.Errorf("page %d: empty page with a next token (T6)", page)
		}
		// The next page's request, for checkPage: the token copied (T1).
		req.PageToken = resp.NextPageToken
		if page++; page > maxTasks+1 && req.PageToken != "" {
			return nil, nil, fmt.Errorf("no end after %d pages (T1)", page)
		}
	}
	return tasks, cursors, nil
}

// ids returns the IDs of tasks.
func ids(tasks []*a2a.Task) []a2a.TaskID {
	out := make([]a2a.TaskID, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

// expectErr fails unless err is the sentinel want.
func expectErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// expectUnchanged fails unless id's record equals before (S3).
func (e *env) expectUnchanged(t testing.TB, what string, before engine.Record) {
	t.Helper()
	after, err := e.s.Get(e.ctx, before.Task.ID)
	if err != nil {
		t.Errorf("%s: Get afterwards: %v", what, err)
		return
	}
	if d := diffRecord(after, before); d != "" {
		t.Errorf("%s changed the task (S3): %s", what, d)
	}
}

func intp(n int) *int { return &n }
