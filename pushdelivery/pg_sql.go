package pushdelivery

import (
	"fmt"
	"strings"
)

// pgSQL holds the statements of one schema.
type pgSQL struct {
	ddl                                                   []string
	lockTask, count, upsert, get, list, delete, deleteAll string
	claim, commit, release, sweep, depth                  string
	reopenTasks, rescan                                   string
}

// pgCols are the columns scanRecord reads, in its order.
const pgCols = `task_id, id, config, dest, created_at, delivered, attempts, failing_since, next_at, last_error, done`

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
	PRIMARY KEY (task_id, id)
)`

// pgClaimSQL: %[2]s the columns prefixed with "p."; $1 now, $2 busy destinations, $3 lease token, $4 lease end.
const pgClaimSQL = `WITH c AS (
	SELECT p.task_id, p.id, t.revision
	FROM %[1]s.a2a_push_configs p JOIN %[1]s.a2a_tasks t ON t.id = p.task_id
	WHERE NOT p.done AND p.next_at <= $1 AND t.revision > p.delivered
	  AND (p.lease_until IS NULL OR p.lease_until < $1) AND p.dest <> ALL($2)
	ORDER BY p.next_at LIMIT 1
	FOR UPDATE OF p SKIP LOCKED)
UPDATE %[1]s.a2a_push_configs p SET lease_token = $3, lease_until = $4
FROM c WHERE p.task_id = c.task_id AND p.id = c.id
RETURNING %[2]s, c.revision`

// pgCommitSQL: $1 task, $2 id, $3 lease token, $4–$9 the delivery state.
// A record is stored Done only if its task is still at Delivered in the
// statement's snapshot: a write committed since the claim keeps it due.
// (A write that commits while this statement runs is not seen; its Touch
// or the next Rescan reopens the record: pgReopenSQL.)
const pgCommitSQL = `UPDATE %[1]s.a2a_push_configs SET delivered = $4, attempts = $5, failing_since = $6,
	next_at = $7, last_error = $8,
	done = CASE WHEN $9 THEN coalesce((SELECT t.revision FROM %[1]s.a2a_tasks t WHERE t.id = $1), 0) <= $4 ELSE false END,
	lease_token = NULL, lease_until = NULL
WHERE task_id = $1 AND id = $2 AND lease_token = $3`

// pgReopenSQL clears Done on the records among s whose task has moved
// past Delivered (a write to a terminal task, SPEC S7), so that Claim,
// which skips Done rows by the claim index, takes them again (N2). %[2]s
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
r AS (UPDATE %[1]s.a2a_push_configs p SET done = false FROM c WHERE p.task_id = c.task_id AND p.id = c.id)
`

// pgStale: the record (aliased q) is Done and its task has moved past
// Delivered.
const pgStale = `q.done AND (SELECT t.revision FROM %[1]s.a2a_tasks t WHERE t.id = q.task_id) > q.delivered`

// pgReopenTasksSQL: the records of the tasks in $1 (text[]). It returns
// the tasks to keep touched: those with a leased record (its holder's
// commit may store Done without seeing the write), and those with a
// stale record it skipped.
const pgReopenTasksSQL = `SELECT q.task_id, q.id, q.lease_token IS NOT NULL AS leased, ` + pgStale + ` AS stale
	FROM %[1]s.a2a_push_configs q WHERE q.task_id = ANY($1)`

const pgReopenTasksTail = `SELECT DISTINCT s.task_id FROM s LEFT JOIN c ON c.task_id = s.task_id AND c.id = s.id
WHERE s.leased OR (s.stale AND c.id IS NULL)`

// pgRescanSQL: the next $3 Done records after ($1, $2) in key order; it
// returns how many it read and the last one's key. (A stale record it
// skips waits for the next rescan.)
const pgRescanSQL = `SELECT q.task_id, q.id, false AS leased, true AS stale FROM %[1]s.a2a_push_configs q
	WHERE q.done AND (q.task_id, q.id) > ($1::text, $2::text COLLATE "C")
	ORDER BY q.task_id, q.id LIMIT $3`

const pgRescanTail = `SELECT count(*), coalesce(max(task_id), ''), coalesce((array_agg(id ORDER BY task_id DESC, id DESC))[1], '') FROM s`

// pgSweepSQL: $1 the cutoff, $2 the limit.
const pgSweepSQL = `DELETE FROM %[1]s.a2a_push_configs p USING (
	SELECT c.task_id, c.id FROM %[1]s.a2a_push_configs c
	WHERE c.created_at < $1
	  AND NOT EXISTS (SELECT 1 FROM %[1]s.a2a_tasks t WHERE t.id = c.task_id)
	LIMIT $2 FOR UPDATE SKIP LOCKED) d
WHERE p.task_id = d.task_id AND p.id = d.id`

// pgDepthSQL: $1 now.
// A due record has waited since its first undelivered entry was logged
// (the task's last write when that entry was trimmed), or since its
// retry time when that is later.
const pgDepthSQL = `SELECT count(*),
	min(greatest(p.next_at, coalesce(l.at, t.updated_at))) FILTER (WHERE p.next_at <= $1 AND t.revision > p.delivered)
FROM %[1]s.a2a_push_configs p LEFT JOIN %[1]s.a2a_tasks t ON t.id = p.task_id
	LEFT JOIN %[1]s.a2a_task_log l ON l.task_id = p.task_id AND l.revision = p.delivered + 1
WHERE NOT p.done`

func newPGSQL(schema string) pgSQL {
	f := func(s string) string { return fmt.Sprintf(s, schema, pgCols) }
	prefixed := "p." + strings.ReplaceAll(pgCols, ", ", ", p.")
	return pgSQL{
		ddl: []string{
			f(`CREATE SCHEMA IF NOT EXISTS %[1]s`),
			f(pgTableSQL),
			f(`CREATE INDEX IF NOT EXISTS a2a_push_configs_due ON %[1]s.a2a_push_configs (next_at) WHERE NOT done`),
		},
		// $1 the schema, $2 the task: serialises the saves of one task.
		lockTask: `SELECT pg_advisory_xact_lock(hashtextextended('a2astore.pushdelivery.task:' || $1 || ':' || $2, 0))`,
		count:    f(`SELECT count(*), coalesce(bool_or(id = $2), false) FROM %[1]s.a2a_push_configs WHERE task_id = $1`),
		// A changed config starts its failure state afresh (Record.afresh).
		upsert: f(`INSERT INTO %[1]s.a2a_push_configs AS c (%[2]s) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (task_id, id) DO UPDATE SET config = EXCLUDED.config, dest = EXCLUDED.dest,
	attempts = CASE WHEN c.config = EXCLUDED.config THEN c.attempts ELSE EXCLUDED.attempts END,
	failing_since = CASE WHEN c.config = EXCLUDED.config THEN c.failing_since ELSE EXCLUDED.failing_since END,
	last_error = CASE WHEN c.config = EXCLUDED.config THEN c.last_error ELSE EXCLUDED.last_error END,
	next_at = CASE WHEN c.config = EXCLUDED.config THEN c.next_at ELSE EXCLUDED.next_at END`),
		get:         f(`SELECT %[2]s FROM %[1]s.a2a_push_configs WHERE task_id = $1 AND id = $2`),
		list:        f(`SELECT %[2]s FROM %[1]s.a2a_push_configs WHERE task_id = $1 AND id > $2 ORDER BY id LIMIT $3`),
		delete:      f(`DELETE FROM %[1]s.a2a_push_configs WHERE task_id = $1 AND id = $2`),
		deleteAll:   f(`DELETE FROM %[1]s.a2a_push_configs WHERE task_id = $1`),
		claim:       fmt.Sprintf(pgClaimSQL, schema, prefixed),
		commit:      f(pgCommitSQL),
		reopenTasks: fmt.Sprintf(pgReopenSQL, schema, fmt.Sprintf(pgReopenTasksSQL, schema)) + pgReopenTasksTail,
		rescan:      fmt.Sprintf(pgReopenSQL, schema, fmt.Sprintf(pgRescanSQL, schema)) + pgRescanTail,
		release: f(`UPDATE %[1]s.a2a_push_configs SET lease_token = NULL, lease_until = NULL
WHERE task_id = $1 AND id = $2 AND lease_token = $3`),
		sweep: f(pgSweepSQL),
		depth: f(pgDepthSQL),
	}
}
