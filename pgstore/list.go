package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/listpage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Status-timestamp filters are clamped into [minStatusTime,
// maxStatusTime], which timestamptz holds. Stored status timestamps lie in
// [minStatusTime, maxStatusTime), so the clamp changes no result.

// listQuery is one List call's SQL.
type listQuery struct {
	count     string // "" when the total is not asked for
	countArgs []any
	counter   bool // count reads the counter table (else it counts rows)
	// pending is how many ledger rows the count scanned (set by the
	// read; 0 when it counted rows).
	pending  int64
	page     string
	pageArgs []any
	// pinned: the page runs after pinPlanSQL, in a transaction (C7).
	pinned bool
}

// pinPlanSQL leaves the planner, for the rest of the transaction, no plan
// for a page but an ordered index scan (C3, C7). A filtered page's ORDER
// BY matches exactly one index (listFilters), but what the planner thinks
// that plan costs depends on its statistics: on a table never analyzed,
// one bulk-deleted since, or one whose rare state became common since, it
// estimates a handful of matching rows and fetches them all with a bitmap
// or sequential scan, then sorts — every row of the state, at 1e7 tasks
// tens of thousands. Disabled, those plans cost more than any other, so
// the index scan that stops after PageSize+1 entries is the plan, whatever
// the statistics (TestStatusPlans).
const pinPlanSQL = `SELECT set_config('enable_sort', 'off', true), set_config('enable_incremental_sort', 'off', true),
  set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)`

// buildList writes the SQL for q. Filters come first, then the boundary as
// one row comparison in the ordering indexes' collation, so the planner
// seeks the index to the boundary (C3).
func (s *Store) buildList(q *engine.Query) listQuery {
	var args sqlArgs
	where, order := listFilters(q, &args)
	var lq listQuery
	if q.IncludeTotalSize {
		lq.count, lq.countArgs, lq.counter = s.countQuery(q)
		if !lq.counter {
			// Rows whose time no cursor can represent are never listed,
			// nor counted by a scan (timerange.go); the counters count
			// every row (the CHECK constraint keeps such rows out).
			lq.count = "SELECT count(*), 0 FROM " + s.sql.table + whereClause(append(slices.Clip(where), inTimeRangeSQL))
			lq.countArgs = slices.Clone(args)
		}
	}
	if q.After == nil {
		where = append(where, inTimeRangeSQL)
	} else {
		// The boundary's time is at most the maximum, so only the lower
		// bound of the range is left to state.
		where = append(where, "updated_at >= "+minUpdatedAtSQL, `(updated_at, id COLLATE "C") < (`+
			args.add(time.UnixMicro(q.After.UpdatedAt))+`::timestamptz, `+args.add(string(q.After.ID))+`::text)`)
	}
	lq.pinned = q.Owner != "" || q.ContextID != "" || q.Status != a2a.TaskStateUnspecified || q.StatusAfter != nil
	cols := pageColumns(q, &args)
	lq.page = "SELECT " + cols + " FROM " + s.sql.table + whereClause(where) +
		" ORDER BY " + order + " LIMIT " + args.add(int64(q.PageSize+1))
	lq.pageArgs = args
	return lq
}

// sqlArgs collects a query's arguments.
type sqlArgs []any

// add appends v and returns its placeholder ($n).
func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// whereClause is " WHERE c1 AND c2 …", or "" without conditions.
func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// listFilters returns q's filter conditions (L2, O3, C7) and the ORDER BY
// that serves them from an ordering index: the owner index for an owner,
// the owner+context index for both, the context index for a context, the
// state index for a state and the owner+state index for an owner and a
// state. A state with a context is a filter on the context's index (C7:
// at most the context's entries).
//
// Each equality that leads the index is written as a closed range, not
// "=", and leads the ORDER BY too: with "=" the planner treats the column
// as a constant and may serve the order from the global index with a
// filter (its correlation statistics favour it when rows were inserted in
// time order), reading many rows per page of a rare value. A range is no
// constant, so only the index that leads with these columns gives this
// order without a sort (C3, C7). For a deterministic collation (every
// collation but explicitly nondeterministic ICU ones) x >= c AND x <= c
// holds exactly when x = c.
//
// With two leading columns the first is written "=": PostgreSQL's B-tree
// ends a scan at a failed bound of a column only when every column before
// it is bound by "=", so with two ranges a page of (owner, state) that
// holds fewer than PageSize+1 entries read on through every later state of
// the owner (TestFilteredPageEndsWithItsRange). The second column, a
// range, still leaves only this index to give the order without a sort:
// the first one's constant drops out of the order, the second does not.
func listFilters(q *engine.Query, args *sqlArgs) (where []string, order string) {
	order = `updated_at DESC, id COLLATE "C" DESC`
	var lead, leadP []string // equality columns leading the order, in index order, and their placeholders
	equal := func(col, v string) {
		lead, leadP = append(lead, col), append(leadP, args.add(v))
	}
	if q.Owner != "" {
		equal("owner", q.Owner)
	}
	if q.ContextID != "" {
		equal("context_id", q.ContextID)
	}
	if q.Status != a2a.TaskStateUnspecified {
		if q.ContextID == "" {
			equal("state", string(q.Status))
		} else {
			where = append(where, "state = "+args.add(string(q.Status)))
		}
	}
	for i, col := range lead {
		if i == 0 && len(lead) > 1 {
			where = append(where, col+" = "+leadP[i])
		} else {
			where = append(where, col+" >= "+leadP[i]+" AND "+col+" <= "+leadP[i])
		}
	}
	if len(lead) > 0 {
		order = strings.Join(lead, ", ") + ", " + order
	}
	if q.StatusAfter != nil {
		after := *q.StatusAfter
		switch {
		case after.Before(minStatusTime):
			after = minStatusTime
		case after.After(maxStatusTime):
			after = maxStatusTime
		}
		us, ns := splitTime(after)
		where = append(where, "(status_ts, status_ns) >= ("+args.add(us)+", "+args.add(ns)+")")
	}
	return where, order
}

// pageColumns is what a page selects: the light columns, or the full ones
// with history trimmed in SQL (L4) and artifacts only when asked for.
func pageColumns(q *engine.Query, args *sqlArgs) string {
	if q.Projection == engine.ProjectionLight {
		return lightColumns
	}
	history := "history"
	switch {
	case q.HistoryLength == 0:
		history = "NULL::bytea[]"
	case q.HistoryLength > 0:
		// The last n elements; a lower bound below 1 slices from the start.
		// Array subscripts are int4, so n is clamped to MaxInt32: no array
		// holds that many elements, so the clamp changes no result, and the
		// bound (at least 1-MaxInt32) stays within int4 for every n up to
		// math.MaxInt.
		n := min(q.HistoryLength, math.MaxInt32)
		history = "history[cardinality(history) - " + args.add(int64(n)) + "::bigint + 1:]"
	}
	artifacts := "NULL::bytea"
	if q.IncludeArtifacts {
		artifacts = "artifacts"
	}
	return "id, context_id, updated_at, revision, state, status_ts, status_ns, status_msg, metadata, " + artifacts + ", " + history + ", owner"
}

// queryer is what a List runs on: the pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// List implements engine.Store. It runs once more on a live connection
// when its connection was found gone (reconnect.go); any other failed
// List is the caller's to repeat.
func (s *Store) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	if !storable(q.ContextID) {
		return nil, fmt.Errorf("pgstore: list: context ID with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
	}
	if !storable(q.Owner) {
		return nil, fmt.Errorf("pgstore: list: owner with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
	}
	// Every int64 µs time (0..MaxInt64, about year 294247) fits timestamptz
	// (up to year 294276), so only the boundary ID can be unrepresentable.
	if q.After != nil && !storable(string(q.After.ID)) {
		return nil, engine.ErrInvalidPageToken
	}
	lq := s.buildList(&q)

	var resp *engine.ListResponse
	err = s.routedRead(ctx, func(conn *pgxpool.Conn, g gate) (err error) {
		resp, err = listOn(ctx, conn, g, &q, &lq)
		return err
	})
	if err != nil {
		var de *decodeError
		if errors.As(err, &de) {
			return nil, de.err
		}
		return nil, translate(ctx, "list", err)
	}
	s.rollup.read(lq.pending)
	return resp, nil
}

// listOn reads a page, after g, on conn. With a total, count and page
// run in one REPEATABLE READ, READ ONLY transaction (L8), sent as one
// pipelined batch — BEGIN, page, count, COMMIT — so it costs one round
// trip, like a page without a total. A pinned page (lq.pinned) runs in
// such a transaction too, after pinPlanSQL: one round trip still. A
// count from the counters follows the page, after noSeqScanSQL, so the
// List locks a2a_tasks before the counter tables, as TRUNCATE and its
// trigger do (a2a_tasks, then the counters): the other order deadlocks
// when a TRUNCATE takes a2a_tasks between the count and the page
// (TestTruncateBesideTotal). A count by scan (a status time) reads
// a2a_tasks alone and runs first, before the page's pin changes its
// plan.
func listOn(ctx context.Context, conn *pgxpool.Conn, g gate, q *engine.Query, lq *listQuery) (resp *engine.ListResponse, err error) {
	tx := lq.count != "" || lq.pinned
	if !tx && !g.batched() {
		rows, err := conn.Query(ctx, lq.page, lq.pageArgs...)
		if err != nil {
			return nil, err
		}
		return readPage(rows, q)
	}
	var b pgx.Batch
	g.queue(&b, tx)
	if lq.count != "" && !lq.counter {
		b.Queue(lq.count, lq.countArgs...)
	}
	if lq.pinned {
		b.Queue(pinPlanSQL)
	}
	b.Queue(lq.page, lq.pageArgs...)
	if lq.counter {
		b.Queue(noSeqScanSQL)
		b.Queue(lq.count, lq.countArgs...)
	}
	if g.inTx(tx) {
		b.Queue("COMMIT")
	}
	err = runBatch(ctx, conn, &b, func(br pgx.BatchResults) error {
		if err := g.results(br, tx); err != nil {
			return err
		}
		if !tx {
			rows, err := br.Query()
			if err == nil {
				resp, err = readPage(rows, q)
			}
			return err
		}
		resp, err = readCountAndPage(br, q, lq)
		return err
	})
	return resp, err
}

// readCountAndPage reads, in listOn's order, the count (when asked
// for), the pin (when pinned), the page and the COMMIT of a list batch
// (its BEGIN is read by gate.results).
func readCountAndPage(br pgx.BatchResults, q *engine.Query, lq *listQuery) (*engine.ListResponse, error) {
	var total int64
	readCount := func() error { return br.QueryRow().Scan(&total, &lq.pending) }
	if lq.count != "" && !lq.counter {
		if err := readCount(); err != nil {
			return nil, err
		}
	}
	if lq.pinned {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	resp, err := readPage(rows, q)
	if err != nil {
		return nil, err
	}
	if lq.counter {
		if _, err := br.Exec(); err != nil { // noSeqScanSQL
			return nil, err
		}
		if err := readCount(); err != nil {
			return nil, err
		}
	}
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	if lq.count == "" {
		return resp, nil
	}
	resp.TotalSize = int(total)
	resp.Stats.TotalComputed = true
	if !lq.counter {
		resp.Stats.Counted = int(total)
	}
	return resp, nil
}

// decodeError carries an already-translated error out of the page reader.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }

// readPage reads the rows of a page query into a response.
func readPage(rows pgx.Rows, q *engine.Query) (*engine.ListResponse, error) {
	defer rows.Close()
	tasks := make([]*a2a.Task, 0, q.PageSize)
	cursors := make([]engine.Cursor, 0, q.PageSize)
	owners := make([]string, 0, q.PageSize)
	more, read := false, 0
	for rows.Next() {
		read++
		if len(tasks) == q.PageSize {
			// The look-ahead row: it only says another task follows.
			more = true
			break
		}
		x, err := scanRow(rows)
		if err != nil {
			return nil, err
		}
		t, err := x.task()
		if err != nil {
			return nil, &decodeError{err}
		}
		if q.Projection == engine.ProjectionFull {
			listpage.Shape(q, t)
		}
		tasks = append(tasks, t)
		cursors = append(cursors, x.cursor())
		owners = append(owners, x.owner)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	resp := listpage.Response(q, tasks, cursors, more)
	resp.TaskOwners = owners
	resp.Stats.Examined = read
	return resp, nil
}
