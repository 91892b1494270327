package pgstore

import (
	"github.com/a2astore/a2astore/engine"
)

// ListSQL returns the page query and arguments List runs for req, and the
// count query (empty unless req.IncludeTotalSize).
func (s *Store) ListSQL(req *engine.ListRequest) (page string, args []any, count string, countArgs []any, err error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return "", nil, "", nil, err
	}
	lq := s.buildList(&q)
	return lq.page, lq.pageArgs, lq.count, lq.countArgs, nil
}
