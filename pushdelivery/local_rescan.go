package pushdelivery

import (
	"context"
	"fmt"

	"github.com/a2astore/a2astore/engine"
)

// rescanPage is the page size of a rescan's walk of the store's list.
const rescanPage = 100

// written marks dirty the tasks with records that were written since
// the previous rescan (SPEC C6), and has the refresh read their
// deletion marks (a task created again under its ID is written: its
// records of the deleted incarnation go, N1). It walks the store's list
// order (newest storage update time first, one page at a time) down to
// the time the previous walk started, less the Rescan period as a
// margin for writes that commit after stamping their time and for the
// skew between the store's clock and Clock, and no further. Its store
// reads are the tasks written in that window (and their marks) plus one
// page: not one per task with records, and nothing at all for tasks
// idle since. The first walk only takes its start (every task with
// records is dirty then: loaded, or saved). A failed walk leaves the
// watermark where it was, so the next one covers its window. The
// store's clock and Clock must agree to well within Rescan.
func (l *Local) written(ctx context.Context) error {
	start := l.opts.Clock().UnixMicro()
	l.mu.Lock()
	floor, based := l.mu.watermark-l.opts.Rescan.Microseconds(), l.mu.based
	l.mu.Unlock()
	var ids []engine.Cursor
	req := engine.ListRequest{PageSize: rescanPage, Projection: engine.ProjectionLight, HistoryLength: new(int)}
	for based {
		resp, err := l.store.List(ctx, &req)
		if err != nil {
			return err
		}
		if len(resp.TaskCursors) != len(resp.Tasks) {
			return fmt.Errorf("pushdelivery: rescan: the store's list page has %d cursors for %d tasks (engine.ListResponse.TaskCursors)", len(resp.TaskCursors), len(resp.Tasks))
		}
		end := resp.NextPageToken == ""
		for _, c := range resp.TaskCursors {
			if c.UpdatedAt < floor {
				end = true
				break
			}
			ids = append(ids, c)
		}
		if end {
			break
		}
		req.PageToken = resp.NextPageToken
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.watermark, l.mu.based = max(l.mu.watermark, start), true
	for _, c := range ids {
		if _, ok := l.mu.tasks[c.ID]; ok {
			l.mu.dirty[c.ID] = struct{}{}
			l.mu.marks[c.ID] = struct{}{}
		}
	}
	return nil
}
