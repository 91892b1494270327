package a2aserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"

	"github.com/a2astore/a2astore/a2aserver"
	"github.com/a2astore/a2astore/engine/authz"
	"github.com/a2astore/a2astore/engine/memstore"
)

// The store swap: an a2a-go server keeps its tasks in a2astore by handing
// the adapter to a2asrv.WithTaskStore. Any engine.Store works.
func ExampleTaskStore() {
	var agent a2asrv.AgentExecutor = doneAgent{} // your agent
	store := memstore.New(memstore.Options{})    // or pebblestore.Open, pgstore.Open
	defer store.Close()
	handler := a2asrv.NewHandler(agent, a2asrv.WithTaskStore(a2aserver.TaskStore(store)))

	ctx := context.Background()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello"))
	if _, err := handler.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg}); err != nil {
		panic(err)
	}
	page, err := handler.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(page.Tasks), "task,", page.Tasks[0].Status.State, "- totalSize", page.TotalSize)
	// Output:
	// 1 task, TASK_STATE_COMPLETED - totalSize 1
}

// A server wired as a2astore-server wires itself: the call interceptors
// that close a2a-go v2.3.1's gaps (version first, then capabilities, before
// anything reads a task), subscriptions served from the task log (W9), the
// HTTP handlers' compatibility wrappers and the gRPC options. Add an
// identity interceptor (a2aserver.HeaderIdentity, or your authentication)
// before ContentGuard, and authz.OwnerPolicy around the store, for per-user
// tasks.
func Example_server() {
	card := &a2a.AgentCard{Name: "example", Capabilities: a2a.AgentCapabilities{Streaming: true}}
	store := memstore.New(memstore.Options{Log: true}) // the task log serves SubscribeToTask
	defer store.Close()

	ts := a2aserver.TaskStore(store)
	handler, err := a2aserver.SubscribeFromLog(a2asrv.NewHandler(doneAgent{}, a2asrv.WithTaskStore(ts), a2asrv.WithCallInterceptors(
		a2aserver.VersionGuard{}, a2aserver.CapabilityGuard(card.Capabilities), // first
		a2aserver.ContentGuard(), a2aserver.TaskGuard(ts), a2aserver.HistoryLength())), ts, store, 0)
	if err != nil {
		panic(err)
	}
	cardHandler, err := a2aserver.AgentCardHandler(card, a2aserver.AgentCardOptions{})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	jsonrpc := a2aserver.VersionParam(a2aserver.StreamErrorsCompat(a2aserver.JSONRPCParamsCompat(a2asrv.NewJSONRPCHandler(handler))))
	mux.Handle("/jsonrpc", jsonrpc)
	mux.Handle("/jsonrpc/{$}", jsonrpc)
	mux.Handle("/", a2aserver.VersionParam(a2aserver.StreamErrorsCompat(a2aserver.RESTQueryCompat(a2asrv.NewRESTHandler(handler)))))
	mux.Handle(a2asrv.WellKnownAgentCardPath, cardHandler)
	grpcSrv := grpc.NewServer(append(a2aserver.GRPCErrorCodes(),
		grpc.UnaryInterceptor(a2aserver.GRPCRequestValidator), grpc.ChainStreamInterceptor(a2aserver.GRPCStreamRequestValidator))...)
	defer grpcSrv.Stop() // register a2agrpc.NewHandler(handler) on it and serve it on its own listener

	srv := httptest.NewServer(mux)
	defer srv.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":10}}`
	for _, version := range []string{"1.0", "0.3"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/jsonrpc", strings.NewReader(body))
		req.Header.Set(a2aserver.VersionHeader, version)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(version, strings.Contains(string(answer), `"tasks":[]`), strings.Contains(string(answer), "-32009"))
	}
	// Output:
	// 1.0 true false
	// 0.3 false true
}

// Per-user tasks with the caller taken from a request header, as
// a2astore-server -policy owner does: the header is trusted as sent, so
// use it behind a proxy that authenticates callers and overwrites it.
// TaskGuard makes every task-naming method answer another caller's task
// as missing.
func ExampleHeaderIdentity() {
	var agent a2asrv.AgentExecutor = doneAgent{}
	store := memstore.New(memstore.Options{})
	defer store.Close()

	ts := a2aserver.TaskStore(authz.New(store, authz.OwnerPolicy{}))
	handler := a2asrv.NewHandler(agent, a2asrv.WithTaskStore(ts),
		a2asrv.WithCallInterceptors(a2aserver.HeaderIdentity{Header: "X-A2astore-Caller", Required: true},
			a2aserver.TaskGuard(ts)))

	srv := httptest.NewServer(a2asrv.NewRESTHandler(handler))
	defer srv.Close()
	for _, caller := range []string{"alice", ""} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/tasks", nil)
		req.Header.Set(a2aserver.VersionHeader, "1.0")
		if caller != "" {
			req.Header.Set("X-A2astore-Caller", caller)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%q: %d\n", caller, resp.StatusCode)
	}
	// Output:
	// "alice": 200
	// "": 401
}
