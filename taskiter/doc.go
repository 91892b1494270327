// Package taskiter walks every page of a ListTasks traversal.
//
// It is the way to list tasks: start with an empty page token, copy
// NextPageToken unchanged into the next request, stop when it is empty
// (SPEC T1). Never compute tokens, offsets or page numbers — a token is an
// opaque cursor (T2), valid on any transport (W2) and not bound to filters
// (T7).
//
//	for task, err := range taskiter.All(ctx, client, &a2a.ListTasksRequest{ContextID: "c1"}) {
//		if err != nil {
//			return err
//		}
//		use(task)
//	}
//
// All works with anything that has a ListTasks method: an *a2aclient.Client
// over JSON-RPC, HTTP+JSON or gRPC, or an a2asrv.RequestHandler in process;
// wrap a taskstore.Store as ListerFunc(store.List). FromStore does the same
// over an engine.Store.
//
// Traversals are live (L7): tasks mutated while the loop runs appear at
// most once, tasks untouched during the loop exactly once.
package taskiter
