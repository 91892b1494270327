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
//     exists → taskstore.ErrTaskAlreadyExists, anything else →
//     a2a.ErrInternalError. Remote callers see fixed messages only; a bad
//     page token always reads "invalid page token", whatever the token.
//
// Serving clients that are not trusted takes more than the store; the
// package provides each piece, and cmd/a2astore-server installs them all:
//
//   - TaskGuard, a call interceptor that makes every method naming a task
//     answer exactly as for a missing task when the store's policy denies
//     it (a2a-go reaches running tasks without asking the store);
//   - ContentGuard, a call interceptor that answers invalid params to a
//     message a2a-go would accept but its gRPC binding cannot serve;
//   - HeaderIdentity, the caller identity from a request header trusted as
//     sent (staging, or behind a proxy that authenticates and overwrites
//     it), refusing repeated headers and, with Required, anonymous calls;
//   - ServeLimits, request size and timeouts for HTTP (without cutting
//     Server-Sent Event streams), a connection cap per listener, and the
//     gRPC server (GRPCServer: its options, a deadline on each call's
//     request, and a GracefulStop that does not wait for calls still
//     receiving it);
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
// GRPCRequestValidator, RESTQueryCompat and JSONRPCParamsCompat for the
// gaps this package closes on the server side, and the README for the ones
// it cannot.
package a2aserver
