package listpage_test

import (
	"fmt"
	"log"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/listpage"
)

// entry is one task of a toy store and where it sits in list order.
type entry struct {
	task   *a2a.Task
	cursor engine.Cursor
}

// list is a custom backend's List over entries kept in list order (S6):
// validate the request, start after the boundary, keep the tasks that pass
// the filters, read one entry past the page to learn whether another
// follows, trim each returned copy and assemble the page and its token.
func list(entries []entry, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err // bad input: ErrInvalidArgument, before any read
	}
	var tasks []*a2a.Task
	var cursors []engine.Cursor
	for _, e := range entries {
		if q.After != nil && e.cursor.Compare(*q.After) <= 0 {
			continue // at or before the boundary (a real store seeks)
		}
		if !listpage.Matches(&q, "", e.task.ContextID, e.task.Status.State, e.task.Status.Timestamp) {
			continue
		}
		if len(tasks) == q.PageSize {
			return listpage.Response(&q, tasks, cursors, true), nil
		}
		t := *e.task // a copy (L9); a real store decodes a fresh one
		listpage.Shape(&q, &t)
		tasks, cursors = append(tasks, &t), append(cursors, e.cursor)
	}
	return listpage.Response(&q, tasks, cursors, false), nil
}

// A traversal over the toy store: the "blue" context, a task a page.
func Example() {
	var entries []entry
	for i := 5; i > 0; i-- { // newest first
		id := a2a.TaskID(fmt.Sprint("task-", i))
		task := &a2a.Task{ID: id, ContextID: []string{"red", "blue"}[i%2], Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
		entries = append(entries, entry{task, engine.Cursor{UpdatedAt: int64(i), ID: id}})
	}
	req := &engine.ListRequest{ContextID: "blue", PageSize: 1}
	for {
		page, err := list(entries, req)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(page.Tasks[0].ID, page.NextPageToken != "")
		if page.NextPageToken == "" {
			break
		}
		req.PageToken = page.NextPageToken
	}
	// Output:
	// task-5 true
	// task-3 true
	// task-1 false
}
