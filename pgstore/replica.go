package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Reads from hot standbys (L10). With Options.Replicas, Get and List run
// on a standby when it has replayed the primary's WAL up to where it was
// when the read began; otherwise on the primary. Each such read:
//
//  1. asks the primary for its WAL insert position P
//     (pg_current_wal_insert_lsn(): every commit already acknowledged or
//     visible on the primary, synchronous or not, has its commit record
//     before P) and its timeline T (the one it writes its WAL on: the
//     first eight hex digits of pg_walfile_name(P));
//  2. on a standby chosen round robin among those the health monitor
//     finds healthy, runs the gate — a statement that fails unless the
//     standby is on timeline T and pg_last_wal_replay_lsn() >= P — and
//     then, in a transaction that
//     starts after the gate (pipelined in the same round trip: BEGIN
//     ISOLATION LEVEL READ COMMITTED READ ONLY, the gate, COMMIT, BEGIN
//     ISOLATION LEVEL REPEATABLE READ READ ONLY, the read's statements,
//     COMMIT), the read itself. A standby's snapshot holds exactly
//     the commits whose records it has replayed, and replay only moves
//     forward, so the read sees every commit before P: everything
//     committed before the read began. Both transactions name their
//     isolation level: a read that shared the gate's transaction would
//     read from the gate's snapshot when sessions default to REPEATABLE
//     READ (default_transaction_isolation), a snapshot taken before the
//     gate looked at the replay position, so missing what the gate
//     waited for; and a server defaulting to SERIALIZABLE would fail
//     every statement on a standby. Positions on different timelines
//     are not comparable: after a failover, a standby left on the old
//     timeline (still following the old primary, or cut off from it)
//     may have replayed past P a history the new primary never had. A
//     standby's timeline is the one its WAL receiver last received and
//     flushed (pg_stat_get_wal_receiver().received_tli), or without a
//     receiver that of its last restart point (pg_control_checkpoint()):
//     a standby that replayed past the point where T forked off cannot
//     receive T, and the restart point lags replay, so both can only
//     refuse a standby wrongly (until it receives T), never pass one on
//     another history. Such a standby falls back at once (ReasonTimeline,
//     no wait: replay will not change its timeline) and the health
//     monitor skips it until it is on T;
//  3. when the gate fails, waits for the standby's replay (replica_wait.go:
//     one poller per standby), after Options.ReplicaNudgeAfter (10 ms)
//     has the primary flush its WAL (a standby receives only flushed WAL;
//     see catchUp), and runs again; after Options.ReplicaWait it falls
//     back to the primary.
//
// On the primary, a snapshot may lack a commit that a standby already
// shows: PostgreSQL writes (and streams) a commit record before the
// committing backend makes its transaction visible, and with synchronous
// replication it waits for the standbys in between (the primary then
// still reports the transaction in progress, even to pg_xact_status). So
// with standbys configured, a read on the primary runs a gate too, before
// its transaction as on a standby: it fails while a backend with a
// transaction waits at the end of its commit (pg_stat_activity: waiting
// for synchronous replication, or for the group update of the commit log
// or of the list of running transactions), and the read is then taken
// again (up to primaryGateWait; after that it fails). What no view shows
// is a committing backend between flushing its commit record and leaving
// the list of running transactions while it is not waiting (a few
// instructions, unless the scheduler stops it there): a standby read and
// then the next request would have to fit in that pause.

// Successive reads therefore see growing sets of commits wherever they
// run, as successive reads on the primary alone do: L7 holds over a
// traversal whose pages come from any mix of standbys and the primary,
// L8 within a page (one REPEATABLE READ transaction on one server), and a
// caller's committed writes are visible to its later reads on any store
// instance.

// Defaults of the standby options.
const (
	DefaultReplicaWait          = 50 * time.Millisecond
	DefaultReplicaMaxLag        = time.Second
	DefaultReplicaCheckInterval = 250 * time.Millisecond
	DefaultReplicaNudgeAfter    = 10 * time.Millisecond
	// primaryGateWait bounds how long a read on the primary waits for
	// commits already in the WAL to become visible there.
	primaryGateWait = 2 * time.Second
	// replicaConnectTimeout is a standby pool's connect timeout when its
	// DSN sets none, so that an unreachable standby fails a read over to
	// the primary instead of holding it.
	replicaConnectTimeout = time.Second
)

// Fallback reasons: why a read that could have run on a standby ran on
// the primary (ReplicaStats.Fallbacks).
const (
	ReasonDisconnected = "disconnected"    // the standby's last probe or read could not reach it
	ReasonPaused       = "paused"          // its WAL replay is paused
	ReasonLagging      = "lagging"         // its replay lags by more than Options.ReplicaMaxLag
	ReasonNotStandby   = "not_standby"     // it is not in recovery (promoted, or not a standby)
	ReasonCatchup      = "catchup_timeout" // it had not replayed up to the read's start within Options.ReplicaWait
	ReasonError        = "error"           // the read failed on it (connection lost, recovery conflict, …)
	ReasonTimeline     = "timeline"        // it is on another timeline than the primary (left behind by a failover)
)

// Reasons lists the fallback reasons.
var Reasons = reasonIndex[:]

// gateKind says which gate a read runs before its statements.
type gateKind int

const (
	gateNone    gateKind = iota // a store without standbys: the read as it always was
	gateStandby                 // on a standby: replayed up to lsn
	gatePrimary                 // on the primary of a store with standbys: no commit pending visibility
)

// gate is the check a read runs first, in the same round trip as the
// read.
type gate struct {
	kind gateKind
	lsn  int64 // gateStandby: the primary's insert position when the read began
	tli  int32 // gateStandby: the primary's timeline then
	hold int64 // tests: an advisory lock the gate's transaction waits for first (0: none)
}

// holdSQL makes a gate's transaction wait, after its snapshot is taken
// and before the gate looks, for a lock a test holds (SetGateHold): an
// advisory lock, which a standby takes as a primary does.
const holdSQL = `SELECT pg_advisory_xact_lock_shared($1)`

// The gates fail their batch with division_by_zero, which stops every
// later statement of the batch (the server skips to the batch's end); the
// standby gate fails with invalid_argument_for_logarithm (ln(0)) when the
// standby is on another timeline than the primary, before it looks at
// the position.
const (
	codeGateClosed   = "22012"
	codeTimelineGate = "2201E"
	// standbyTimelineSQL is a standby's timeline: the one its WAL
	// receiver last received (NULL without a receiver, or for a role
	// without pg_read_all_stats), else its last restart point's.
	standbyTimelineSQL = `coalesce((SELECT received_tli FROM pg_stat_get_wal_receiver()),
  (SELECT timeline_id FROM pg_control_checkpoint()))`
	standbyGateSQL = `SELECT ln(coalesce(` + standbyTimelineSQL + ` = $2, false)::int),
  1 / coalesce(pg_last_wal_replay_lsn() - '0/0' >= $1, false)::int`
	primaryGateSQL = `SELECT 1 / (NOT EXISTS (SELECT FROM pg_stat_activity
  WHERE backend_xid IS NOT NULL AND wait_event IN ('SyncRep', 'ProcArrayGroupUpdate', 'XactGroupUpdate')))::int`
	beginReadOnlyRR = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	// beginGate starts the gate's own transaction, whatever the
	// sessions' default isolation level.
	beginGate = "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY"
	// positionSQL is the primary's WAL position a read must see, and its
	// timeline: the insert position, not the write or flush position,
	// since a commit made with synchronous_commit off is visible (and
	// acknowledged) before its record is written out. The timeline is
	// the one it inserts on (pg_walfile_name names a segment of it).
	positionSQL = `SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint,
  ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::int`
)

// ErrReplicaPrivilege is New's error when Options.Replicas are set and
// the role on the primary can see no other session's wait event (neither
// a superuser nor a member of pg_read_all_stats): the primary gate would
// see no commit waiting, and pass every read.
var ErrReplicaPrivilege = errors.New("pgstore: reading from standbys needs a role with pg_read_all_stats (or superuser) on the primary")

// checkStatsPrivilege returns ErrReplicaPrivilege unless the primary's
// role sees other sessions' wait events.
func checkStatsPrivilege(ctx context.Context, pool *pgxpool.Pool) error {
	var ok bool
	err := pool.QueryRow(ctx, `SELECT rolsuper OR pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')
FROM pg_roles WHERE rolname = current_user`).Scan(&ok)
	switch {
	case err != nil:
		return fmt.Errorf("pgstore: open: %w", err)
	case !ok:
		return ErrReplicaPrivilege
	}
	return nil
}

// errGateClosed is a read whose gate failed: on a standby, it has not
// replayed far enough; on the primary, a commit is not yet visible.
var errGateClosed = errors.New("pgstore: read gate closed")

// errOtherTimeline is a standby read whose gate found the standby on
// another timeline than the primary.
var errOtherTimeline = errors.New("pgstore: the standby is on another timeline than the primary")

// batched reports whether the read must be sent as a batch: behind a
// gate, it is the gate's transaction and then the read's, each begun
// with its isolation level (L10 must not depend on the server's
// default_transaction_isolation).
func (g gate) batched() bool { return g.kind != gateNone }

// inTx reports whether a read with tx (several statements that must
// share a snapshot) runs in a transaction of its own, which the caller
// ends with a COMMIT queued after its statements: with tx, or behind a
// gate.
func (g gate) inTx(tx bool) bool { return tx || g.batched() }

// queue queues the gate in a READ COMMITTED transaction of its own and,
// when g.inTx(tx), the start of the read's REPEATABLE READ READ ONLY
// transaction, so that the read's snapshot is taken after the gate
// passed.
func (g gate) queue(b *pgx.Batch, tx bool) {
	if g.batched() {
		b.Queue(beginGate)
		if g.hold != 0 {
			b.Queue(holdSQL, g.hold) // tests
		}
	}
	switch g.kind {
	case gateStandby:
		b.Queue(standbyGateSQL, g.lsn, g.tli)
	case gatePrimary:
		b.Queue(primaryGateSQL)
	}
	if g.batched() {
		b.Queue("COMMIT")
	}
	if g.inTx(tx) {
		b.Queue(beginReadOnlyRR)
	}
}

// results reads the results of what queue queued, errGateClosed when
// the gate failed.
func (g gate) results(br pgx.BatchResults, tx bool) error {
	n := 0
	if g.batched() {
		n += 3 // BEGIN, the gate, COMMIT
		if g.hold != 0 {
			n++
		}
	}
	if g.inTx(tx) {
		n++ // BEGIN
	}
	for range n {
		if _, err := br.Exec(); err != nil {
			var pgErr *pgconn.PgError
			switch {
			case errors.As(err, &pgErr) && pgErr.Code == codeGateClosed:
				return errGateClosed
			case errors.As(err, &pgErr) && pgErr.Code == codeTimelineGate && g.kind == gateStandby:
				return errOtherTimeline
			}
			return err
		}
	}
	return nil
}

// readFunc is a read: its statements, after g, on conn.
type readFunc func(conn *pgxpool.Conn, g gate) error

// routedRead runs the idempotent read f on a standby that has replayed
// everything committed before the call, or on the primary (see the
// package comment above).
func (s *Store) routedRead(ctx context.Context, f readFunc) error {
	r := s.replicas
	if len(r.list) == 0 {
		r.primaryReads.Add(1)
		return s.read(ctx, func(c *pgxpool.Conn) error { return f(c, gate{}) })
	}
	var lsn int64
	var tli int32
	sql := positionSQL
	if p := r.positionSQL.Load(); p != nil {
		sql = *p // tests
	}
	err := s.read(ctx, func(c *pgxpool.Conn) error { return c.QueryRow(ctx, sql).Scan(&lsn, &tli) })
	if err != nil {
		return err
	}
	sb, reason := r.pick()
	if sb != nil {
		if reason, err = r.onStandby(ctx, sb, lsn, tli, f); reason == "" {
			return err
		}
	}
	if reason != "" {
		r.fallback(reason)
	}
	return s.onPrimary(ctx, f)
}

// onStandby runs f on sb behind the standby gate. reason is "" when the
// read is done (err is its outcome), else why it should fall back.
func (r *replicas) onStandby(ctx context.Context, sb *standby, lsn int64, tli int32, f readFunc) (reason string, err error) {
	g := gate{kind: gateStandby, lsn: lsn, tli: tli, hold: r.hold.Load()}
	if r.gateOff.Load() {
		g = gate{} // tests: a standby read without the gate
	}
	start := time.Now()
	waited, nudged := false, false
	for {
		err = readOn(ctx, sb.pool, func(c *pgxpool.Conn) error { return f(c, g) })
		if errors.Is(err, errOtherTimeline) {
			// Waiting would not help: skip it until a probe finds it
			// on the primary's timeline.
			sb.setHealth(health{reason: ReasonTimeline})
			return ReasonTimeline, nil
		}
		if !errors.Is(err, errGateClosed) {
			break
		}
		waited = true
		if !r.catchUp(ctx, sb, lsn, start, &nudged) {
			r.waits.observe(time.Since(start))
			return ReasonCatchup, nil
		}
	}
	switch {
	case err == nil || errors.Is(err, pgx.ErrNoRows): // a Get of a missing task is an answer too
		if waited {
			r.waits.observe(time.Since(start))
		} else {
			r.waits.observe(0)
		}
		sb.reads.Add(1)
		return "", err
	case ctx.Err() != nil:
		return "", err
	case connLost(err):
		sb.setHealth(health{reason: ReasonDisconnected})
	}
	var de *decodeError
	if errors.As(err, &de) {
		return "", err // the row is what it is on the primary too
	}
	return ReasonError, nil
}

// catchUp waits until sb has replayed up to lsn, for up to r.wait from
// start. After r.nudgeAfter it has the primary flush its WAL (nudge), once
// per read: the WAL up to lsn may sit unflushed — records of transactions
// still running, of pruning by reads, of commits made with
// synchronous_commit off — until the WAL writer's next round
// (wal_writer_delay, 200 ms by default) or another commit, and a standby
// receives only flushed WAL.
func (r *replicas) catchUp(ctx context.Context, sb *standby, lsn int64, start time.Time, nudged *bool) bool {
	deadline := start.Add(r.wait)
	if !*nudged && r.nudgeAfter >= 0 && !r.nudgeOff.Load() {
		first := start.Add(r.nudgeAfter)
		if deadline.Before(first) {
			first = deadline
		}
		if r.waitReplay(ctx, sb, lsn, first) {
			return true
		}
		*nudged = true
		r.nudge(ctx, lsn)
	}
	return r.waitReplay(ctx, sb, lsn, deadline)
}

// nudge has the primary flush its WAL past lsn: a transaction that logs
// an empty message (pg_logical_emit_message, which any role may call and
// which logical decoding ignores unless asked for the prefix) and commits
// with synchronous_commit local, so its commit flushes every record before
// it. One nudge at a time; one that already flushed past lsn serves.
func (r *replicas) nudge(ctx context.Context, lsn int64) {
	r.nudgeMu.Lock()
	defer r.nudgeMu.Unlock()
	if r.nudged.Load() >= lsn {
		return
	}
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit TO local")
	b.Queue(`SELECT (pg_logical_emit_message(true, 'a2astore.flush', '') - '0/0')::bigint`)
	b.Queue("COMMIT")
	var at int64
	err := withConn(ctx, r.primary, false, func(c *pgxpool.Conn) error {
		return runBatch(ctx, c, &b, func(br pgx.BatchResults) error {
			for i := range 4 {
				if i == 2 {
					if err := br.QueryRow().Scan(&at); err != nil {
						return err
					}
					continue
				}
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err == nil {
		r.nudged.Store(at)
		r.nudges.Add(1)
	}
}

// onPrimary runs f on the primary behind the primary gate, again while
// the gate is closed (a commit the snapshot lacks is being made visible),
// for up to primaryGateWait.
func (s *Store) onPrimary(ctx context.Context, f readFunc) error {
	s.replicas.primaryReads.Add(1)
	g := gate{kind: gatePrimary, hold: s.replicas.hold.Load()}
	if s.replicas.gateOff.Load() {
		g = gate{}
	}
	deadline := time.Now().Add(primaryGateWait)
	pause := 50 * time.Microsecond
	for {
		err := s.read(ctx, func(c *pgxpool.Conn) error { return f(c, g) })
		if !errors.Is(err, errGateClosed) {
			return err
		}
		s.replicas.primaryRetries.Add(1)
		if time.Now().Add(pause).After(deadline) {
			return fmt.Errorf("pgstore: commits already in the WAL stayed invisible on the primary for %v (synchronous replication stalled?): %w", primaryGateWait, errGateClosed)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// runBatch sends b on conn, lets read consume its results and closes it;
// a transaction the batch left open (a statement failed inside it) is
// rolled back so the connection goes back to the pool clean (if that
// fails too, the pool drops the connection).
func runBatch(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	br := conn.SendBatch(ctx, b)
	err := read(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil && conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}
