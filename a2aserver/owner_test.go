package a2aserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
)

// TestPerUserTasks: over authz.OwnerPolicy the adapter gives each caller
// (the call context's authenticated user) its own tasks: the store records
// the creator as owner, outside the task (no client sees the owner: it is
// in no task field, W4), and each lists and reads its own only.
func TestPerUserTasks(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	ts := TaskStore(authz.New(mem, authz.OwnerPolicy{}))
	h := a2asrv.NewHandler(newHeldAgentDone(), a2asrv.WithTaskStore(ts),
		a2asrv.WithCallInterceptors(HeaderIdentity{Header: callerHeader}, TaskGuard(ts)))
	mine := map[string][]a2a.TaskID{}
	for _, who := range []string{"alice", "bob", "alice"} {
		res, err := h.SendMessage(caller(t.Context(), who), &a2a.SendMessageRequest{
			Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")),
		})
		if err != nil {
			t.Fatal(err)
		}
		mine[who] = append(mine[who], res.(*a2a.Task).ID)
	}
	for who, ids := range mine {
		resp, err := h.ListTasks(caller(t.Context(), who), &a2a.ListTasksRequest{})
		if err != nil || len(resp.Tasks) != len(ids) || resp.TotalSize != len(ids) {
			t.Fatalf("%s lists %+v, %v; owns %v", who, resp, err, ids)
		}
		for _, task := range resp.Tasks {
			rec, err := mem.Get(t.Context(), task.ID)
			if err != nil || rec.Owner != who {
				t.Fatalf("%s lists %s owned by %q (%v)", who, task.ID, rec.Owner, err)
			}
			raw, _ := json.Marshal(task)
			if strings.Contains(string(raw), who) {
				t.Errorf("the owner shows in the task a client receives: %s", raw)
			}
		}
	}
	if _, err := h.GetTask(caller(t.Context(), "bob"), &a2a.GetTaskRequest{ID: mine["alice"][0]}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob reads alice's task: %v", err)
	}
}

// newHeldAgentDone is a heldAgent already released: it completes at once.
func newHeldAgentDone() *heldAgent {
	a := newHeldAgent()
	close(a.release)
	return a
}

// userInterceptor sets the call's authenticated user, as an
// authenticating middleware before the handler would.
type userInterceptor struct {
	a2asrv.PassthroughCallInterceptor
	name string
}

func (u userInterceptor) Before(ctx context.Context, callCtx *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	callCtx.User = a2asrv.NewAuthenticatedUser(u.name, nil)
	return ctx, nil, nil
}

// levelRecorder records the highest level logged.
type levelRecorder struct {
	mu  sync.Mutex
	max slog.Level
	msg []string
}

func (r *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *levelRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.max = max(r.max, rec.Level)
	r.msg = append(r.msg, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *levelRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *levelRecorder) WithGroup(string) slog.Handler      { return r }

// TestOverlongIdentity: an identity longer than engine.MaxOwnerBytes, which
// no owner can be, is unauthenticated on every method — refused by
// HeaderIdentity, and no identity to OwnerPolicy when other middleware
// authenticated it — never an internal error (which the server would log
// at ERROR) on one method and invalid params on another. Nothing is stored.
func TestOverlongIdentity(t *testing.T) {
	long := strings.Repeat("x", engine.MaxOwnerBytes+1)
	for name, identify := range map[string]a2asrv.CallInterceptor{
		"HeaderIdentity":           HeaderIdentity{Header: callerHeader},
		"HeaderIdentity, required": HeaderIdentity{Header: callerHeader, Required: true},
		"authenticated user":       userInterceptor{name: long},
	} {
		mem := memstore.New(memstore.Options{})
		ts := TaskStore(authz.New(mem, authz.OwnerPolicy{}))
		logs := &levelRecorder{max: slog.LevelDebug}
		h := a2asrv.NewHandler(newHeldAgentDone(), a2asrv.WithTaskStore(ts), a2asrv.WithLogger(slog.New(logs)),
			a2asrv.WithCallInterceptors(identify, TaskGuard(ts)))
		ctx := caller(t.Context(), long)
		_, err := h.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi"))})
		if !errors.Is(err, a2a.ErrUnauthenticated) {
			t.Errorf("%s: SendMessage: %v; want unauthenticated", name, err)
		}
		if _, err := h.ListTasks(ctx, &a2a.ListTasksRequest{}); !errors.Is(err, a2a.ErrUnauthenticated) {
			t.Errorf("%s: ListTasks: %v; want unauthenticated", name, err)
		}
		if logs.max >= slog.LevelError {
			t.Errorf("%s: logged at ERROR: %q", name, logs.msg)
		}
		if resp, err := mem.List(t.Context(), &engine.ListRequest{IncludeTotalSize: true}); err != nil || resp.TotalSize != 0 {
			t.Errorf("%s: stored %d tasks (%v)", name, resp.TotalSize, err)
		}
	}
}

// TestUnauthenticatedCaller: a call without identity to a store that needs
// one gets the A2A unauthenticated error — the error HeaderIdentity with
// Required gives it, so the two agree: errors.Is a2a.ErrUnauthenticated in
// process, JSON-RPC -31401 and HTTP 401 on the wire, with the same message
// (a2a-go prefixes every ListTasks error with "failed to list tasks: ") —
// for ListTasks (authz.ErrUnauthenticated from the policy) and for
// SendMessage (no task is created). Nothing is stored.
func TestUnauthenticatedCaller(t *testing.T) {
	for _, required := range []bool{false, true} {
		mem := memstore.New(memstore.Options{})
		ts := TaskStore(authz.New(mem, authz.OwnerPolicy{}))
		h := a2asrv.NewHandler(newHeldAgentDone(), a2asrv.WithTaskStore(ts),
			a2asrv.WithCallInterceptors(HeaderIdentity{Header: callerHeader, Required: required}, TaskGuard(ts)))
		_, err := h.ListTasks(caller(t.Context(), ""), &a2a.ListTasksRequest{})
		if !errors.Is(err, a2a.ErrUnauthenticated) || !strings.HasSuffix(err.Error(), errNoIdentity.Error()) {
			t.Errorf("required=%v: anonymous ListTasks: %v; want %v", required, err, errNoIdentity)
		}
		_, err = h.SendMessage(caller(t.Context(), ""), &a2a.SendMessageRequest{
			Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")),
		})
		if !errors.Is(err, a2a.ErrUnauthenticated) {
			t.Errorf("required=%v: anonymous SendMessage: %v; want unauthenticated", required, err)
		}
		if resp, err := mem.List(t.Context(), &engine.ListRequest{IncludeTotalSize: true}); err != nil || resp.TotalSize != 0 {
			t.Errorf("required=%v: anonymous calls stored %d tasks (%v)", required, resp.TotalSize, err)
		}

		jsonrpc := httptest.NewServer(a2asrv.NewJSONRPCHandler(h))
		rest := httptest.NewServer(a2asrv.NewRESTHandler(h))
		resp, err := http.Post(jsonrpc.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Error.Code != -31401 || !strings.HasSuffix(out.Error.Message, errNoIdentity.Error()) {
			t.Errorf("required=%v: JSON-RPC ListTasks: %+v, %v; want -31401", required, out, err)
		}
		resp.Body.Close()
		resp, err = http.Get(rest.URL + "/tasks")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), errNoIdentity.Error()) {
			t.Errorf("required=%v: GET /tasks: %s %s; want 401", required, resp.Status, body)
		}
		jsonrpc.Close()
		rest.Close()
	}
}
