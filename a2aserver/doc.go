// Package a2aserver plugs an engine.Store into the official A2A Go SDK
// (github.com/a2aproject/a2a-go/v2).
//
// TaskStore adapts any engine.Store to a2a-go's taskstore.Store, so an
// existing a2a-go server swaps its store in one line:
//
//	handler := a2asrv.NewHandler(executor, a2asrv.WithTaskStore(a2aserver.TaskStore(store)))
//
// The adapter guarantees (SPEC W1, W4):
//
//   - Update is engine Replace, conditional when PrevVersion is set; task
//     versions are engine revisions.
//   - List always asks the engine for TotalSize (A2A responses carry it),
//     passes page tokens through byte for byte, never forwards the engine's
//     internal fields (IncludeTotalSize, Projection, TaskCursors) and
//     returns an empty page as an empty, non-nil task list.
//   - Errors are mapped to the a2a-go sentinels that its transports turn
//     into wire codes (W3): invalid argument → a2a.ErrInvalidParams
//     (-32602 / 400 / INVALID_ARGUMENT), not found → a2a.ErrTaskNotFound
//     (-32001 / 404 / NOT_FOUND), not cancelable → a2a.ErrTaskNotCancelable,
//     revision conflict → taskstore.ErrConcurrentModification, already
//     exists → taskstore.ErrTaskAlreadyExists, a caller a policy needs to
//     identify (authz.ErrUnauthenticated) → a2a.ErrUnauthenticated
//     (-31401 / 401 / UNAUTHENTICATED, the error HeaderIdentity gives with
//     Required), anything else → a2a.ErrInternalError. Remote callers see
//     fixed messages only; a bad page token always reads "invalid page
//     token", whatever the token.
//
// # Per-user tasks
//
// The adapter passes each call's context to the store, so a store wrapped
// in an authorization policy decides per caller. With authz.OwnerPolicy the
// caller is the authenticated user of the a2a-go call context
// (a2asrv.CallContextFrom(ctx).User, named and Authenticated: where a2a-go's
// authentication, an a2asrv.CallInterceptor of yours, or HeaderIdentity
// puts it). Each task is owned by the user whose call created it — the
// store records the owner beside the task (engine.OwnerStore), never in
// its content — and each user lists, reads, continues and cancels its own
// tasks only, as with a2a-go's own taskstore.InMemory; a call without a
// user cannot list (a2a.ErrUnauthenticated). Pages and totals come from the
// store's owner index and counters, so they cost the same whatever other
// users hold:
//
//	tasks := a2aserver.TaskStore(authz.New(store, authz.OwnerPolicy{}))
//	handler := a2asrv.NewHandler(agent, a2asrv.WithTaskStore(tasks),
//		a2asrv.WithCallInterceptors(yourAuthentication, a2aserver.TaskGuard(tasks)))
//
// store must record owners (memstore, and any engine.OwnerStore): over
// another store every task creation fails with engine.ErrOwnersUnsupported
// (an internal error on the wire). TaskStore over a bare store is
// unchanged: one tenant, every caller sees every task.
//
// Serving clients that are not trusted takes more than the store; the
// package provides each piece, and cmd/a2astore-server installs them all:
//
//   - TaskGuard, a call interceptor that makes every method naming a task
//     answer exactly as for a missing task when the store's policy denies
//     it (a2a-go reaches running tasks without asking the store), and
//     SubscribeToTask of a finished task UnsupportedOperationError (W6);
//   - StreamErrorsCompat, which answers a streaming call whose first event
//     would be an error with a plain error response — HTTP status and A2A
//     error body, or a JSON-RPC error response (200, application/json) —
//     instead of a 200 event stream holding it (W7);
//   - VersionGuard (with VersionParam), which refuses a call naming an A2A
//     protocol version other than 1.0 with VersionNotSupportedError (W8);
//   - CapabilityGuard, which answers the methods of a capability the agent
//     card does not declare (push notifications, streaming, the extended
//     card) as A2A §3.3.4 says, before TaskGuard reads the task;
//   - HistoryLength, SendMessage's configuration.historyLength applied to
//     the task it returns (§3.2.4);
//   - AgentCardHandler, the agent card with HTTP caching (§8.6.1);
//   - GRPCErrorCodes, the gRPC status codes of the A2A v1.0 error table
//     where a2a-go answers others (UnsupportedOperation: UNIMPLEMENTED);
//   - ContentGuard, a call interceptor that answers invalid params to a
//     message a2a-go would accept but its gRPC binding cannot serve;
//   - HeaderIdentity, the caller identity from a request header trusted as
//     sent (staging, or behind a proxy that authenticates and overwrites
//     it), refusing repeated headers and, with Required, anonymous calls;
//   - ServeLimits, request size and timeouts for HTTP (without cutting
//     Server-Sent Event streams), a connection cap per listener, and the
//     gRPC server (GRPCServer: its options, a deadline on each call's
//     request that closes the call's connection when it passes and no
//     call on it runs, and a GracefulStop that does not wait for calls
//     still receiving it); a
//     slow HTTP body gets 408 and its connection closed at once;
//   - LogHandler, which cuts client-chosen strings in log lines and keeps
//     client-caused outcomes out of the error log;
//   - Executions, which lets shutdown wait for the agent executions a2a-go
//     runs detached from requests and fail those it cannot wait for.
//
// The adapter itself keeps ListTasks pages within TaskStoreOptions'
// MaxPageBytes and refuses content a2a-go's gRPC binding cannot send or
// its gRPC client cannot decode.
//
// a2a-go's transports do not carry every request parameter equally; see
// GRPCRequestValidator, GRPCStreamRequestValidator, RESTQueryCompat and
// JSONRPCParamsCompat for the gaps this package closes on the server side,
// package clientcompat for one of a2a-go's JSON-RPC client, and
// docs/conformance.md for the whole list and the ones left open.
package a2aserver
