package a2aserver

import "github.com/a2astore/a2astore/engine"

// TaskStoreOptions configure NewTaskStore. The zero value is valid.
type TaskStoreOptions struct {
	// MaxPageBytes bounds the size of a ListTasks page, as the sum of
	// engine.TaskShape's Bytes of its tasks (an upper bound on their
	// protobuf size). A page that would exceed it ends early — with at
	// least one task — and its NextPageToken continues after the last
	// task it holds, as for any page shorter than its page size (SPEC L1,
	// T6). Without it, 100 tasks of up to 2 MiB each (engine.Limits'
	// default) make a page no default gRPC client can receive (4 MiB), and
	// a traversal stops there for good. Default DefaultMaxPageBytes (3 MiB);
	// negative: no limit.
	MaxPageBytes int
}

// DefaultMaxPageBytes is the default TaskStoreOptions.MaxPageBytes.
const DefaultMaxPageBytes = 3 << 20

// EnsureDefaults fills unset fields with their defaults.
func (o *TaskStoreOptions) EnsureDefaults() {
	if o.MaxPageBytes == 0 {
		o.MaxPageBytes = DefaultMaxPageBytes
	}
}

// fitPage ends resp early when its tasks exceed maxBytes together. It
// needs the page's cursors to make the token (A7: the authz dispatcher
// and the backends return them aligned); without them it leaves the page
// as it is.
func fitPage(resp *engine.ListResponse, maxBytes int) {
	if maxBytes < 0 || len(resp.Tasks) < 2 || len(resp.TaskCursors) != len(resp.Tasks) {
		return
	}
	total := 0
	for i, t := range resp.Tasks {
		total += engine.TaskShape(t).Bytes
		if i > 0 && total > maxBytes {
			resp.Tasks, resp.TaskCursors = resp.Tasks[:i], resp.TaskCursors[:i]
			resp.NextPageToken = engine.EncodeToken(resp.TaskCursors[i-1])
			return
		}
	}
}
