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
// HeaderIdentity is a call interceptor that takes the caller identity from a
// trusted request header, for authorization policies (engine/authz) in
// staging setups.
//
// a2a-go's transports do not carry every ListTasks parameter equally; see
// GRPCListTasksValidator and RESTQueryCompat for the two gaps this package
// closes on the server side, and the repository README ("Transport
// limitations found in a2a-go v2.3.1") for the ones it cannot.
package a2aserver
