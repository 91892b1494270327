package pushdelivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGOptions configure the PostgreSQL outbox. The zero value is valid.
type PGOptions struct {
	// Schema holds a2a_push_configs, beside pgstore's a2a_tasks, which
	// Claim, Sweep and Depth read. Default "public".
	Schema string
	// Lease is how long a claim lasts before another Claim, in any
	// process, may take the record again. Default 30 s.
	Lease time.Duration
	// Rescan is how often a rescan starts: Claim and Depth reopen every
	// Done record whose task has been written to since (SPEC S7, N2),
	// beside the tasks marked by Touch, reading the Done records 1,000
	// at a time, one batch per call (10–20 ms a batch at 1e6 tasks; a
	// rescan of 1e5 records takes 100 calls). Default 1 min.
	Rescan time.Duration
	// Clock gives the time of Sweep's grace. Default time.Now.
	Clock func() time.Time
	// Logger logs a failed reopen (Claim and Depth go on without it)
	// and a record set aside. Default slog.Default().
	Logger *slog.Logger
	// Metrics counts the records set aside (a config that does not
	// decode). Default nil: none.
	Metrics *Metrics
}

// PG is the outbox on PostgreSQL: one row per push configuration in
// {schema}.a2a_push_configs, claimed by any instance over the same
// database. A claim is one statement (FOR UPDATE SKIP LOCKED, then a lease
// token and expiry on the row), so no transaction stays open while the
// holder delivers; Commit and Release are fenced by the token. Lease
// expiry compares the times the instances pass to Claim: their clocks
// must agree to well within the lease time.
//
// A record is stored idle when it has delivered its task's last revision
// (caught up; Done records are idle too), and claims read only records
// that are not idle, through a partial index (SPEC C6: a caught-up
// record costs a claim nothing). A write to the task makes its idle
// records due again (N2; to a Done record, SPEC S7): Claim and Depth
// first reopen the records of the tasks marked by Touch (the worker calls
// it when a task gets an event), and those of the tasks written since the
// last rescan, started every Rescan: at the first Claim a rescan of every
// idle record (key order, in batches), then of the tasks written since
// the previous rescan began less Rescan (pgstore's updated_at index, in
// batches: the writes, not the records stored). A write that no worker
// of this instance heard of (another instance's, foreign SQL) is thus
// delivered within Rescan plus the rescan's own time, unless it commits
// more than Rescan after its statement stamped updated_at.
type PG struct {
	pool *pgxpool.Pool
	opts PGOptions
	sql  pgSQL

	mu struct {
		sync.Mutex
		dirty    map[a2a.TaskID]struct{} // touched since the last reopen
		lastScan time.Time               // when the last rescan started
		full     bool                    // Touch dropped a task: rescan next
		scanning bool                    // a rescan is under way
		after    [2]string               // the key its next batch starts after
		gen      uint64                  // rescans started
		// recent: the rescan under way reads the tasks written since
		// afterAt (then after[0], their ID), not every idle record; every
		// rescan is recent once a full one has ended (fullDone).
		recent   bool
		afterAt  time.Time
		fullDone bool
		// sweptAt, sweptTask: the key of the last deletion mark swept
		// (Sweep: the marks up to it are done).
		sweptAt   time.Time
		sweptTask string
		// walked: the key of the last record the backstop walk of
		// Sweep read (empty: start again from the first).
		walked [2]string
	}
	batch int // Done records per batch of a rescan
}

var _ Outbox = (*PG)(nil)

// NewPG creates the table and its claim index if missing (the schema
// must hold, or get from pgstore, the a2a_tasks table) and returns the
// outbox.
func NewPG(ctx context.Context, pool *pgxpool.Pool, opts PGOptions) (*PG, error) {
	if opts.Schema == "" {
		opts.Schema = "public"
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Rescan <= 0 {
		opts.Rescan = time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	p := &PG{pool: pool, opts: opts, sql: newPGSQL(pgx.Identifier{opts.Schema}.Sanitize())}
	p.mu.dirty = map[a2a.TaskID]struct{}{}
	p.batch = 1000
	if err := p.ensureSchema(ctx); err != nil {
		return nil, fmt.Errorf("pushdelivery: pg schema: %w", err)
	}
	return p, nil
}

// ensureSchema runs the DDL in one transaction under an advisory lock:
// concurrent CREATE ... IF NOT EXISTS can fail on the catalogs otherwise.
func (p *PG) ensureSchema(ctx context.Context) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('a2astore.pushdelivery:' || $1, 0))`, p.opts.Schema); err != nil {
			return err
		}
		var hadIdle bool
		if err := tx.QueryRow(ctx, p.sql.hasIdle, p.opts.Schema).Scan(&hadIdle); err != nil {
			return err
		}
		for _, stmt := range p.sql.ddl {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		if !hadIdle { // a new table (nothing to do) or one of an earlier version
			if _, err := tx.Exec(ctx, p.sql.backfillIdle); err != nil {
				return err
			}
		}
		return nil
	})
}

func pgErr(op string, err error) error {
	return fmt.Errorf("pushdelivery: pg %s: %w", op, err)
}

// nullTime maps the zero time to NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// scanRecord reads the columns of pgSQL.cols, then extra. A record
// whose config does not decode is returned with its key and errCorrupt.
func scanRecord(row pgx.Row, extra ...any) (*Record, error) {
	var r Record
	var config []byte
	var failing *time.Time
	dest := append([]any{&r.TaskID, &r.Config.ID, &config, &r.Dest, &r.Created, &r.Delivered,
		&r.Attempts, &failing, &r.NextAt, &r.LastError, &r.Done, &r.Incarnation}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	id := r.Config.ID
	if err := json.Unmarshal(config, &r.Config); err != nil {
		r.Config = a2a.PushConfig{ID: id, TaskID: r.TaskID}
		return &r, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	r.Config.ID, r.Config.TaskID = id, r.TaskID
	if failing != nil {
		r.FailingSince = *failing
	}
	return &r, nil
}

// Save implements Outbox. The removal of the task's records of an
// earlier incarnation (SPEC N1), the count and the upsert run in one
// transaction under a lock on the task, so concurrent saves cannot pass
// MaxConfigsPerTask together. The transaction is READ COMMITTED whatever
// the session's default (SPEC N2, N4): the count must see the saves
// committed while it waited for the lock, which a snapshot taken before
// the lock (REPEATABLE READ, SERIALIZABLE) does not.
func (p *PG) Save(ctx context.Context, r *Record) error {
	config, err := json.Marshal(r.Config)
	if err != nil {
		return fmt.Errorf("pushdelivery: encode config: %w", err)
	}
	err = pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, p.sql.lockTask, p.opts.Schema, r.TaskID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, p.sql.dropStale, r.TaskID, r.Incarnation, time.UnixMicro(r.Incarnation)); err != nil {
			return err
		}
		var n int
		var exists bool
		if err := tx.QueryRow(ctx, p.sql.count, r.TaskID, r.Config.ID).Scan(&n, &exists); err != nil {
			return err
		}
		if !exists && n >= MaxConfigsPerTask {
			return ErrTooMany
		}
		_, err := tx.Exec(ctx, p.sql.upsert, r.TaskID, r.Config.ID, config, r.Dest, r.Created,
			r.Delivered, r.Attempts, nullTime(r.FailingSince), r.NextAt, r.LastError, r.Done, r.Incarnation)
		return err
	})
	if err != nil && !errors.Is(err, ErrTooMany) {
		return pgErr("save", err)
	}
	return err
}

// Get implements Outbox.
func (p *PG) Get(ctx context.Context, task a2a.TaskID, id string) (*Record, error) {
	r, err := scanRecord(p.pool.QueryRow(ctx, p.sql.get, task, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, pgErr("get", err)
	}
	return r, nil
}

// List implements Outbox (IDs compared bytewise: the column is COLLATE "C").
func (p *PG) List(ctx context.Context, task a2a.TaskID, after string, limit int) ([]*Record, error) {
	rows, err := p.pool.Query(ctx, p.sql.list, task, after, limit)
	if err != nil {
		return nil, pgErr("list", err)
	}
	defer rows.Close()
	var out []*Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, pgErr("list", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, pgErr("list", err)
	}
	return out, nil
}

// Delete implements Outbox.
func (p *PG) Delete(ctx context.Context, task a2a.TaskID, id string) error {
	if _, err := p.execRC(ctx, p.sql.delete, task, id); err != nil {
		return pgErr("delete", err)
	}
	return nil
}

// DeleteAll implements Outbox.
func (p *PG) DeleteAll(ctx context.Context, task a2a.TaskID) error {
	if _, err := p.execRC(ctx, p.sql.deleteAll, task); err != nil {
		return pgErr("delete all", err)
	}
	return nil
}

// Claim implements Outbox in one statement: the due record first by
// NextAt, its row locked with SKIP LOCKED (concurrent claimers pass over
// it) and given a fresh lease token and expiry.
func (p *PG) Claim(ctx context.Context, now time.Time, busy []string, skip ...a2a.TaskID) (Lease, error) {
	if busy == nil {
		busy = []string{} // <> ALL(NULL) is never true
	}
	skipped := make([]string, len(skip))
	for i, id := range skip {
		skipped[i] = string(id)
	}
	return p.claim(ctx, now, p.sql.claim, busy, skipped)
}

// ClaimAmong implements Drainer: Claim's statement with the filter
// "dest among dests". It walks the claim index by NextAt, so its cost is
// the due records ahead of the first of those destinations' (the
// worker asks only when some destination is set aside past the deadline).
func (p *PG) ClaimAmong(ctx context.Context, now time.Time, dests []string) (Lease, error) {
	return p.claim(ctx, now, p.sql.claimAmong, dests)
}

// claim runs a claim statement (pgClaimSQL) with its filter's arguments.
func (p *PG) claim(ctx context.Context, now time.Time, stmt string, filter ...any) (Lease, error) {
	p.reopen(ctx, now)
	until := now.Add(p.opts.Lease)
	for range maxSetAsidePerClaim {
		token := rand.Int64() | 1 // never 0
		var rev int64
		var r *Record
		var corrupt error
		args := append([]any{now, token, until}, filter...)
		err := p.readCommitted(ctx, func(tx pgx.Tx) error {
			var err error
			r, err = scanRecord(tx.QueryRow(ctx, stmt, args...), &rev)
			if errors.Is(err, errCorrupt) {
				corrupt, err = err, nil // the claim commits; the record is set aside below
			}
			return err
		})
		if err == nil && corrupt != nil {
			err = corrupt
		}
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, nil
		case errors.Is(err, errCorrupt):
			p.setAside(ctx, r, token, err)
			continue // the next record
		case err != nil:
			return nil, pgErr("claim", err)
		}
		return &pgLease{p: p, rec: *r, rev: rev, token: token, until: until}, nil
	}
	return nil, nil // the next Claim goes on
}

// maxSetAsidePerClaim bounds the undecodable records one Claim sets aside
// before it returns.
const maxSetAsidePerClaim = 8

// setAside marks the claimed record r, whose config does not decode,
// set aside (SPEC N4): the claim index leaves it out until its config is
// saved again, so every other record is claimed; it is counted and
// logged once (the update is fenced by the claim's token). A failed
// update leaves the lease to expire.
func (p *PG) setAside(ctx context.Context, r *Record, token int64, cause error) {
	tag, err := p.execRC(ctx, p.sql.setAside, r.TaskID, r.Config.ID, token)
	if err != nil {
		p.opts.Logger.Warn("pushdelivery: set aside an undecodable record", "task", r.TaskID, "config", r.Config.ID, "err", err)
		return
	}
	if tag.RowsAffected() == 1 {
		p.opts.Metrics.setAside(SetAsideUndecodable)
		p.opts.Logger.Error("pushdelivery: push record does not decode, set aside until its config is saved again",
			"task", r.TaskID, "config", r.Config.ID, "err", cause)
	}
}

// readCommitted runs f in a READ COMMITTED transaction, whatever the
// session's default isolation (SPEC N2): every statement of the outbox
// that locks or writes rows (claims, commits, releases, reopens,
// DueNow, sweeps, deletes, set-asides) sees the latest committed row,
// and re-checks its condition on it, when it had to wait for another
// transaction holding the row; under REPEATABLE READ or SERIALIZABLE a
// row updated since the statement's snapshot fails it with a
// serialization error instead (a release that does not release, a
// recovery that makes nothing due, a delete refused).
func (p *PG) readCommitted(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, p.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, f)
}

// execRC runs one statement under readCommitted.
func (p *PG) execRC(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := p.readCommitted(ctx, func(tx pgx.Tx) error {
		var err error
		tag, err = tx.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// pgLease is a claimed row, fenced by its lease token.
type pgLease struct {
	p     *PG
	rec   Record
	rev   int64
	token int64
	until time.Time
}

func (l *pgLease) Record() *Record  { r := l.rec; return &r }
func (l *pgLease) Revision() int64  { return l.rev }
func (l *pgLease) Until() time.Time { return l.until }

func (l *pgLease) Commit(ctx context.Context, r *Record) error {
	tag, err := l.p.execRC(ctx, l.p.sql.commit, l.rec.TaskID, l.rec.Config.ID, l.token,
		r.Delivered, r.Attempts, nullTime(r.FailingSince), r.NextAt, r.LastError, r.Done)
	if err != nil {
		return pgErr("commit", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// Drop implements dropper: the row goes if the lease still holds it.
func (l *pgLease) Drop(ctx context.Context) error {
	tag, err := l.p.execRC(ctx, l.p.sql.drop, l.rec.TaskID, l.rec.Config.ID, l.token)
	if err != nil {
		return pgErr("drop", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// Release gives the row back (under readCommitted: a row another
// transaction updated while the release waited for it is released
// still); on failure the lease simply expires.
func (l *pgLease) Release(ctx context.Context) {
	_, _ = l.p.execRC(ctx, l.p.sql.release, l.rec.TaskID, l.rec.Config.ID, l.token)
}

// Sweep implements Outbox. Over a store that keeps deletion marks
// (pgstore with its log): the records saved before their task's last
// deletion, from the marks settled since the last sweep
// (pgSweepDeletedSQL), then the records older than grace of tasks never
// created (pgSweepOrphansSQL, pgSweepUnbornCond), then one bounded step of a walk over the
// records by key for those of tasks deleted without a mark
// (pgSweepWalkSQL); each bounded by limit, reading the deletions and
// records due and at most limit records of the walk, not the records
// stored (SPEC C6). Without the marks: one bounded DELETE of the rows
// older than grace whose task is missing, which reads every record
// older than grace whose task exists.
func (p *PG) Sweep(ctx context.Context, grace time.Duration, limit int) (int, error) {
	now := p.opts.Clock()
	cutoff := now.Add(-grace)
	var marks bool
	if err := p.pool.QueryRow(ctx, p.sql.hasDeletions, p.opts.Schema).Scan(&marks); err != nil {
		return 0, pgErr("sweep", err)
	}
	if !marks {
		tag, err := p.execRC(ctx, p.sql.sweep, cutoff, limit)
		if err != nil {
			return 0, pgErr("sweep", err)
		}
		return int(tag.RowsAffected()), nil
	}
	n, err := p.sweepDeleted(ctx, now, limit)
	if err != nil || n >= limit {
		return n, err
	}
	tag, err := p.execRC(ctx, p.sql.sweepUnborn, cutoff, limit-n)
	if err != nil {
		return n, pgErr("sweep", err)
	}
	n += int(tag.RowsAffected())
	if n >= limit {
		return n, nil
	}
	k, err := p.sweepWalk(ctx, cutoff, limit-n)
	return n + k, err
}

// sweepMarks bounds the deletion marks one page of a sweep reads, and
// sweepPages the pages of one sweep. sweepMargin is how long before the
// outbox's clock now a mark must be to be read: a deletion stamps its
// mark inside its statement and commits later, so a mark newer than
// that may not be visible yet while later ones are; the sweep reads the
// marks in order up to that horizon only, so that it never passes over
// one still to commit (a deletion that takes longer than sweepMargin to
// commit, or a clock ahead of the database's by as much, may be missed:
// the walk, or the worker's drop, takes its records then).
const (
	sweepMarks  = 1000
	sweepPages  = 10
	sweepMargin = time.Minute
)

// sweepDeleted deletes up to limit records saved before their task's
// last deletion, from the marks after the outbox's sweep key and before
// now less sweepMargin, a page of sweepMarks at a time while pages come
// full (at most sweepPages), and moves the key to the last mark of each
// page whose stale records all went: a page with some left (the limit,
// or a row locked) is read again by the next sweep.
func (p *PG) sweepDeleted(ctx context.Context, now time.Time, limit int) (int, error) {
	horizon := now.Add(-sweepMargin)
	n := 0
	for range sweepPages {
		p.mu.Lock()
		fromAt, fromTask := p.mu.sweptAt, p.mu.sweptTask
		p.mu.Unlock()
		var deleted, stale, read int
		var lastAt *time.Time
		var lastTask string
		err := p.readCommitted(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, p.sql.sweepDeleted, fromAt, fromTask, horizon, sweepMarks, limit-n).
				Scan(&deleted, &stale, &read, &lastAt, &lastTask)
		})
		if err != nil {
			return n, pgErr("sweep", err)
		}
		n += deleted
		if deleted < stale || lastAt == nil {
			return n, nil
		}
		p.mu.Lock()
		if p.mu.sweptAt.Equal(fromAt) && p.mu.sweptTask == fromTask { // else a concurrent sweep moved it
			p.mu.sweptAt, p.mu.sweptTask = *lastAt, lastTask
		}
		p.mu.Unlock()
		if read < sweepMarks || n >= limit {
			return n, nil
		}
	}
	return n, nil
}

// sweepWalk takes one step of the walk over the records by key: it
// reads the limit records after the last one the previous step read
// (from the first again once a step reaches the end) and deletes those
// older than cutoff whose task is missing. Every record is read once
// per (records / limit) sweeps, so the records of a task deleted
// without a mark go within that many (SPEC N1), at a bounded cost per
// sweep (C6).
func (p *PG) sweepWalk(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	p.mu.Lock()
	after := p.mu.walked
	p.mu.Unlock()
	var deleted, read int
	var last [2]string
	err := p.readCommitted(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, p.sql.sweepWalk, after[0], after[1], limit, cutoff).Scan(&deleted, &read, &last[0], &last[1])
	})
	if err != nil {
		return 0, pgErr("sweep", err)
	}
	if read < limit {
		last = [2]string{}
	}
	p.mu.Lock()
	p.mu.walked = last
	p.mu.Unlock()
	return deleted, nil
}

// Depth implements Outbox in one query.
func (p *PG) Depth(ctx context.Context, now time.Time) (int, time.Duration, error) {
	p.reopen(ctx, now)
	var n int
	var oldest *time.Time
	if err := p.pool.QueryRow(ctx, p.sql.depth, now).Scan(&n, &oldest); err != nil {
		return 0, 0, pgErr("depth", err)
	}
	if oldest == nil {
		return n, 0, nil
	}
	return n, max(0, now.Sub(*oldest)), nil
}

// DueNow implements Recoverer in one statement over the records that
// are not idle (the claim index): the records behind, not every record.
// It runs under readCommitted: a record committed while DueNow waited
// for its row is made due still, not a serialization error.
func (p *PG) DueNow(ctx context.Context, dest string, now time.Time) (int, error) {
	tag, err := p.execRC(ctx, p.sql.dueNow, dest, now)
	if err != nil {
		return 0, pgErr("due now", err)
	}
	return int(tag.RowsAffected()), nil
}
