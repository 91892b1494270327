package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/a2astore/a2astore/engine"
)

var _ engine.Retainer = (*Store)(nil)

// RemoveExpired removes the expired tasks of one batch (engine.Retainer,
// R1, R2). It reads the ordering index (updated_at DESC, id DESC)
// backward from its oldest entry (or from req.After): one query with
// LIMIT Limit+1 whose rows carry the ID, time and state only; then one
// DELETE of the due IDs that checks again, on each row as it is then,
// that it is still due (a row mutated meanwhile has a new time and stays).
// The DELETE is a plain DELETE on the tasks table, like Delete: the
// table's triggers keep the counters exact in the same transaction. Rows
// are treated alike whoever wrote them (another process sharing the
// table); rows whose time no cursor can represent are never examined
// (timerange.go: startup refuses them anyway). Several servers may call it
// at once: the DELETE is idempotent, and engine/retention runs one sweep
// at a time across servers with TryRetentionLock.
func (s *Store) RemoveExpired(ctx context.Context, req engine.RetainRequest) (engine.RetainResult, error) {
	if err := req.Validate(); err != nil {
		return engine.RetainResult{}, err
	}
	if req.After != nil {
		if err := validateID(req.After.ID); err != nil {
			return engine.RetainResult{}, err
		}
	}
	q, args := s.retainQuery(&req)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return engine.RetainResult{}, translate(ctx, "remove expired", err)
	}
	scan := engine.NewRetainScan(&req)
	var due []string
	for rows.Next() {
		var id, state string
		var at pgtype.Timestamptz
		if err := rows.Scan(&id, &at, &state); err != nil {
			rows.Close()
			return engine.RetainResult{}, translate(ctx, "remove expired", err)
		}
		d, more := scan.Visit(engine.Cursor{UpdatedAt: cursorTime(at), ID: a2a.TaskID(id)}, a2a.TaskState(state))
		if d {
			due = append(due, id)
		}
		if !more {
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return engine.RetainResult{}, translate(ctx, "remove expired", err)
	}
	if len(due) > 0 {
		var n int64
		del := `DELETE FROM ` + s.sql.table + ` WHERE id = ANY($1::text[]) AND (
  (state IN ` + terminalStatesSQL + ` AND updated_at < $2::timestamptz) OR
  ($3::timestamptz IS NOT NULL AND state NOT IN ` + terminalStatesSQL + ` AND updated_at < $3::timestamptz))`
		args := []any{due, time.UnixMicro(req.TerminalBefore), stuckArg(req.StuckBefore)}
		err := retry(ctx, func() error {
			if s.log { // each deletion is remembered (K7)
				return s.pool.QueryRow(ctx, remembered(del, s.sql.table), args...).Scan(&n)
			}
			tag, err := s.pool.Exec(ctx, del, args...)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			return engine.RetainResult{}, translate(ctx, "remove expired", err)
		}
		for range n {
			scan.Removed()
		}
	}
	return scan.Result(), nil
}

// retainQuery is the examining query of req: the oldest in-range rows
// after req.After, Limit+1 of them, in ascending (updated_at, id) order:
// the ordering index read backward.
func (s *Store) retainQuery(req *engine.RetainRequest) (string, []any) {
	var args sqlArgs
	where := inTimeRangeSQL
	if req.After != nil {
		where += ` AND (updated_at, id COLLATE "C") > (` + args.add(time.UnixMicro(req.After.UpdatedAt)) + `::timestamptz, ` +
			args.add(string(req.After.ID)) + `::text)`
	}
	return `SELECT id, updated_at, state FROM ` + s.sql.table + ` WHERE ` + where +
		` ORDER BY updated_at, id COLLATE "C" LIMIT ` + args.add(int64(req.Limit+1)), args
}

// stuckArg is StuckBefore as the DELETE's argument: NULL when off.
func stuckArg(us int64) any {
	if us == 0 {
		return nil
	}
	return time.UnixMicro(us)
}

// retentionLockKey is the first key of the advisory lock; the second is
// hashtext of the schema, so stores of different schemas sweep
// independently.
const retentionLockKey = 0x61326172 // "a2ar"

// TryRetentionLock takes the session advisory lock that makes one server
// at a time sweep this schema's tasks (R2; engine/retention's Locker). It
// holds one pooled connection until release is called (or the process
// dies: the server then frees the lock with the session). acquired is
// false, with a nil release, when another session holds the lock.
func (s *Store) TryRetentionLock(ctx context.Context) (release func(), acquired bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, translate(ctx, "retention lock", err)
	}
	err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, hashtext($2))`, int32(retentionLockKey), s.schema).Scan(&acquired)
	if err != nil || !acquired {
		conn.Release()
		return nil, false, translate(ctx, "retention lock", err)
	}
	s.retention.Lock()
	s.retention.conn = conn
	s.retention.Unlock()
	return func() {
		s.retention.Lock()
		s.retention.conn = nil
		s.retention.Unlock()
		// A connection that cannot unlock is closed: its session ends
		// and the server releases the lock with it.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var ok bool
		if err := conn.QueryRow(uctx, `SELECT pg_advisory_unlock($1, hashtext($2))`, int32(retentionLockKey), s.schema).Scan(&ok); err != nil || !ok {
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
	}, true, nil
}

// RetentionLockHeld reports, with nil, that the session of this store's
// retention lock still holds it (engine/retention's LockWatcher, which
// asks before each batch of a sweep). The lock ends with its session: a
// connection terminated, cut by a proxy or lost in a failover frees it
// without a word, and another server's sweep may then begin beside this
// one's (R2).
func (s *Store) RetentionLockHeld(ctx context.Context) error {
	s.retention.Lock()
	defer s.retention.Unlock()
	if s.retention.conn == nil {
		return fmt.Errorf("pgstore: retention lock: not held: %w", engine.ErrInternal)
	}
	var held bool
	err := s.retention.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
		AND classid = $1::oid AND objid = hashtext($2)::oid AND objsubid = 2 AND granted)`, int32(retentionLockKey), s.schema).Scan(&held)
	if err != nil {
		return translate(ctx, "retention lock", err)
	}
	if !held {
		return fmt.Errorf("pgstore: retention lock: lost: %w", engine.ErrInternal)
	}
	return nil
}
