package storetest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// travCheck checks the L7 guarantees over one traversal fed page by page.
type travCheck struct {
	last      *engine.Cursor
	seen      map[a2a.TaskID]int
	start     map[a2a.TaskID]bool // matching when the traversal started
	touched   map[a2a.TaskID]bool // mutated or deleted since
	recreated map[a2a.TaskID]bool // deleted and created again since
}

func newTravCheck(start map[a2a.TaskID]bool) *travCheck {
	return &travCheck{seen: map[a2a.TaskID]int{}, start: start, touched: map[a2a.TaskID]bool{}, recreated: map[a2a.TaskID]bool{}}
}

// page checks one page of the traversal.
func (c *travCheck) page(resp *engine.ListResponse) error {
	if msg := checkResponse(resp); msg != "" {
		return errors.New(msg)
	}
	for i, tk := range resp.Tasks {
		cur := resp.TaskCursors[i]
		if c.last != nil && c.last.Compare(cur) >= 0 {
			return fmt.Errorf("cursor %s after %s: not strictly descending (L7)", fmtCursor(cur), fmtCursor(*c.last))
		}
		c.last = &cur
		c.seen[tk.ID]++
		if c.seen[tk.ID] > 1 && !c.recreated[tk.ID] {
			return fmt.Errorf("task %q seen twice in one traversal (L7)", string(tk.ID))
		}
	}
	return nil
}

// finish checks that every task present at the start and untouched since
// was seen exactly once.
func (c *travCheck) finish() error {
	var missing []string
	for id := range c.start {
		if !c.touched[id] && c.seen[id] != 1 {
			missing = append(missing, fmt.Sprintf("%q (seen %d times)", string(id), c.seen[id]))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("untouched tasks not seen exactly once (L7): %v", missing)
	}
	return nil
}
