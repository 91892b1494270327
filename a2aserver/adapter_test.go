package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
)

func newTask(id, ctxID string) *a2a.Task {
	return &a2a.Task{ID: a2a.TaskID(id), ContextID: ctxID, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
}

// TestVersionsAreRevisions (W1): Create is version 1, each Update +1, a
// stale PrevVersion is ErrConcurrentModification, TaskVersionMissing
// replaces unconditionally, duplicates are ErrTaskAlreadyExists.
func TestVersionsAreRevisions(t *testing.T) {
	ctx := t.Context()
	ts := TaskStore(memstore.New(memstore.Options{}))
	v, err := ts.Create(ctx, newTask("t1", "c"))
	if err != nil || v != 1 {
		t.Fatalf("Create = %d, %v; want 1", v, err)
	}
	if _, err := ts.Create(ctx, newTask("t1", "c")); !errors.Is(err, taskstore.ErrTaskAlreadyExists) {
		t.Errorf("duplicate Create: %v, want ErrTaskAlreadyExists", err)
	}
	upd := newTask("t1", "c")
	upd.Status.State = a2a.TaskStateWorking
	v, err = ts.Update(ctx, &taskstore.UpdateRequest{Task: upd, PrevVersion: 1})
	if err != nil || v != 2 {
		t.Fatalf("Update(prev 1) = %d, %v; want 2", v, err)
	}
	if _, err := ts.Update(ctx, &taskstore.UpdateRequest{Task: upd, PrevVersion: 1}); !errors.Is(err, taskstore.ErrConcurrentModification) {
		t.Errorf("stale Update: %v, want ErrConcurrentModification", err)
	}
	v, err = ts.Update(ctx, &taskstore.UpdateRequest{Task: upd, PrevVersion: taskstore.TaskVersionMissing})
	if err != nil || v != 3 {
		t.Errorf("unconditional Update = %d, %v; want 3", v, err)
	}
	got, err := ts.Get(ctx, "t1")
	if err != nil || got.Version != 3 || got.Task.Status.State != a2a.TaskStateWorking {
		t.Errorf("Get = %+v, %v; want version 3, working", got, err)
	}
	if _, err := ts.Get(ctx, "nope"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("Get missing: %v, want ErrTaskNotFound", err)
	}
	if _, err := ts.Update(ctx, &taskstore.UpdateRequest{Task: newTask("nope", "c")}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("Update missing: %v, want ErrTaskNotFound", err)
	}
	if _, err := ts.Create(ctx, &a2a.Task{ID: "bad"}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("Create without state: %v, want ErrInvalidParams", err)
	}
}

// wantedStore records, for each Create and Replace, whether its caller
// asked for the task back (engine.TaskWanted).
type wantedStore struct {
	engine.Store
	wanted []bool
}

func (s *wantedStore) Create(ctx context.Context, task *a2a.Task) (engine.Record, error) {
	s.wanted = append(s.wanted, engine.TaskWanted(ctx))
	return s.Store.Create(ctx, task)
}

func (s *wantedStore) Replace(ctx context.Context, task *a2a.Task, expected int64) (engine.Record, error) {
	s.wanted = append(s.wanted, engine.TaskWanted(ctx))
	return s.Store.Replace(ctx, task, expected)
}

// TestWritesTakeNoCopy: the adapter's Create and Update ask the store for
// no copy of the task (engine.WithoutTask), since a2a-go takes only the
// version; the versions are still the revisions.
func TestWritesTakeNoCopy(t *testing.T) {
	ws := &wantedStore{Store: memstore.New(memstore.Options{})}
	ts := TaskStore(ws)
	if v, err := ts.Create(t.Context(), newTask("t1", "c")); err != nil || v != 1 {
		t.Fatalf("Create = %d, %v; want 1", v, err)
	}
	if v, err := ts.Update(t.Context(), &taskstore.UpdateRequest{Task: newTask("t1", "c"), PrevVersion: 1}); err != nil || v != 2 {
		t.Fatalf("Update = %d, %v; want 2", v, err)
	}
	if len(ws.wanted) != 2 || ws.wanted[0] || ws.wanted[1] {
		t.Errorf("task wanted back by Create, Update: %v; want [false false]", ws.wanted)
	}
}

// recordingStore answers List with a canned response or error and records
// the request it got.
type recordingStore struct {
	engine.Store
	got  *engine.ListRequest
	resp *engine.ListResponse
	err  error
}

func (s *recordingStore) List(_ context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	r := *req
	s.got = &r
	return s.resp, s.err
}

// TestListRequest (W1, W4): public fields are copied, the token byte for
// byte, the total is always asked for, and the engine's internal response
// fields are not forwarded.
func TestListRequest(t *testing.T) {
	after := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	hl := 3
	token := "odd token\x00with bytes é%2F"
	rs := &recordingStore{resp: &engine.ListResponse{
		Tasks:         []*a2a.Task{newTask("a", "c")},
		TaskCursors:   []engine.Cursor{{UpdatedAt: 7, ID: "a"}},
		NextPageToken: "next",
		PageSize:      9,
		TotalSize:     42,
	}}
	resp, err := TaskStore(rs).List(t.Context(), &a2a.ListTasksRequest{
		Tenant: "tenant", ContextID: "c", Status: a2a.TaskStateWorking, PageSize: 9, PageToken: token,
		HistoryLength: &hl, StatusTimestampAfter: &after, IncludeArtifacts: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := engine.ListRequest{
		ContextID: "c", Status: a2a.TaskStateWorking, PageSize: 9, PageToken: token,
		HistoryLength: &hl, StatusTimestampAfter: &after, IncludeArtifacts: true, IncludeTotalSize: true,
	}
	if g := rs.got; g.ContextID != want.ContextID || g.Status != want.Status || g.PageSize != want.PageSize ||
		g.PageToken != want.PageToken || g.HistoryLength != want.HistoryLength || g.StatusTimestampAfter != want.StatusTimestampAfter ||
		g.IncludeArtifacts != want.IncludeArtifacts || !g.IncludeTotalSize || g.Projection != engine.ProjectionFull {
		t.Errorf("engine got %+v, want %+v", *g, want)
	}
	if resp.TotalSize != 42 || resp.PageSize != 9 || resp.NextPageToken != "next" || len(resp.Tasks) != 1 {
		t.Errorf("response %+v", resp)
	}

	// An engine page with a nil task list still shows "tasks": [].
	rs.resp = &engine.ListResponse{PageSize: 50}
	resp, err = TaskStore(rs).List(t.Context(), &a2a.ListTasksRequest{})
	if err != nil || resp.Tasks == nil || len(resp.Tasks) != 0 {
		t.Errorf("empty page: %+v, %v; want a non-nil empty list", resp, err)
	}
}

// TestErrorMapping (W1, W3): every engine sentinel becomes the a2a-go
// sentinel its transports turn into wire codes, with a fixed message that
// carries nothing from the backend.
func TestErrorMapping(t *testing.T) {
	secret := "pq: relation a2a_tasks at 10.0.0.7 password=hunter2"
	cases := []struct {
		err  error
		want error
		msg  string
	}{
		{fmt.Errorf("pgstore: list: %s: %w", secret, engine.ErrInvalidPageToken), a2a.ErrInvalidParams, "invalid page token"},
		{engine.ErrInvalidPageToken, a2a.ErrInvalidParams, "invalid page token"},
		{fmt.Errorf("x %s: %w", secret, engine.ErrInvalidArgument), a2a.ErrInvalidParams, "invalid params"},
		{fmt.Errorf("x %s: %w", secret, engine.ErrNotFound), a2a.ErrTaskNotFound, "task not found"},
		{fmt.Errorf("x %s: %w", secret, engine.ErrNotCancelable), a2a.ErrTaskNotCancelable, "task cannot be canceled"},
		{fmt.Errorf("x %s: %w", secret, engine.ErrRevisionConflict), taskstore.ErrConcurrentModification, ""},
		{fmt.Errorf("x %s: %w", secret, engine.ErrAlreadyExists), taskstore.ErrTaskAlreadyExists, ""},
		{fmt.Errorf("x %s: %w", secret, engine.ErrInternal), a2a.ErrInternalError, "internal error"},
		{errors.New(secret), a2a.ErrInternalError, "internal error"},
		{fmt.Errorf("x %s: %w", secret, context.Canceled), context.Canceled, ""},
	}
	for _, c := range cases {
		rs := &recordingStore{err: c.err}
		_, err := TaskStore(rs).List(t.Context(), &a2a.ListTasksRequest{})
		if !errors.Is(err, c.want) {
			t.Errorf("%v: got %v, want errors.Is %v", c.err, err, c.want)
		}
		if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "engine:") {
			t.Errorf("%v: message %q leaks backend detail", c.err, err)
		}
		if c.msg != "" && err.Error() != c.msg {
			t.Errorf("%v: message %q, want %q", c.err, err, c.msg)
		}
	}
}

// TestBadTokensOneMessage (T4): through the real engine validation, every
// bad token gets the same message, which never contains the token.
func TestBadTokensOneMessage(t *testing.T) {
	ts := TaskStore(memstore.New(memstore.Options{}))
	msgs := map[string]bool{}
	for _, tok := range []string{"0", "1", "50", "-1", "garbage", "AAAA", "v1", strings.Repeat("z", 5000), "\x00"} {
		_, err := ts.List(t.Context(), &a2a.ListTasksRequest{PageToken: tok})
		if !errors.Is(err, a2a.ErrInvalidParams) {
			t.Fatalf("token %q: %v, want ErrInvalidParams", tok, err)
		}
		if strings.Contains(err.Error(), tok) {
			t.Errorf("token %q echoed in %q", tok, err)
		}
		msgs[err.Error()] = true
	}
	if len(msgs) != 1 {
		t.Errorf("bad tokens gave %d different messages: %v", len(msgs), msgs)
	}
}

// TestRESTQueryCompat: the parameters a2a-go's HTTP+JSON binding drops
// reach the engine request through the context, and bad values are
// ErrInvalidParams.
func TestRESTQueryCompat(t *testing.T) {
	cases := []struct {
		query   string
		hl      *int
		after   *time.Time
		invalid bool
	}{
		{query: "historyLength=2", hl: new(2)},
		{query: "historyLength=-1", hl: new(-1)},
		{query: "historyLength=x", invalid: true},
		{query: "statusTimestampAfter=2026-01-02T03:04:05.123456789Z", after: new(time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC))},
		{query: "lastUpdatedAfter=2026-01-02T03:04:05Z", after: new(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))},
		{query: "statusTimestampAfter=yesterday", invalid: true},
		{query: "pageSize=3"},
	}
	for _, c := range cases {
		rs := &recordingStore{resp: &engine.ListResponse{}}
		store := TaskStore(rs)
		var listErr error
		h := RESTQueryCompat(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, listErr = store.List(r.Context(), &a2a.ListTasksRequest{})
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/tasks?"+c.query, nil))
		if c.invalid {
			if !errors.Is(listErr, a2a.ErrInvalidParams) {
				t.Errorf("%s: %v, want ErrInvalidParams", c.query, listErr)
			}
			continue
		}
		if listErr != nil {
			t.Fatalf("%s: %v", c.query, listErr)
		}
		if (rs.got.HistoryLength == nil) != (c.hl == nil) || (c.hl != nil && *rs.got.HistoryLength != *c.hl) {
			t.Errorf("%s: history length %v, want %v", c.query, rs.got.HistoryLength, c.hl)
		}
		if (rs.got.StatusTimestampAfter == nil) != (c.after == nil) || (c.after != nil && !rs.got.StatusTimestampAfter.Equal(*c.after)) {
			t.Errorf("%s: status after %v, want %v", c.query, rs.got.StatusTimestampAfter, c.after)
		}
	}
}

// TestGRPCRequestValidator: the arguments a2a-go's protobuf conversion
// would silently drop or reinterpret are INVALID_ARGUMENT, without the
// value in the message and with the google.rpc.ErrorInfo (reason
// INVALID_PARAMS, A2A domain) that classifies it as InvalidParamsError
// (W10); everything else passes.
func TestGRPCRequestValidator(t *testing.T) {
	called := false
	next := func(ctx context.Context, req any) (any, error) { called = true; return nil, nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/lf.a2a.v1.A2AService/ListTasks"}
	neg, pos := int32(-1), int32(0)
	for _, c := range []struct {
		req  any
		pass bool
	}{
		{&a2apb.ListTasksRequest{HistoryLength: &neg}, false},
		{&a2apb.ListTasksRequest{Status: a2apb.TaskState(99)}, false},
		{&a2apb.ListTasksRequest{Status: a2apb.TaskState(-3)}, false},
		{&a2apb.ListTasksRequest{StatusTimestampAfter: &timestamppb.Timestamp{Seconds: 1, Nanos: 2_000_000_000}}, false},
		{&a2apb.ListTasksRequest{StatusTimestampAfter: &timestamppb.Timestamp{Nanos: -1}}, false},
		{&a2apb.ListTasksRequest{StatusTimestampAfter: &timestamppb.Timestamp{Seconds: -1e12}}, false},
		{&a2apb.ListTasksRequest{StatusTimestampAfter: &timestamppb.Timestamp{Seconds: 1e12}}, false},
		{&a2apb.GetTaskRequest{Id: "x", HistoryLength: &neg}, false},
		{&a2apb.SendMessageRequest{Configuration: &a2apb.SendMessageConfiguration{HistoryLength: &neg}}, false},
		{&a2apb.SendMessageRequest{Configuration: &a2apb.SendMessageConfiguration{HistoryLength: &pos}}, true},
		{&a2apb.SendMessageRequest{}, true},
		{&a2apb.ListTasksRequest{HistoryLength: &pos, Status: a2apb.TaskState_TASK_STATE_WORKING}, true},
		{&a2apb.ListTasksRequest{StatusTimestampAfter: timestamppb.New(time.Date(2026, 1, 1, 0, 0, 0, 999_999_999, time.UTC))}, true},
		{&a2apb.ListTasksRequest{}, true},
		{&a2apb.GetTaskRequest{Id: "x"}, true},
		{&a2apb.GetTaskRequest{Id: "x", HistoryLength: &pos}, true},
	} {
		called = false
		_, err := GRPCRequestValidator(t.Context(), c.req, info, next)
		if c.pass != (err == nil && called) {
			t.Errorf("%v: err %v, called %v; want pass=%v", c.req, err, called, c.pass)
		}
		if !c.pass && (status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != msgInvalidParams) {
			t.Errorf("%v: %v, want INVALID_ARGUMENT %q", c.req, err, msgInvalidParams)
		}
		if !c.pass && grpcReason(err) != "INVALID_PARAMS" {
			t.Errorf("%v: %v: ErrorInfo reason %q, want INVALID_PARAMS in domain %s", c.req, err, grpcReason(err), a2a.ProtocolDomain)
		}
	}
}

// grpcReason returns the reason of the A2A-domain google.rpc.ErrorInfo in
// a gRPC status error, "" when it has none.
func grpcReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == a2a.ProtocolDomain {
			return info.GetReason()
		}
	}
	return ""
}
