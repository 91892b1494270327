package taskiter

import (
	"context"
	"errors"
	"iter"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// Lister is anything that answers one ListTasks page: *a2aclient.Client,
// a2asrv.RequestHandler (and, through ListerFunc, taskstore.Store.List).
type Lister interface {
	ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error)
}

// ListerFunc adapts a function to Lister.
type ListerFunc func(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error)

// ListTasks calls f.
func (f ListerFunc) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	return f(ctx, req)
}

// ErrStalledToken reports a server that returned the page token it was
// given: following it would loop forever.
var ErrStalledToken = errors.New("taskiter: server returned the same page token again")

// Pages yields every page of the traversal that req starts, in order. The
// request is copied; its filters, page size, history length and artifact
// flag are sent unchanged on every page, and its PageToken (normally empty)
// is where the walk starts. Iteration stops after the first error, which is
// yielded with a nil page.
func Pages(ctx context.Context, l Lister, req *a2a.ListTasksRequest) iter.Seq2[*a2a.ListTasksResponse, error] {
	var r a2a.ListTasksRequest
	if req != nil {
		r = *req
	}
	return Walk(r.PageToken, func(token string) (*a2a.ListTasksResponse, string, error) {
		r.PageToken = token
		resp, err := l.ListTasks(ctx, &r)
		if err != nil {
			return nil, "", err
		}
		return resp, resp.NextPageToken, nil
	})
}

// Walk is the traversal loop itself, for any kind of page: it lists the
// page after token (list returns the page and its next-page token; ""
// starts the traversal), yields it, and follows the next token until it is
// empty. An error, or a lister that hands back the token it was given
// (ErrStalledToken), ends the walk: it is yielded with a zero page.
// Pages and StorePages are Walk over a Lister and an engine.Store; use it
// directly for other page types (a load generator's own targets).
func Walk[P any](token string, list func(token string) (page P, next string, err error)) iter.Seq2[P, error] {
	return func(yield func(P, error) bool) {
		var zero P
		for {
			page, next, err := list(token)
			if err != nil {
				yield(zero, err)
				return
			}
			if !yield(page, nil) || next == "" {
				return
			}
			if next == token {
				yield(zero, ErrStalledToken)
				return
			}
			token = next
		}
	}
}

// All yields every task of the traversal that req starts, page after page
// (see Pages). Iteration stops after the first error, yielded with a nil
// task.
func All(ctx context.Context, l Lister, req *a2a.ListTasksRequest) iter.Seq2[*a2a.Task, error] {
	return flatten(Pages(ctx, l, req), func(p *a2a.ListTasksResponse) []*a2a.Task { return p.Tasks })
}

// flatten yields the tasks of every page, stopping after the first error.
func flatten[P any](pages iter.Seq2[P, error], tasks func(P) []*a2a.Task) iter.Seq2[*a2a.Task, error] {
	return func(yield func(*a2a.Task, error) bool) {
		for page, err := range pages {
			if err != nil {
				yield(nil, err)
				return
			}
			for _, t := range tasks(page) {
				if !yield(t, nil) {
					return
				}
			}
		}
	}
}

// StorePages is Pages over an engine.Store, in process. req is copied.
func StorePages(ctx context.Context, s engine.Store, req engine.ListRequest) iter.Seq2[*engine.ListResponse, error] {
	return Walk(req.PageToken, func(token string) (*engine.ListResponse, string, error) {
		req.PageToken = token
		resp, err := s.List(ctx, &req)
		if err != nil {
			return nil, "", err
		}
		return resp, resp.NextPageToken, nil
	})
}

// FromStore is All over an engine.Store, in process. req is copied.
func FromStore(ctx context.Context, s engine.Store, req engine.ListRequest) iter.Seq2[*a2a.Task, error] {
	return flatten(StorePages(ctx, s, req), func(p *engine.ListResponse) []*a2a.Task { return p.Tasks })
}
