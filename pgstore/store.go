package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/loghub"
	"github.com/a2astore/a2astore/engine/taskcodec"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options configures a Store. The zero value is valid. Pool settings
// (pool_max_conns, …) go in the DSN given to Open.
type Options struct {
	// Schema is the PostgreSQL schema holding a2a_tasks. Default "public".
	Schema string
	// ExternalSchema, when true, means the schema is managed outside the
	// store: startup creates nothing and fails with ErrSchema, naming
	// MigrationFile or OwnerCountsMigrationFile, unless the table, both
	// ordering indexes, the owner column and indexes and the task
	// counters with their triggers exist. Default false: the store creates
	// what is missing (P2, P3).
	ExternalSchema bool
	// Limits bound the tasks the store accepts. Default: engine.Limits{}
	// (the engine's defaults).
	Limits engine.Limits
	// UpgradeOwnerKey is the task metadata key whose string value the
	// one-time owner backfill copies into the owner column when the
	// managed schema adds it (see Owners in the package documentation):
	// where engine/authz's OwnerPolicy kept owners before stores recorded
	// them. Default: "a2astore.owner", the key OwnerPolicy used by
	// default. A deployment whose OwnerPolicy recorded owners under
	// another key (its former MetadataKey option) must name that key: in
	// such a deployment "a2astore.owner" was ordinary metadata that any
	// client could set, and copying it would give the task to whoever the
	// client named. It must be valid UTF-8 without NUL.
	UpgradeOwnerKey string
	// UpgradeWithoutOwners, when true, skips the owner backfill: every
	// task written before the owner column existed is left without owner.
	// Set it when no OwnerPolicy recorded owners in metadata (then any
	// owner key in metadata was written by clients). It cannot be combined
	// with UpgradeOwnerKey.
	UpgradeWithoutOwners bool
	// CountRollupInterval is the cadence of the background roll-up that
	// folds the count ledger into the base counters (see FoldCounts); it
	// also folds after every thousand counted writes of this store.
	// Default (0): DefaultCountRollupInterval. Negative: this store runs
	// no roll-up — another server on the database, or a job calling
	// FoldCounts, must, or totals read a ledger that only grows (they stay
	// exact, and get slower).
	CountRollupInterval time.Duration
	// Log keeps the task log (engine.LogStore, K7) in a2a_task_log,
	// created with the table (ExternalSchema: LogMigrationFile,
	// DeletionsMigrationFile and LogTraceMigrationFile, the entries'
	// trace context, H2). Default
	// false: ReadLog fails with engine.ErrLogDisabled and writes insert
	// no log row.
	Log bool
	// LogNotify, with Log, is a notification channel every logged write
	// NOTIFYs in its transaction (payload NotifyPayload('e', task ID)),
	// for servers that relay other servers' writes to their readers
	// (pgcluster). Default "": none.
	LogNotify string
	// Replicas are DSNs (as for Open) of hot standbys streaming from the
	// primary (PostgreSQL streaming replication). Get and List run on one
	// of them when it has replayed everything committed before the call,
	// else on the primary; every guarantee of a read on the primary holds
	// (L10; see "Reads from standbys" in the package documentation).
	// Writes, conditional operations, retention, the roll-up and the
	// task log stay on the primary. The store opens a pool per standby
	// (connecting lazily) and closes them on Close, whether or not it
	// owns the primary's pool. A DSN without connect_timeout gets one
	// second. The primary's role must be a superuser or have
	// pg_read_all_stats (the primary gate reads other sessions' wait
	// events), or New fails with ErrReplicaPrivilege. Default: none; reads
	// run on the primary as they always did.
	Replicas []string
	// ReplicaWait bounds how long a read waits for a standby to replay up
	// to the primary's position at the read's start before it runs on the
	// primary instead. Default (0): DefaultReplicaWait.
	ReplicaWait time.Duration
	// ReplicaMaxLag is the replay lag beyond which the health monitor
	// takes a standby out of use until it catches up. Default (0):
	// DefaultReplicaMaxLag.
	ReplicaMaxLag time.Duration
	// ReplicaNudgeAfter is how long a read waits for a standby's replay
	// before it has the primary flush its WAL (a standby receives only
	// flushed WAL; see "Reads from standbys"): shorter waits cost more
	// flushes on the primary. Default (0): DefaultReplicaNudgeAfter.
	// Negative: never; such reads wait for the next flush (the next commit
	// or the WAL writer's round), up to ReplicaWait.
	ReplicaNudgeAfter time.Duration
	// ReplicaCheckInterval is the health monitor's cadence: how soon a
	// standby that went down, stopped replaying or came back is noticed.
	// Default (0): DefaultReplicaCheckInterval.
	ReplicaCheckInterval time.Duration
	// Tracer, when set, is the tracer of the connections of the pools the
	// store opens: the primary's (Open) and the standbys'. pgtrace.New
	// makes a span per statement (SPEC H2). A pool given to New is the
	// caller's to configure. Default nil: none.
	Tracer pgx.QueryTracer
}

// upgradeOwnerKey is the key the owner backfill reads ("" = no backfill).
func (o *Options) upgradeOwnerKey() (string, error) {
	switch {
	case o.UpgradeWithoutOwners && o.UpgradeOwnerKey != "":
		return "", fmt.Errorf("pgstore: Options.UpgradeOwnerKey and UpgradeWithoutOwners are both set: %w", engine.ErrInvalidArgument)
	case o.UpgradeWithoutOwners:
		return "", nil
	case o.UpgradeOwnerKey == "":
		return defaultUpgradeOwnerKey, nil
	case !storable(o.UpgradeOwnerKey):
		return "", fmt.Errorf("pgstore: Options.UpgradeOwnerKey with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
	}
	return o.UpgradeOwnerKey, nil
}

// Store is an engine.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	schema   string
	qschema  string // schema as quote_ident writes it, for generated DDL
	sql      statements
	limits   engine.Limits
	// upgradeOwnerKey is the metadata key of the owner backfill ("":
	// none), used only when the managed schema adds the owner column.
	upgradeOwnerKey string
	rollup          *rollup   // nil: no roll-up service
	replicas        *replicas // never nil; without standbys its list is empty
	// foldHook, when set (tests), runs in each fold's transaction after
	// the fold and before the commit; an error rolls the fold back.
	foldHook atomic.Pointer[func(context.Context, pgx.Tx) error]

	log       bool       // Options.Log
	logNotify string     // Options.LogNotify
	hub       loghub.Hub // wakes log readers of this process
	trim      struct {
		sync.Mutex
		cursor *engine.Cursor // where TrimLog goes on (nil: the oldest task)
	}
	// retention is the connection whose session holds the retention
	// lock (TryRetentionLock), nil when this store holds none.
	retention struct {
		sync.Mutex
		conn *pgxpool.Conn
	}
}

var (
	_ engine.Store      = (*Store)(nil)
	_ engine.OwnerStore = (*Store)(nil)
	_ engine.Checker    = (*Store)(nil)
)

// statements are the store's SQL, with the table name filled in.
type statements struct {
	table         string // quoted schema.a2a_tasks
	counts        string // quoted schema.a2a_task_counts
	deltas        string // quoted schema.a2a_task_count_deltas
	moves         string // quoted schema.a2a_task_count_moves
	folds         string // quoted schema.a2a_task_count_folds
	ledgers       string // both ledgers' deltas, a subquery to alias
	ledgerRows    string // SELECT of both ledgers' pending rows (after noSeqScanSQL)
	belowFolds    string // SELECT of the ledger rows a total would miss (CheckInvariants)
	create        string
	get           string
	replace       string
	revisionOf    string
	cancel        string
	stateOf       string
	appendHistory string
	delete        string
	readLog       string // Options.Log
	trimLog       string // Options.Log
	// deleted reads a task's deletion mark, forgetDeletions forgets the
	// old ones (Options.Log; delete then marks each deletion).
	deleted, forgetDeletions string
}

// Task states as SQL lists, derived from engine.KnownStates: every state
// (checked by CheckInvariants) and the terminal ones, which Cancel refuses.
var (
	knownStatesSQL    = sqlStrings(engine.KnownStates(), func(a2a.TaskState) bool { return true })
	terminalStatesSQL = sqlStrings(engine.KnownStates(), a2a.TaskState.Terminal)
)

// sqlStrings is the parenthesized SQL list of the states that pass keep.
func sqlStrings(states []a2a.TaskState, keep func(a2a.TaskState) bool) string {
	var lits []string
	for _, st := range states {
		if keep(st) {
			lits = append(lits, sqlState(st))
		}
	}
	return "(" + strings.Join(lits, ", ") + ")"
}

// sqlState is a state as an SQL string literal.
func sqlState(st a2a.TaskState) string {
	return "'" + strings.ReplaceAll(string(st), "'", "''") + "'"
}

// nextTime is P1's advance of updated_at, with clock_timestamp() read once
// into now (it changes within a statement).
const nextTime = `GREATEST(c.now, t.updated_at + interval '1 microsecond')`

// advanceable is the condition every advancing mutation puts on the row: a
// task at (or, written by others, beyond) the maximum time cannot advance
// (S5, timerange.go). atMax is its negation, for the follow-up reads that
// tell why nothing was updated.
var (
	advanceable = "t.updated_at < " + maxUpdatedAtSQL
	atMax       = "updated_at >= " + maxUpdatedAtSQL
)

func newStatements(schema string) statements {
	tbl := pgx.Identifier{schema, "a2a_tasks"}.Sanitize()
	deltas, moves := pgx.Identifier{schema, "a2a_task_count_deltas"}.Sanitize(), pgx.Identifier{schema, "a2a_task_count_moves"}.Sanitize()
	folds := pgx.Identifier{schema, "a2a_task_count_folds"}.Sanitize()
	return statements{
		table:   tbl,
		counts:  pgx.Identifier{schema, "a2a_task_counts"}.Sanitize(),
		deltas:  deltas,
		moves:   moves,
		folds:   folds,
		ledgers: "(SELECT shard, state, context_id, owner, d FROM " + deltas + " UNION ALL " + movesAsDeltas(moves) + ")",
		ledgerRows: "WITH " + watermarkCTE(folds) + " SELECT (SELECT count(*) FROM " + pendingRows(deltas, "1") + " AS l)" +
			" + (SELECT count(*) FROM " + pendingRows(moves, "1") + " AS l)",
		belowFolds: "WITH " + watermarkCTE(folds) + " SELECT count(*) FROM (SELECT xact FROM " + deltas +
			" UNION ALL SELECT xact FROM " + moves + ") AS l, wm WHERE l.xact < wm.upto AND l.xact <> ALL (wm.running)",
		create: `INSERT INTO ` + tbl + ` (id, context_id, updated_at, revision, state, status_ts, status_ns, status_msg, metadata, artifacts, history, msg_ids, owner)
VALUES ($1, $2, clock_timestamp(), 1, $3, $4, $5, $6, $7, $8, $9, $10, $11)
RETURNING ` + writtenColumns,
		get: `SELECT ` + fullColumns + ` FROM ` + tbl + ` WHERE id = $1`,
		replace: `UPDATE ` + tbl + ` t SET context_id = $2, state = $3, status_ts = $4, status_ns = $5, status_msg = $6,
  metadata = $7, artifacts = $8, history = $9, msg_ids = $10,
  revision = t.revision + 1, updated_at = ` + nextTime + `
FROM (SELECT clock_timestamp() AS now) c
WHERE t.id = $1 AND ($11::bigint = 0 OR t.revision = $11) AND ` + advanceable + `
RETURNING ` + returningWritten,
		revisionOf: `SELECT revision, ` + atMax + ` FROM ` + tbl + ` WHERE id = $1`,
		cancel: `UPDATE ` + tbl + ` t SET state = ` + sqlState(a2a.TaskStateCanceled) + `, status_msg = NULL,
  status_ts = ` + nextTime + `, status_ns = 0,
  revision = t.revision + 1, updated_at = ` + nextTime + `
FROM (SELECT clock_timestamp() AS now) c
WHERE t.id = $1 AND ($2::bigint = 0 OR t.revision = $2) AND t.state NOT IN ` + terminalStatesSQL + ` AND ` + advanceable + `
RETURNING ` + returningColumns,
		stateOf: `SELECT state, revision, ` + atMax + ` FROM ` + tbl + ` WHERE id = $1`,
		appendHistory: `UPDATE ` + tbl + ` t SET history = array_append(t.history, $2::bytea),
  msg_ids = array_append(t.msg_ids, $3::bytea),
  revision = t.revision + 1, updated_at = ` + nextTime + `
FROM (SELECT clock_timestamp() AS now) c
WHERE t.id = $1 AND ($4::bigint = 0 OR t.revision = $4) AND NOT ($3::bytea = ANY (t.msg_ids)) AND ` + advanceable + `
RETURNING ` + returningColumns,
		delete: `DELETE FROM ` + tbl + ` WHERE id = $1 AND ($2::bigint = 0 OR revision = $2)`,
	}
}

// PoolConfig parses dsn (a pgx connection string; pool settings such as
// pool_max_conns go in it) into the pool configuration Open uses. It differs
// from pgxpool.ParseConfig in how a call whose context ends is cancelled:
// the server gets a cancel request at once and the call returns once the
// statement has ended (or after cancelDeadline), leaving the connection in
// a clean state (pgx's default closes the socket at once and cancels on the
// way out). The connection is then closed rather than reused: a cancel
// request is a separate message that the server may act on late, and on a
// reused connection it would cancel another caller's statement. It is
// closed as the call ends, so the pool destroys it on release, in the
// releasing call: no hook runs on release (pgxpool runs an AfterRelease
// hook in a goroutine of its own on every release). One path still puts
// a closed connection back: a ping in Acquire that its caller abandoned,
// finished by pgxpool in the background; PrepareConn, which runs in the
// acquiring call, drops it and takes another. Callers of New can start
// from it; one who sets its BuildContextWatcherHandler or PrepareConn must
// keep this behaviour.
func PoolConfig(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &cancelHandler{CancelRequestContextWatcherHandler: pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelDeadline}}
	}
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) {
		return !c.IsClosed(), nil // false: the pool destroys it and takes another
	}
	return cfg, nil
}

// cancelDeadline bounds how long a cancelled call waits for the server to
// acknowledge the cancel request before the connection is dropped.
const cancelDeadline = 2 * time.Second

// cancelHandler is pgx's cancel-request handling that closes the
// connection once the cancelled call has ended.
type cancelHandler struct {
	pgconn.CancelRequestContextWatcherHandler
}

// HandleUnwatchAfterCancel runs as a call whose context ended finishes
// (pgconn unwatches its context), after pgx's own handling (which ends
// or waits out its cancel request and clears the socket's deadline). The
// close's Terminate message gets closeDeadline to be written. Close must
// have the background context: with any other it would watch it, and
// the watcher's lock is held while this runs.
func (h *cancelHandler) HandleUnwatchAfterCancel() {
	h.CancelRequestContextWatcherHandler.HandleUnwatchAfterCancel()
	_ = h.Conn.Conn().SetDeadline(time.Now().Add(closeDeadline))
	_ = h.Conn.Close(context.Background())
}

// closeDeadline bounds the write of a cancelled connection's Terminate
// message (a peer that stopped reading would otherwise hold the call).
const closeDeadline = time.Second

// Open connects to dsn (see PoolConfig) and returns a store that owns the
// pool: Close closes it.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := PoolConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err) // pgconn redacts the password
	}
	cfg.ConnConfig.Tracer = opts.Tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	s, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

// New returns a store on pool, which the caller keeps owning: Close does
// not close it. It prepares the schema (Options.ExternalSchema) first.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if opts.Schema == "" {
		opts.Schema = "public"
	}
	s := &Store{pool: pool, schema: opts.Schema, sql: newStatements(opts.Schema), limits: opts.Limits,
		log: opts.Log, logNotify: opts.LogNotify}
	if s.log {
		s.sql.logStatements(s.logNotify != "")
	}
	var err error
	if s.upgradeOwnerKey, err = opts.upgradeOwnerKey(); err != nil {
		return nil, err
	}
	if len(opts.Replicas) > 0 {
		if err := checkStatsPrivilege(ctx, pool); err != nil {
			return nil, err
		}
	}
	if s.qschema, err = quoteSchema(ctx, pool, s.schema); err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	if !opts.ExternalSchema {
		if err := s.ensureSchema(ctx); err != nil {
			return nil, fmt.Errorf("pgstore: create schema: %w", err)
		}
		if err := s.ensureExtras(ctx); err != nil {
			return nil, fmt.Errorf("pgstore: create schema: %w", err)
		}
		if err := s.ensureStatusIndexes(ctx); err != nil {
			return nil, fmt.Errorf("pgstore: create schema: %w", err)
		}
	}
	if err := s.checkSchema(ctx); err != nil {
		if errors.Is(err, ErrSchema) {
			return nil, err
		}
		return nil, fmt.Errorf("pgstore: check schema: %w", err)
	}
	if err := s.checkExtras(ctx); err != nil {
		return nil, err
	}
	if opts.ExternalSchema {
		// A managed schema's may still be building in another process.
		if err := s.checkStatusIndexes(ctx); err != nil {
			return nil, err
		}
	}
	if s.log && !opts.ExternalSchema {
		if err := s.ensureLog(ctx); err != nil {
			return nil, fmt.Errorf("pgstore: create schema: %w", err)
		}
	}
	if s.log {
		if err := s.checkLog(ctx); err != nil {
			return nil, err
		}
		if err := s.checkLogTrace(ctx); err != nil {
			return nil, err
		}
		if err := s.checkDeletions(ctx); err != nil {
			return nil, err
		}
	}
	if s.replicas, err = openReplicas(ctx, &opts); err != nil {
		return nil, err
	}
	s.replicas.start(pool)
	switch iv := opts.CountRollupInterval; {
	case iv == 0:
		s.rollup = startRollup(s, DefaultCountRollupInterval)
	case iv > 0:
		s.rollup = startRollup(s, iv)
	}
	return s, nil
}

// Pool returns the connection pool the store runs on, for its statistics
// (pgxpool.Pool.Stat). When Open created it, it is the store's: Close
// closes it.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close stops the roll-up service and the standby health monitor, closes
// the standby pools, then closes the primary's pool if Open created it.
func (s *Store) Close() error {
	s.rollup.stop()
	s.replicas.stop()
	if s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// Create implements engine.Store: a task without owner ("", O1).
func (s *Store) Create(ctx context.Context, task *a2a.Task) (engine.Record, error) {
	return s.create(ctx, task, "")
}

// create is Create and CreateOwned; owner is valid.
func (s *Store) create(ctx context.Context, task *a2a.Task, owner string) (engine.Record, error) {
	f, err := encode(task, s.limits)
	if err != nil {
		return engine.Record{}, err
	}
	l, err := s.newLogEntry(task, nil)
	if err != nil {
		return engine.Record{}, err
	}
	args := append([]any{string(task.ID), f.contextID, f.state,
		f.statusTS, f.statusNS, f.statusMsg, f.metadata, f.artifacts, f.history, f.msgIDs, owner}, s.logArgs(ctx, task.ID, l, true)...)
	var x row
	err = retry(ctx, func() (err error) {
		x, err = scanWritten(s.pool.QueryRow(ctx, s.sql.create, args...), &f)
		return err
	})
	if err != nil {
		return engine.Record{}, translate(ctx, "create", err)
	}
	s.rollup.wrote(1)
	s.wake(task.ID)
	return x.withTask(engine.TaskWanted(ctx))
}

// Get implements engine.Store. With standbys it may run on one (L10).
func (s *Store) Get(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	if err := validateID(id); err != nil {
		return engine.Record{}, err
	}
	var x row
	err := s.routedRead(ctx, func(conn *pgxpool.Conn, g gate) (err error) {
		if !g.batched() {
			x, err = scanRow(conn.QueryRow(ctx, s.sql.get, string(id)))
			return err
		}
		var b pgx.Batch
		g.queue(&b, false)
		b.Queue(s.sql.get, string(id))
		b.Queue("COMMIT") // the read's transaction (gate.inTx)
		return runBatch(ctx, conn, &b, func(br pgx.BatchResults) error {
			if err := g.results(br, false); err != nil {
				return err
			}
			x, err = scanRow(br.QueryRow())
			return err
		})
	})
	return getResult(ctx, "get", x, err)
}

// get reads a task on the primary (for the writes' follow-up reads).
func (s *Store) get(ctx context.Context, op string, id a2a.TaskID) (engine.Record, error) {
	var x row
	err := s.read(ctx, func(conn *pgxpool.Conn) (err error) {
		x, err = scanRow(conn.QueryRow(ctx, s.sql.get, string(id)))
		return err
	})
	return getResult(ctx, op, x, err)
}

// getResult is the outcome of a Get's read.
func getResult(ctx context.Context, op string, x row, err error) (engine.Record, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Record{}, fmt.Errorf("pgstore: %s: %w", op, engine.ErrNotFound)
	}
	if err != nil {
		return engine.Record{}, translate(ctx, op, err)
	}
	return x.record()
}

// Replace implements engine.Store.
func (s *Store) Replace(ctx context.Context, task *a2a.Task, expectedRevision int64) (engine.Record, error) {
	f, err := encode(task, s.limits)
	if err != nil {
		return engine.Record{}, err
	}
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	l, err := s.newLogEntry(task, engine.EventFrom(ctx))
	if err != nil {
		return engine.Record{}, err
	}
	args := append([]any{string(task.ID), f.contextID, f.state,
		f.statusTS, f.statusNS, f.statusMsg, f.metadata, f.artifacts, f.history, f.msgIDs, expectedRevision}, s.logArgs(ctx, task.ID, l, true)...)
	var x row
	err = retry(ctx, func() (err error) {
		x, err = scanWritten(s.pool.QueryRow(ctx, s.sql.replace, args...), &f)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// Nothing updated: missing task, revision mismatch, or a task at
		// its maximum time.
		var rev int64
		var full bool
		err = s.pool.QueryRow(ctx, s.sql.revisionOf, string(task.ID)).Scan(&rev, &full)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return engine.ErrNotFound
		case err != nil:
			return err
		case full && (expectedRevision == 0 || rev == expectedRevision):
			return errTimeAtMax
		case expectedRevision != 0:
			return engine.ErrRevisionConflict
		}
		// Unconditional replace found no row, yet one exists now: it was
		// created in between. Report it as the missing task it was.
		return engine.ErrNotFound
	})
	if err != nil {
		return engine.Record{}, s.writeError(ctx, "replace", err)
	}
	s.rollup.wrote(1)
	s.wake(task.ID)
	return x.withTask(engine.TaskWanted(ctx))
}

// writeError wraps an engine sentinel returned by a write closure, or
// translates a database error.
func (s *Store) writeError(ctx context.Context, op string, err error) error {
	for _, sentinel := range []error{engine.ErrNotFound, engine.ErrRevisionConflict, engine.ErrNotCancelable, errTimeAtMax} {
		if errors.Is(err, sentinel) {
			return fmt.Errorf("pgstore: %s: %w", op, err)
		}
	}
	return translate(ctx, op, err)
}

// Cancel implements engine.Store.
func (s *Store) Cancel(ctx context.Context, id a2a.TaskID) (engine.Record, error) {
	return s.CancelIf(ctx, id, 0)
}

// CancelIf implements engine.ConditionalStore.
func (s *Store) CancelIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) (engine.Record, error) {
	if err := validateConditional(id, expectedRevision); err != nil {
		return engine.Record{}, err
	}
	args := append([]any{string(id), expectedRevision}, s.logArgs(ctx, id, engine.LogEntry{}, false)...)
	var x row
	err := retry(ctx, func() (err error) {
		for range maxAttempts {
			x, err = scanRow(s.pool.QueryRow(ctx, s.sql.cancel, args...))
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			var state string
			var rev int64
			var full bool
			err = s.pool.QueryRow(ctx, s.sql.stateOf, string(id)).Scan(&state, &rev, &full)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return engine.ErrNotFound
			case err != nil:
				return err
			case expectedRevision != 0 && rev != expectedRevision:
				return engine.ErrRevisionConflict
			case full && !a2a.TaskState(state).Terminal():
				return errTimeAtMax
			case a2a.TaskState(state).Terminal():
				// Terminal when the UPDATE looked, or made terminal
				// since: either way this cancellation is rejected and
				// changed nothing.
				return engine.ErrNotCancelable
			}
			// Cancelable (at the expected revision) now, yet the UPDATE
			// found no such row: the row it waited on was deleted and
			// the task created again under its ID (S7) in between, which
			// the statement's snapshot cannot see. Cancel that task.
		}
		return engine.ErrRevisionConflict // recreated on every attempt
	})
	if err != nil {
		return engine.Record{}, s.writeError(ctx, "cancel", err)
	}
	s.rollup.wrote(1)
	s.wake(id)
	return x.record()
}

// AppendHistory implements engine.Store.
func (s *Store) AppendHistory(ctx context.Context, id a2a.TaskID, msg *a2a.Message) (engine.Record, error) {
	return s.AppendHistoryIf(ctx, id, msg, 0)
}

// AppendHistoryIf implements engine.ConditionalStore.
func (s *Store) AppendHistoryIf(ctx context.Context, id a2a.TaskID, msg *a2a.Message, expectedRevision int64) (engine.Record, error) {
	if err := validateID(id); err != nil {
		return engine.Record{}, err
	}
	if err := s.limits.ValidateMessage(msg); err != nil {
		return engine.Record{}, err
	}
	if err := engine.ValidateExpectedRevision(expectedRevision); err != nil {
		return engine.Record{}, err
	}
	b, err := taskcodec.EncodeMessage(msg)
	if err != nil {
		return engine.Record{}, err
	}
	var l engine.LogEntry
	if s.log {
		if l, err = engine.MessageEntry(msg, ""); err != nil { // the state is the row's
			return engine.Record{}, err
		}
	}
	args := append([]any{string(id), b, []byte(msg.ID), expectedRevision}, s.logArgs(ctx, id, l, false)...)
	for attempt := 1; ; attempt++ {
		rec, err := s.appendOnce(ctx, id, args)
		if !errors.Is(err, pgx.ErrNoRows) {
			return rec, err
		}
		// Missing task, another revision than the expected one (compared
		// first: a conflict, no record), the message already in the
		// history (deduplicated, S3: return the current record), or a
		// task at its maximum time.
		// This is a new statement, so it sees the append that won a
		// concurrent race.
		rec, err = s.get(ctx, "append history", id)
		if err != nil {
			return engine.Record{}, err
		}
		if expectedRevision != 0 && rec.Revision != expectedRevision {
			return engine.Record{}, fmt.Errorf("pgstore: append history: %w", engine.ErrRevisionConflict)
		}
		if slices.ContainsFunc(rec.Task.History, func(m *a2a.Message) bool { return m != nil && m.ID == msg.ID }) {
			return rec, nil // deduplicated
		}
		if rec.Cursor.UpdatedAt == math.MaxInt64 {
			return engine.Record{}, fmt.Errorf("pgstore: append history: %w", errTimeAtMax)
		}
		// Appendable (at the expected revision) now, yet the UPDATE
		// found no such row: the row it waited on was deleted and the
		// task created again under its ID (S7) in between, or a Replace
		// dropped the message (unconditional). Append to the task as it
		// is now; never report the append as deduplicated.
		if attempt == maxAttempts {
			return engine.Record{}, fmt.Errorf("pgstore: append history: the task changed on every attempt: %w", engine.ErrRevisionConflict)
		}
	}
}

// appendOnce runs the append's UPDATE (pgx.ErrNoRows when it wrote
// nothing) and the limits check in one transaction: the appended task
// must stay within the limits, and only the updated row says how large it
// became, so a violation rolls the UPDATE back (S3).
// args are the statement's: id, the encoded message, its ID, the expected
// revision, and logArgs.
func (s *Store) appendOnce(ctx context.Context, id a2a.TaskID, args []any) (engine.Record, error) {
	var rec engine.Record
	err := retry(ctx, func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			x, err := scanRow(tx.QueryRow(ctx, s.sql.appendHistory, args...))
			if err != nil {
				return err
			}
			if rec, err = x.record(); err != nil {
				return err
			}
			return s.limits.CheckTask(rec.Task)
		})
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return engine.Record{}, err
	}
	if errors.Is(err, engine.ErrLimitExceeded) {
		return engine.Record{}, fmt.Errorf("pgstore: append history: %w", err)
	}
	if err != nil {
		return engine.Record{}, translate(ctx, "append history", err)
	}
	s.wake(id)
	return rec, nil
}

// Delete implements engine.Store.
func (s *Store) Delete(ctx context.Context, id a2a.TaskID) error {
	return s.DeleteIf(ctx, id, 0)
}

// DeleteIf implements engine.ConditionalStore.
func (s *Store) DeleteIf(ctx context.Context, id a2a.TaskID, expectedRevision int64) error {
	if err := validateConditional(id, expectedRevision); err != nil {
		return err
	}
	var n int64
	err := retry(ctx, func() error {
		if s.log { // the deletion is remembered (K7)
			return s.pool.QueryRow(ctx, s.sql.delete, string(id), expectedRevision).Scan(&n)
		}
		tag, err := s.pool.Exec(ctx, s.sql.delete, string(id), expectedRevision)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return translate(ctx, "delete", err)
	}
	if n == 0 {
		return s.deleteMissed(ctx, id, expectedRevision)
	}
	s.rollup.wrote(1)
	s.wake(id) // its readers end
	return nil
}

// CheckInvariants verifies what the schema cannot declare (engine.Checker):
// both ordering indexes and the status indexes (C7) still exist by
// definition, valid (PostgreSQL keeps an entry per row in each: an invalid
// index, left by an interrupted build, is the one way to lack them), and
// every row is
// well-formed — updated_at within the cursor range, revision at least 1,
// status_ns within 0..999, a message ID per non-null history element at
// most, and a known state; the owner column, its indexes and the counters
// are installed (checkExtras), no owner is longer than
// engine.MaxOwnerBytes, and every counter equals a recount of the table
// (ErrCountDrift otherwise).
func (s *Store) CheckInvariants() error {
	ctx := context.Background()
	if err := s.checkSchema(ctx); err != nil {
		return err
	}
	if err := s.checkStatusIndexes(ctx); err != nil {
		return err
	}
	if err := s.checkOwnersAndCounts(ctx); err != nil {
		return err
	}
	if s.log {
		if err := s.checkLogRows(ctx); err != nil {
			return err
		}
	}
	var bad int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.sql.table+`
WHERE revision < 1 OR status_ns NOT BETWEEN 0 AND 999
   OR cardinality(msg_ids) > cardinality(history)
   OR state NOT IN `+knownStatesSQL).Scan(&bad)
	if err != nil {
		return fmt.Errorf("pgstore: check invariants: %w", err)
	}
	if bad > 0 {
		return fmt.Errorf("pgstore: %d malformed rows in %s", bad, s.sql.table)
	}
	return nil
}
