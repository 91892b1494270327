package pgstore

import (
	"context"

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

// PinnedPlan returns the statement a page of req runs before its page
// query, in its transaction ("" for none: the page runs alone).
func (s *Store) PinnedPlan(req *engine.ListRequest) (string, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return "", err
	}
	if s.buildList(&q).pinned {
		return pinPlanSQL, nil
	}
	return "", nil
}

// MigrationStatements returns, for schema public, the statements the
// managed schema runs to install the owner column, the owner indexes and
// the counters: OwnerCountsMigrationFile must hold the first two verbatim,
// CountLedgerMigrationFile the counters'.
func MigrationStatements() (owner, indexes, counts []string) {
	for _, stmt := range ownerIndexesSQL {
		indexes = append(indexes, render(stmt, "public"))
	}
	return ownerColumnInstallSQL("public"), indexes, countsInstallSQL("public")
}

// ScanCountSQL returns the count List ran before the counters existed for
// req's filters: count(*) over the matching rows (the benchmarks' peer).
func (s *Store) ScanCountSQL(req *engine.ListRequest) (string, []any, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return "", nil, err
	}
	var args sqlArgs
	where, _ := listFilters(&q, &args)
	return "SELECT count(*) FROM " + s.sql.table + whereClause(where), args, nil
}

// CountFunctionsSQL returns the CREATE OR REPLACE FUNCTION statements of
// the count functions (the triggers', the fold and the rebuild) for
// schema public with the given number of shards per (kind, name, state)
// (the store installs countShards): the benchmarks compare one row with
// sharded rows, and an upgrade test makes the previous release's
// counters (16 shards).
func CountFunctionsSQL(shards int) []string {
	var stmts []string
	for _, f := range countFunctions {
		stmts = append(stmts, createFunctionSQL("public", f.name, "trigger", renderShards(f.body, shards)))
	}
	for _, f := range countProcs {
		stmts = append(stmts, createFunctionSQL("public", f.name, f.returns, renderShards(f.body, shards)))
	}
	return stmts
}

// LedgerRows returns how many rows the count ledgers hold, in a
// snapshot of their own.
func (s *Store) LedgerRows(ctx context.Context) (n int64, err error) {
	err = s.pool.QueryRow(ctx, s.sql.ledgerRows).Scan(&n)
	return n, err
}
