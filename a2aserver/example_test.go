package a2aserver_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
)

// An a2a-go server whose tasks are per user: each user lists, reads and
// continues only the tasks it created. The owner is the authenticated user
// of the call (a2asrv.CallContext.User, set here by bearerAuth), recorded
// by the store beside the task; a call without one cannot list.
func Example_perUserTasks() {
	store := memstore.New(memstore.Options{}) // any engine.OwnerStore
	defer store.Close()

	tasks := a2aserver.TaskStore(authz.New(store, authz.OwnerPolicy{}))
	handler := a2asrv.NewHandler(doneAgent{},
		a2asrv.WithTaskStore(tasks),
		a2asrv.WithCallInterceptors(bearerAuth{"tok-a": "alice", "tok-b": "bob"}, a2aserver.TaskGuard(tasks)))

	for _, token := range []string{"tok-a", "tok-b", "tok-a"} {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))
		if _, err := handler.SendMessage(call(token), &a2a.SendMessageRequest{Message: msg}); err != nil {
			panic(err)
		}
	}
	for _, token := range []string{"tok-a", "tok-b", ""} {
		resp, err := handler.ListTasks(call(token), &a2a.ListTasksRequest{})
		if err != nil {
			fmt.Printf("%q: %v (unauthenticated: %v)\n", token, err, errors.Is(err, a2a.ErrUnauthenticated))
			continue
		}
		fmt.Printf("%q: %d tasks, totalSize %d\n", token, len(resp.Tasks), resp.TotalSize)
	}
	// Output:
	// "tok-a": 2 tasks, totalSize 2
	// "tok-b": 1 tasks, totalSize 1
	// "": failed to list tasks: caller identity required (unauthenticated: true)
}

// call is the context a transport gives the handler for a request carrying
// an Authorization header with token ("" = none).
func call(token string) context.Context {
	params := map[string][]string{}
	if token != "" {
		params["authorization"] = []string{"Bearer " + token}
	}
	ctx, _ := a2asrv.NewCallContext(context.Background(), a2asrv.NewServiceParams(params))
	return ctx
}

// bearerAuth stands for real authentication: it maps a bearer token to its
// user and records the user as the call's authenticated user, where
// authz.OwnerPolicy reads the caller. Unknown tokens are refused.
type bearerAuth map[string]string

func (a bearerAuth) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	vals, _ := cc.ServiceParams().Get("authorization")
	if len(vals) == 0 {
		return ctx, nil, nil // anonymous: the store decides what it may do
	}
	user, ok := a[strings.TrimPrefix(vals[0], "Bearer ")]
	if len(vals) > 1 || !ok {
		return ctx, nil, a2a.ErrUnauthenticated
	}
	cc.User = a2asrv.NewAuthenticatedUser(user, nil)
	return ctx, nil, nil
}

func (bearerAuth) After(context.Context, *a2asrv.CallContext, *a2asrv.Response) error { return nil }

// doneAgent completes every task it is given.
type doneAgent struct{}

func (doneAgent) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (doneAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}
