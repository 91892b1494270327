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

// MigrationStatements returns, for schema public, the statements the
// managed schema runs to install the owner column, the owner indexes and
// the counters: OwnerCountsMigrationFile must hold each of them verbatim.
func MigrationStatements() (owner, indexes, counts []string) {
	for _, stmt := range ownerIndexesSQL {
		indexes = append(indexes, render(stmt, "public"))
	}
	return ownerColumnInstallSQL("public"), indexes, countsInstallSQL("public")
}
