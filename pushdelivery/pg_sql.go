package pushdelivery

import (
	"fmt"
	"strings"
)

// pgSQL holds the statements of one schema.
type pgSQL struct {
	ddl                                                   []string
	lockTask, count, upsert, get, list, delete, deleteAll string
	dropStale, drop                                       string
	claim, claimAmong, commit, release, sweep, depth      string
	reopenTasks, rescan, rescanRecent                     string
	hasIdle, backfillIdle, setAside, dueNow               string
	hasDeletions, sweepDeleted, sweepUnborn, sweepWalk    string
}

// pgCols are the columns scanRecord reads, in its order.
const pgCols = `task_id, id, config, dest, created_at, delivered, attempts, failing_since, next_at, last_error, done, incarnation`

// pgTableSQL defines the table (%[1]s: the quoted schema). No foreign key:
// a configuration may be saved before its task's first write, and Sweep
// removes those of tasks that are gone. id is COLLATE "C" so that List
// pages bytewise.
const pgTableSQL = `CREATE TABLE IF NOT EXISTS %[1]s.a2a_push_configs (
	task_id       text        NOT NULL,
	id            text        COLLATE "C" NOT NULL,
	config        bytea       NOT NULL,
	dest          text        NOT NULL,
	created_at    timestamptz NOT NULL,
	delivered     bigint      NOT NULL DEFAULT 0,
	attempts      integer     NOT NULL DEFAULT 0,
	failing_since timestamptz,
	next_at       timestamptz NOT NULL,
	last_error    text        NOT NULL DEFAULT '',
	done          boolean     NOT NULL DEFAULT false,
	lease_token   bigint,
	lease_until   timestamptz,
	idle          boolean     NOT NULL DEFAULT false,
	set_aside     boolean     NOT NULL DEFAULT false,
	incarnation   bigint      NOT NULL DEFAULT 0,
	PRIMARY KEY (task_id, id)
)`

// pgMigrateSQL brings a table of an earlier version to this one (no-ops
// on a table pgTableSQL has just created). idle: the record had
// delivered its task's last revision when last written (caught up; Done
// records are idle too), so the claim index leaves it out until a write
// to its task reopens it (SPEC C6). set_aside: the record does not decode
// (N4); Save clears it. incarnation: Record.Incarnation (N1; 0 for the
// records of earlier versions: none). The claim index of earlier versions indexed every
// record not Done.
var pgMigrateSQL = []string{
	`ALTER TABLE %[1]s.a2a_push_configs ADD COLUMN IF NOT EXISTS idle boolean NOT NULL DEFAULT false`,
	`ALTER TABLE %[1]s.a2a_push_configs ADD COLUMN IF NOT EXISTS set_aside boolean NOT NULL DEFAULT false`,
	`ALTER TABLE %[1]s.a2a_push_configs ADD COLUMN IF NOT EXISTS incarnation bigint NOT NULL DEFAULT 0`,
	`CREATE INDEX IF NOT EXISTS a2a_push_configs_claim ON %[1]s.a2a_push_configs (next_at) WHERE NOT idle AND NOT set_aside`,
	`DROP INDEX IF EXISTS %[1]s.a2a_push_configs_due`,
	`CREATE INDEX IF NOT EXISTS a2a_push_configs_unborn ON %[1]s.a2a_push_configs (created_at) WHERE delivered = 0`,
}

// pgBackfillIdleSQL marks idle the caught-up records of a table that had
// no idle column, once, when NewPG adds it.
const pgBackfillIdleSQL = `UPDATE %[1]s.a2a_push_configs q SET idle = true
WHERE NOT q.idle AND (q.done OR q.delivered >= coalesce((SELECT t.revision FROM %[1]s.a2a_tasks t WHERE t.id = q.task_id), 0))`

// pgIdleSQL, followed by the delivered revision's parameter: whether the
// record of task $1 is caught up with its task (a missing task counts as
// revision 0).
const pgIdleSQL = `coalesce((SELECT t.revision FROM %[1]s.a2a_tasks t WHERE t.id = $1), 0) <= `

// pgClaimSQL: %[2]s the columns prefixed with "p.", %[3]s the filter
// (pgClaimFilter or pgAmongFilter, its arguments from $4); $1 now, $2
// lease token, $3 lease end.
const pgClaimSQL = `WITH c AS (
	SELECT p.task_id, p.id, t.revision
	FROM %[1]s.a2a_push_configs p JOIN %[1]s.a2a_tasks t ON t.id = p.task_id
	WHERE NOT p.idle AND NOT p.set_aside AND p.next_at <= $1 AND t.revision > p.delivered
	  AND (p.lease_until IS NULL OR p.lease_until < $1) AND %[3]s
	ORDER BY p.next_at LIMIT 1
	FOR UPDATE OF p SKIP LOCKED)
UPDATE %[1]s.a2a_push_configs p SET lease_token = $2, lease_until = $3
FROM c WHERE p.task_id = c.task_id AND p.id = c.id
RETURNING %[2]s, c.revision`

// Claim filters: $4 busy destinations and $5 tasks skipped (Claim); $4
// the destinations to claim among (ClaimAmong). The skip list (the tasks
// of the owners at their limit, up to 16k) is a hashed subplan, one hash
// probe per record passed over: `<> ALL($5)` scanned the list for each
// (TestPGClaimSkipIsHashed).
const (
	pgClaimFilter = `p.dest <> ALL($4) AND p.task_id NOT IN (SELECT unnest($5::text[]))`
	pgAmongFilter = `p.dest = ANY($4)`
)

// pgCommitSQL: $1 task, $2 id, $3 lease token, $4–$9 the delivery state.
// A record is stored idle (caught up), and Done, only if its task is
// still at Delivered in the statement's snapshot: a write committed since
// the claim keeps it due. (A write that commits while this statement runs
// is not seen; its Touch or the next rescan reopens the record:
// pgReopenSQL.)
const pgCommitSQL = `UPDATE %[1]s.a2a_push_configs SET delivered = $4, attempts = $5, failing_since = $6,
	next_at = $7, last_error = $8,
	idle = ` + pgIdleSQL + `$4,
	done = $9 AND ` + pgIdleSQL + `$4,
	lease_token = NULL, lease_until = NULL
WHERE task_id = $1 AND id = $2 AND lease_token = $3`

// pgReopenSQL clears idle and Done on the records among s whose task has
// moved past Delivered (a write to the task; to a terminal task, SPEC
// S7), so that Claim, which skips idle rows by the claim index, takes
// them again (N2). %[2]s
// defines s: candidate rows (task_id, id) with leased (a lease is on the
// row) and stale (Done and its task past Delivered, in the statement's
// snapshot). Each record's task is read by its key (the scalar
// subquery), so the cost is the candidates', not the tasks'. A row
// another transaction has locked is skipped, not waited for (a reopen
// never holds up a claim): the caller reads it again later.
// (c checks stale again on the row it locks, which may have changed.)
const pgReopenSQL = `WITH s AS (%[2]s),
c AS (
	SELECT q.task_id, q.id FROM %[1]s.a2a_push_configs q JOIN s ON s.task_id = q.task_id AND s.id = q.id
	WHERE s.stale AND ` + pgStale + `
	ORDER BY q.task_id, q.id FOR UPDATE OF q SKIP LOCKED),
r AS (UPDATE %[1]s.a2a_push_configs p SET done = false, idle = false FROM c WHERE p.task_id = c.task_id AND p.id = c.id)
`

// pgStale: the record (aliased q) is idle and its task has moved past
// Delivered.
const pgStale = `q.idle AND (SELECT t.revision FROM %[1]s.a2a_tasks t WHERE t.id = q.task_id) > q.delivered`

// pgReopenTasksSQL: the records of the tasks in $1 (text[]). It returns
// the tasks to keep touched: those with a leased record (its holder's
// commit may store Done without seeing the write), and those with a
// stale record it skipped.
const pgReopenTasksSQL = `SELECT q.task_id, q.id, q.lease_token IS NOT NULL AS leased, ` + pgStale + ` AS stale
	FROM %[1]s.a2a_push_configs q WHERE q.task_id = ANY($1)`

const pgReopenTasksTail = `SELECT DISTINCT s.task_id FROM s LEFT JOIN c ON c.task_id = s.task_id AND c.id = s.id
WHERE s.leased OR (s.stale AND c.id IS NULL)`

// pgRescanSQL: the next $3 idle records after ($1, $2) in key order; it
// returns how many it read and the last one's key. (A stale record it
// skips waits for the next rescan.) The full rescan, once per outbox
// opened.
const pgRescanSQL = `SELECT q.task_id, q.id, false AS leased, true AS stale FROM %[1]s.a2a_push_configs q
	WHERE q.idle AND (q.task_id, q.id) > ($1::text, $2::text COLLATE "C")
	ORDER BY q.task_id, q.id LIMIT $3`

// pgRescanRecentSQL: the idle records of the next $3 tasks written after
// ($1 updated_at, $2 id), read from pgstore's ordering index
// (idx_a2a_tasks_updated), and, with w_id NULL, nothing for a task
// without records. The rescans after the first: they cost the tasks
// written since, not the records stored (SPEC C6).
const pgRescanRecentSQL = `WITH w AS (SELECT t.id, t.updated_at FROM %[1]s.a2a_tasks t
	WHERE (t.updated_at, t.id COLLATE "C") > ($1::timestamptz, $2::text COLLATE "C")
	ORDER BY t.updated_at, t.id COLLATE "C" LIMIT $3)
SELECT w.id AS w_id, w.updated_at AS w_at, q.task_id, q.id, false AS leased, true AS stale
	FROM w LEFT JOIN %[1]s.a2a_push_configs q ON q.task_id = w.id AND q.idle`

const pgRescanRecentTail = `SELECT count(DISTINCT w_id), max(w_at),
	coalesce((array_agg(w_id ORDER BY w_at DESC, w_id COLLATE "C" DESC))[1], '') FROM s`

const pgRescanTail = `SELECT count(*), coalesce(max(task_id), ''), coalesce((array_agg(id ORDER BY task_id DESC, id DESC))[1], '') FROM s`

// pgSweepOrphansSQL: %[2]s the condition on a record (aliased c) that,
// with its task missing, has it deleted; $2 the limit. The records found
// in the statement's snapshot (w) are deleted only if the row locked is
// the version judged (its xmin) and still meets the condition: under
// READ COMMITTED a row written by a transaction that committed after
// the snapshot is locked in its new version and only the conditions on
// it are checked again, the task's absence staying that of the snapshot
// — a task created and its config saved again in between would lose the
// config (SPEC N1, N2: no acknowledged save is lost). Every save writes
// the row, so a record saved since the snapshot is left for the next
// sweep; one not written since is deleted as of the snapshot (a task
// created after it does not change that: the deletion comes first). A
// candidate locked elsewhere is skipped and counts against the limit.
const pgSweepOrphansSQL = `WITH w AS (SELECT c.task_id, c.id, c.xmin AS v FROM %[1]s.a2a_push_configs c
	WHERE %[2]s AND NOT EXISTS (SELECT 1 FROM %[1]s.a2a_tasks t WHERE t.id = c.task_id)
	LIMIT $2),
d AS (SELECT c.task_id, c.id FROM w JOIN %[1]s.a2a_push_configs c ON c.task_id = w.task_id AND c.id = w.id
	WHERE c.xmin = w.v AND %[2]s
	FOR UPDATE OF c SKIP LOCKED)
DELETE FROM %[1]s.a2a_push_configs p USING d WHERE p.task_id = d.task_id AND p.id = d.id`

// pgSweepAllCond: the sweep of a store without deletion marks (no task
// log), $1 the cutoff: it reads every record older than the cutoff whose
// task exists.
const pgSweepAllCond = `c.created_at < $1`

// pgSweepDeletedSQL: the records saved before the last deletion of
// their task (Record.stale against its mark: SPEC N1, whether or not the
// task was created again), found from pgstore's deletion marks
// (a2a_task_deletions, by its index on at) after ($1 at, $2 task) and
// before $3 (the settled horizon), at most $4 marks in (at, task_id)
// order and $5 records: the rows read are the deletions in the window
// and their records, not the records stored (C6). It returns the
// records deleted, the stale records found (more than deleted: some
// were left, by the limit or a lock), the marks read and the last
// mark's key.
const pgSweepDeletedSQL = `WITH d AS (SELECT task_id, at FROM %[1]s.a2a_task_deletions
	WHERE at >= $1::timestamptz AND (at, task_id) > ($1::timestamptz, $2::text) AND at < $3
	ORDER BY at, task_id LIMIT $4),
s AS (SELECT q.task_id, q.id, m.at FROM d m JOIN %[1]s.a2a_push_configs q ON q.task_id = m.task_id
	WHERE ` + pgStaleBeforeMark + `),
c AS (SELECT q.task_id, q.id FROM s m JOIN %[1]s.a2a_push_configs q ON q.task_id = m.task_id AND q.id = m.id
	WHERE ` + pgStaleBeforeMark + `
	LIMIT $5 FOR UPDATE OF q SKIP LOCKED),
x AS (DELETE FROM %[1]s.a2a_push_configs p USING c WHERE p.task_id = c.task_id AND p.id = c.id RETURNING 1),
l AS (SELECT at, task_id FROM d ORDER BY at DESC, task_id DESC LIMIT 1)
SELECT (SELECT count(*) FROM x), (SELECT count(*) FROM s), (SELECT count(*) FROM d),
	(SELECT at FROM l), coalesce((SELECT task_id FROM l), '')`

// pgStaleBeforeMark: the record (aliased q) was saved before the
// deletion m.at of its task (Record.stale). pgSweepDeletedSQL checks it
// again on the row it locks, which a save may have written since the
// statement's snapshot (SPEC N2); a save for a later incarnation
// replaces the row (Save's dropStale), so the lock finds it gone.
const pgStaleBeforeMark = `q.incarnation < (extract(epoch FROM m.at) * 1000000)::bigint AND (q.incarnation > 0 OR q.created_at < m.at)`

// pgSweepWalkSQL: the backstop for the records of tasks deleted without
// a mark (a DELETE by hand, a TRUNCATE, a store whose log was off, or a
// mark forgotten before a sweep read it): the next $3 records after
// ($1 task, $2 id) in key order, by the primary key, those older than
// $4 whose task is missing deleted. It returns the records deleted,
// the records read and the last one's key: one bounded step of a walk
// over the whole table (SPEC C6, N1). A record is deleted only in the
// version the step read (its xmin), as in pgSweepOrphansSQL (N2);
// created_at no save changes.
const pgSweepWalkSQL = `WITH w AS (SELECT q.task_id, q.id, q.created_at, q.xmin AS v FROM %[1]s.a2a_push_configs q
	WHERE (q.task_id, q.id) > ($1::text, $2::text) ORDER BY q.task_id, q.id LIMIT $3),
c AS (SELECT q.task_id, q.id FROM w JOIN %[1]s.a2a_push_configs q ON q.task_id = w.task_id AND q.id = w.id
	WHERE w.created_at < $4 AND q.xmin = w.v AND NOT EXISTS (SELECT 1 FROM %[1]s.a2a_tasks t WHERE t.id = w.task_id)
	FOR UPDATE OF q SKIP LOCKED),
x AS (DELETE FROM %[1]s.a2a_push_configs p USING c WHERE p.task_id = c.task_id AND p.id = c.id RETURNING 1),
l AS (SELECT task_id, id FROM w ORDER BY task_id DESC, id DESC LIMIT 1)
SELECT (SELECT count(*) FROM x), (SELECT count(*) FROM w),
	coalesce((SELECT task_id FROM l), ''), coalesce((SELECT id FROM l), '')`

// pgSweepUnbornCond: the records older than $1 of tasks never created
// (saved before a first write that never came: Delivered 0, read by the
// partial index a2a_push_configs_unborn). The records of live tasks
// there are those behind at revision 0: work due.
const pgSweepUnbornCond = `c.delivered = 0 AND c.created_at < $1`

// pgDepthSQL: $1 now.
// A due record has waited since its first undelivered entry was logged
// (the task's last write when that entry was trimmed), or since its
// retry time when that is later.
const pgDepthSQL = `SELECT count(*),
	min(greatest(p.next_at, coalesce(l.at, t.updated_at))) FILTER (WHERE p.next_at <= $1 AND t.revision > p.delivered)
FROM %[1]s.a2a_push_configs p LEFT JOIN %[1]s.a2a_tasks t ON t.id = p.task_id
	LEFT JOIN %[1]s.a2a_task_log l ON l.task_id = p.task_id AND l.revision = p.delivered + 1
WHERE NOT p.idle AND NOT p.set_aside`

func mapf(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

func newPGSQL(schema string) pgSQL {
	f := func(s string) string { return fmt.Sprintf(s, schema, pgCols) }
	prefixed := "p." + strings.ReplaceAll(pgCols, ", ", ", p.")
	return pgSQL{
		ddl: append([]string{
			f(`CREATE SCHEMA IF NOT EXISTS %[1]s`),
			f(pgTableSQL),
		}, mapf(pgMigrateSQL, f)...),
		hasIdle: `SELECT EXISTS (SELECT 1 FROM information_schema.columns
	WHERE table_schema = $1 AND table_name = 'a2a_push_configs' AND column_name = 'idle')`,
		backfillIdle: f(pgBackfillIdleSQL),
		// $1 dest, $2 now.
		dueNow: f(`UPDATE %[1]s.a2a_push_configs SET next_at = $2
WHERE NOT idle AND NOT set_aside AND next_at > $2 AND dest = $1`),
		setAside: f(`UPDATE %[1]s.a2a_push_configs SET set_aside = true, lease_token = NULL, lease_until = NULL
WHERE task_id = $1 AND id = $2 AND lease_token = $3`),
		// $1 the schema, $2 the task: serialises the saves of one task.
		lockTask: `SELECT pg_advisory_xact_lock(hashtextextended('a2astore.pushdelivery.task:' || $1 || ':' || $2, 0))`,
		count:    f(`SELECT count(*), coalesce(bool_or(id = $2), false) FROM %[1]s.a2a_push_configs WHERE task_id = $1`),
		// A changed config starts its failure state afresh (Record.afresh);
		// saving it again clears a set-aside (an undecodable config).
		upsert: f(`INSERT INTO %[1]s.a2a_push_configs AS c (%[2]s, idle) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
	` + pgIdleSQL + `$6)
ON CONFLICT (task_id, id) DO UPDATE SET config = EXCLUDED.config, dest = EXCLUDED.dest, set_aside = false,
	attempts = CASE WHEN c.config = EXCLUDED.config THEN c.attempts ELSE EXCLUDED.attempts END,
	failing_since = CASE WHEN c.config = EXCLUDED.config THEN c.failing_since ELSE EXCLUDED.failing_since END,
	last_error = CASE WHEN c.config = EXCLUDED.config THEN c.last_error ELSE EXCLUDED.last_error END,
	next_at = CASE WHEN c.config = EXCLUDED.config THEN c.next_at ELSE EXCLUDED.next_at END`),
		get:       f(`SELECT %[2]s FROM %[1]s.a2a_push_configs WHERE task_id = $1 AND id = $2`),
		list:      f(`SELECT %[2]s FROM %[1]s.a2a_push_configs WHERE task_id = $1 AND id > $2 ORDER BY id LIMIT $3`),
		delete:    f(`DELETE FROM %[1]s.a2a_push_configs WHERE task_id = $1 AND id = $2`),
		deleteAll: f(`DELETE FROM %[1]s.a2a_push_configs WHERE task_id = $1`),
		// $1 task, $2 the incarnation saved, $3 its time: the records of
		// earlier ones (Record.stale: incarnation 0 is unknown, earlier
		// only if created before the mark).
		dropStale: f(`DELETE FROM %[1]s.a2a_push_configs WHERE task_id = $1 AND incarnation < $2
	AND (incarnation > 0 OR created_at < $3)`),
		// $1 task, $2 id, $3 lease token.
		drop:         f(`DELETE FROM %[1]s.a2a_push_configs WHERE task_id = $1 AND id = $2 AND lease_token = $3`),
		claim:        fmt.Sprintf(pgClaimSQL, schema, prefixed, pgClaimFilter),
		claimAmong:   fmt.Sprintf(pgClaimSQL, schema, prefixed, pgAmongFilter),
		commit:       f(pgCommitSQL),
		reopenTasks:  fmt.Sprintf(pgReopenSQL, schema, fmt.Sprintf(pgReopenTasksSQL, schema)) + pgReopenTasksTail,
		rescan:       fmt.Sprintf(pgReopenSQL, schema, fmt.Sprintf(pgRescanSQL, schema)) + pgRescanTail,
		rescanRecent: fmt.Sprintf(pgReopenSQL, schema, fmt.Sprintf(pgRescanRecentSQL, schema)) + pgRescanRecentTail,
		release: f(`UPDATE %[1]s.a2a_push_configs SET lease_token = NULL, lease_until = NULL
WHERE task_id = $1 AND id = $2 AND lease_token = $3`),
		sweep:        fmt.Sprintf(pgSweepOrphansSQL, schema, pgSweepAllCond),
		sweepDeleted: f(pgSweepDeletedSQL),
		sweepUnborn:  fmt.Sprintf(pgSweepOrphansSQL, schema, pgSweepUnbornCond),
		sweepWalk:    f(pgSweepWalkSQL),
		hasDeletions: `SELECT to_regclass(quote_ident($1) || '.a2a_task_deletions') IS NOT NULL`,
		depth:        f(pgDepthSQL),
	}
}
