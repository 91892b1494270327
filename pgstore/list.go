package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/listpage"
	"github.com/jackc/pgx/v5"
)

// Status-timestamp filters are clamped into [minStatusTime,
// maxStatusTime], which timestamptz holds. Stored status timestamps lie in
// [minStatusTime, maxStatusTime), so the clamp changes no result.

// listQuery is one List call's SQL.
type listQuery struct {
	count     string // "" when the total is not asked for
	countArgs []any
	page      string
	pageArgs  []any
}

// buildList writes the SQL for q. Filters come first, then the boundary as
// one row comparison in the ordering indexes' collation, so the planner
// seeks the index to the boundary (C3).
func (s *Store) buildList(q *engine.Query) listQuery {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	order := `updated_at DESC, id COLLATE "C" DESC`
	if q.ContextID != "" {
		// The context filter is written as a closed range, not "=", and the
		// order leads with context_id: with "=" the planner treats
		// context_id as a constant and may serve the order from the global
		// index with a filter (its correlation statistics favour it when
		// rows were inserted in time order), reading many rows per page in a
		// hot context. A range is no constant, so only the context index
		// gives this order without a sort (C3). For a deterministic
		// collation (every collation but explicitly nondeterministic ICU
		// ones) x >= c AND x <= c holds exactly when x = c.
		p := arg(q.ContextID)
		where = append(where, "context_id >= "+p+" AND context_id <= "+p)
		order = "context_id, " + order
	}
	if q.Status != a2a.TaskStateUnspecified {
		where = append(where, "state = "+arg(string(q.Status)))
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
		where = append(where, "(status_ts, status_ns) >= ("+arg(us)+", "+arg(ns)+")")
	}

	var lq listQuery
	if q.IncludeTotalSize {
		lq.count = "SELECT count(*) FROM " + s.sql.table
		if len(where) > 0 {
			lq.count += " WHERE " + strings.Join(where, " AND ")
		}
		lq.countArgs = append([]any(nil), args...)
	}

	if q.After != nil {
		where = append(where, `(updated_at, id COLLATE "C") < (`+
			arg(time.UnixMicro(q.After.UpdatedAt))+`::timestamptz, `+arg(string(q.After.ID))+`::text)`)
	}
	var cols string
	switch {
	case q.Projection == engine.ProjectionLight:
		cols = lightColumns
	default:
		history := "history"
		switch {
		case q.HistoryLength == 0:
			history = "NULL::bytea[]"
		case q.HistoryLength > 0:
			// The last n elements; a lower bound below 1 slices from the start.
			history = "history[cardinality(history) - " + arg(int64(q.HistoryLength)) + "::bigint + 1:]"
		}
		artifacts := "NULL::bytea"
		if q.IncludeArtifacts {
			artifacts = "artifacts"
		}
		cols = "id, context_id, updated_at, revision, state, status_ts, status_ns, status_msg, metadata, " + artifacts + ", " + history
	}
	var b strings.Builder
	b.WriteString("SELECT " + cols + " FROM " + s.sql.table)
	if len(where) > 0 {
		b.WriteString(" WHERE " + strings.Join(where, " AND "))
	}
	b.WriteString(" ORDER BY " + order + " LIMIT " + arg(int64(q.PageSize+1)))
	lq.page, lq.pageArgs = b.String(), args
	return lq
}

// queryer is what a List runs on: the pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// List implements engine.Store. Reads are never retried: a failed List
// is the caller's to repeat.
func (s *Store) List(ctx context.Context, req *engine.ListRequest) (*engine.ListResponse, error) {
	q, err := engine.ParseListRequest(req)
	if err != nil {
		return nil, err
	}
	if !storable(q.ContextID) {
		return nil, fmt.Errorf("pgstore: list: context ID with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
	}
	// Every int64 µs time (0..MaxInt64, about year 294247) fits timestamptz
	// (up to year 294276), so only the boundary ID can be unrepresentable.
	if q.After != nil && !storable(string(q.After.ID)) {
		return nil, engine.ErrInvalidPageToken
	}
	lq := s.buildList(&q)

	var resp *engine.ListResponse
	if lq.count == "" {
		resp, err = s.page(ctx, s.pool, &q, &lq)
	} else {
		// L8: count and page from one snapshot.
		var tx pgx.Tx
		tx, err = s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err == nil {
			resp, err = s.countAndPage(ctx, tx, &q, &lq)
			if err == nil {
				err = tx.Commit(ctx)
			} else {
				_ = tx.Rollback(context.WithoutCancel(ctx))
			}
		}
	}
	if err != nil {
		var de *decodeError
		if errors.As(err, &de) {
			return nil, de.err
		}
		return nil, translate(ctx, "list", err)
	}
	return resp, nil
}

func (s *Store) countAndPage(ctx context.Context, tx pgx.Tx, q *engine.Query, lq *listQuery) (*engine.ListResponse, error) {
	var total int64
	if err := tx.QueryRow(ctx, lq.count, lq.countArgs...).Scan(&total); err != nil {
		return nil, err
	}
	resp, err := s.page(ctx, tx, q, lq)
	if err != nil {
		return nil, err
	}
	resp.TotalSize = int(total)
	resp.Stats.Counted, resp.Stats.TotalComputed = int(total), true
	return resp, nil
}

// decodeError carries an already-translated error out of the page reader.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }

func (s *Store) page(ctx context.Context, db queryer, q *engine.Query, lq *listQuery) (*engine.ListResponse, error) {
	rows, err := db.Query(ctx, lq.page, lq.pageArgs...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	tasks := make([]*a2a.Task, 0, q.PageSize)
	cursors := make([]engine.Cursor, 0, q.PageSize)
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
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	resp := listpage.Response(q, tasks, cursors, more)
	resp.Stats.Examined = read
	return resp, nil
}
