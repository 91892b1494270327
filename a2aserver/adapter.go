package a2aserver

import (
	"context"
	"errors"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/a2aproject/a2a-go/v2/log"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz"
)

// TaskStore adapts s to a2a-go's taskstore.Store (SPEC W1) with the
// default TaskStoreOptions. See the package documentation for the
// guarantees.
func TaskStore(s engine.Store) taskstore.Store {
	return NewTaskStore(s, TaskStoreOptions{})
}

// NewTaskStore is TaskStore with options.
func NewTaskStore(s engine.Store, opts TaskStoreOptions) taskstore.Store {
	opts.EnsureDefaults()
	return &adapter{store: s, opts: opts}
}

type adapter struct {
	store engine.Store
	opts  TaskStoreOptions
}

var _ taskstore.Store = (*adapter)(nil)

// Create stores a new task; its version is the engine revision (1). The
// store returns no copy of the task (engine.WithoutTask): only the
// version goes back to a2a-go, here and in Update.
func (a *adapter) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	if err := checkServable(task); err != nil {
		return taskstore.TaskVersionMissing, wireError(ctx, "create", err)
	}
	rec, err := a.store.Create(engine.WithoutTask(ctx), task)
	if err != nil {
		return taskstore.TaskVersionMissing, wireError(ctx, "create", err)
	}
	return taskstore.TaskVersion(rec.Revision), nil
}

// Update replaces the stored task. PrevVersion, when set, must equal the
// stored revision; taskstore.TaskVersionMissing (0) replaces unconditionally,
// which is exactly engine.Store.Replace's expectedRevision 0. The event
// that caused the update travels with it (engine.WithEvent): a store that
// keeps the task log records it as the revision's entry, in the same
// transaction (K7).
func (a *adapter) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if req == nil {
		return taskstore.TaskVersionMissing, wireError(ctx, "update", engine.ErrInvalidArgument)
	}
	if err := checkServable(req.Task); err != nil {
		return taskstore.TaskVersionMissing, wireError(ctx, "update", err)
	}
	if req.Event != nil {
		ctx = engine.WithEvent(ctx, req.Event)
	}
	rec, err := a.store.Replace(engine.WithoutTask(ctx), req.Task, int64(req.PrevVersion))
	if err != nil {
		return taskstore.TaskVersionMissing, wireError(ctx, "update", err)
	}
	return taskstore.TaskVersion(rec.Revision), nil
}

// Get returns the whole task and its revision as version.
func (a *adapter) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	rec, err := a.store.Get(ctx, id)
	if err != nil {
		return nil, wireError(ctx, "get", err)
	}
	return &taskstore.StoredTask{Task: rec.Task, Version: taskstore.TaskVersion(rec.Revision)}, nil
}

// List runs one ListTasks page on the engine. The engine validates the
// request (L3, T4); the adapter only copies the public fields across, always
// asks for the total and drops the engine's internal fields on the way back
// (W1, W4: TaskOwners, TaskCursors and Stats never reach the wire). Tenant
// is not a filter, and no owner comes from the request: a multi-user
// server scopes lists by the authenticated caller with an authorization
// policy (authz.OwnerPolicy) instead.
func (a *adapter) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	if req == nil {
		return nil, wireError(ctx, "list", engine.ErrInvalidArgument)
	}
	ereq := ListRequest(req)
	if err := applyRESTListParams(ctx, ereq); err != nil {
		return nil, wireError(ctx, "list", err)
	}
	resp, err := a.store.List(ctx, ereq)
	if err != nil {
		return nil, wireError(ctx, "list", err)
	}
	fitPage(resp, a.opts.MaxPageBytes)
	tasks := resp.Tasks
	if tasks == nil {
		tasks = []*a2a.Task{}
	}
	return &a2a.ListTasksResponse{
		Tasks:         tasks,
		TotalSize:     resp.TotalSize,
		PageSize:      resp.PageSize,
		NextPageToken: resp.NextPageToken,
	}, nil
}

// ListRequest is the engine request the adapter sends for an A2A ListTasks
// request: the public fields copied unchanged (the page token byte for
// byte) and IncludeTotalSize set, since A2A responses carry totalSize.
func ListRequest(req *a2a.ListTasksRequest) *engine.ListRequest {
	return &engine.ListRequest{
		ContextID:            req.ContextID,
		Status:               req.Status,
		StatusTimestampAfter: req.StatusTimestampAfter,
		PageSize:             req.PageSize,
		PageToken:            req.PageToken,
		HistoryLength:        req.HistoryLength,
		IncludeArtifacts:     req.IncludeArtifacts,
		IncludeTotalSize:     true,
	}
}

// Messages remote callers see. They are fixed strings: nothing from the
// backend (driver text, IDs, tokens) reaches the wire.
const (
	msgInvalidPageToken = "invalid page token"
	msgInvalidParams    = "invalid params"
	msgLimitExceeded    = "task exceeds the store's size or nesting limit"
	msgTooManyFields    = "request has too many fields"
	msgTaskNotFound     = "task not found"
	msgNotCancelable    = "task cannot be canceled"
	msgInternal         = "internal error"
)

// wireError maps an engine error onto the a2a-go sentinel its transports
// translate into wire codes (W1, W3). The engine error is not wrapped, so
// its text never reaches a remote caller; internal failures are logged
// server-side instead.
func wireError(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(err, authz.ErrUnauthenticated):
		// The policy needs the caller's identity: the error
		// HeaderIdentity gives an anonymous call with Required.
		return errNoIdentity
	case errors.Is(err, engine.ErrInvalidPageToken):
		// T4: one message for every bad token, whatever it was.
		return a2a.NewError(a2a.ErrInvalidParams, msgInvalidPageToken)
	case errors.Is(err, engine.ErrLimitExceeded):
		return a2a.NewError(a2a.ErrInvalidParams, msgLimitExceeded)
	case errors.Is(err, engine.ErrInvalidArgument):
		return a2a.NewError(a2a.ErrInvalidParams, msgInvalidParams)
	case errors.Is(err, engine.ErrNotFound):
		return a2a.NewError(a2a.ErrTaskNotFound, msgTaskNotFound)
	case errors.Is(err, engine.ErrNotCancelable):
		return a2a.NewError(a2a.ErrTaskNotCancelable, msgNotCancelable)
	case errors.Is(err, engine.ErrRevisionConflict):
		return taskstore.ErrConcurrentModification
	case errors.Is(err, engine.ErrAlreadyExists):
		return taskstore.ErrTaskAlreadyExists
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	}
	log.Error(ctx, "a2aserver: store "+op+" failed", err)
	return a2a.NewError(a2a.ErrInternalError, msgInternal)
}
