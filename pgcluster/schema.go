package pgcluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaSQL returns the DDL of the cluster tables in schema; New runs it
// (every statement is idempotent).
func SchemaSQL(schema string) string {
	return strings.ReplaceAll(schemaDDL, "{s}", quoteIdent(schema))
}

const schemaDDL = `
CREATE TABLE IF NOT EXISTS {s}.a2a_cluster_work (
	id            bigserial PRIMARY KEY,
	task_id       text        NOT NULL,
	kind          text        NOT NULL CHECK (kind IN ('execute', 'cancel')),
	payload       jsonb       NOT NULL,
	state         text        NOT NULL DEFAULT 'available' CHECK (state IN ('available', 'running', 'done')),
	attempt       integer     NOT NULL DEFAULT 0,
	available_at  timestamptz NOT NULL DEFAULT now(),
	lease_owner   text,
	lease_token   text,
	lease_expires timestamptz,
	created_at    timestamptz NOT NULL DEFAULT now(),
	finished_at   timestamptz,
	outcome       text
);
CREATE UNIQUE INDEX IF NOT EXISTS a2a_cluster_work_open
	ON {s}.a2a_cluster_work (task_id, kind) WHERE state <> 'done';
CREATE INDEX IF NOT EXISTS a2a_cluster_work_available
	ON {s}.a2a_cluster_work (available_at, id) WHERE state = 'available';
CREATE INDEX IF NOT EXISTS a2a_cluster_work_leases
	ON {s}.a2a_cluster_work (lease_expires) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS a2a_cluster_work_finished
	ON {s}.a2a_cluster_work (finished_at) WHERE state = 'done';
CREATE TABLE IF NOT EXISTS {s}.a2a_cluster_events (
	task_id    text        NOT NULL,
	seq        bigint      NOT NULL,
	version    bigint      NOT NULL,
	protocol   text        NOT NULL DEFAULT '',
	final      boolean     NOT NULL,
	event      jsonb       NOT NULL,
	created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
	PRIMARY KEY (task_id, seq)
);
CREATE INDEX IF NOT EXISTS a2a_cluster_events_final
	ON {s}.a2a_cluster_events (created_at) WHERE final;
ALTER TABLE {s}.a2a_cluster_work ADD COLUMN IF NOT EXISTS claims integer NOT NULL DEFAULT 0;
`

// install creates the tables under a transaction-scoped advisory lock, so
// instances starting together do not race on CREATE … IF NOT EXISTS.
func install(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	h := fnv.New64a()
	_, _ = h.Write([]byte("a2astore pgcluster install " + schema))
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, SchemaSQL(schema))
		return err
	})
	if err != nil {
		return fmt.Errorf("pgcluster: install tables: %w", err)
	}
	return nil
}

// statements are the SQL texts with the schema filled in.
type statements struct {
	insertWork, claim, heartbeat, complete, retry, finish string
	release, requeue, revision, namePayload               string
	expired, takeExpired, rescue, depth, lease            string
	insertReply, lastSeq, readReply, taskStates, replied  string
	cleanWork, cleanReplies, cleanLegacy                  string
}

func newStatements(schema string) statements {
	r := strings.NewReplacer("{s}", quoteIdent(schema))
	q := func(s string) string { return r.Replace(s) }
	return statements{
		insertWork: q(`INSERT INTO {s}.a2a_cluster_work (task_id, kind, payload) VALUES ($1, $2, $3)
			ON CONFLICT (task_id, kind) WHERE state <> 'done' DO NOTHING RETURNING id`),
		// claim takes the oldest available item, skipping rows other
		// instances are claiming. claims counts every claim, a
		// handed-over one's too (release gives back the attempt, not
		// the claim): an item claimed before may have been answered.
		claim: q(`UPDATE {s}.a2a_cluster_work w SET state = 'running', attempt = attempt + 1, claims = claims + 1,
				lease_owner = $1, lease_token = $2, lease_expires = now() + $3::interval
			WHERE id = (SELECT id FROM {s}.a2a_cluster_work WHERE state = 'available' AND available_at <= now()
				ORDER BY available_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
			RETURNING id, task_id, kind, payload, attempt, claims`),
		// namePayload stores the payload of a running item whose
		// execution created its task (the message names the task).
		namePayload: q(`UPDATE {s}.a2a_cluster_work SET payload = $3
			WHERE id = $1 AND lease_token = $2 AND state = 'running'`),
		// revision is the task's revision: the one a new execution item
		// starts from, read in the transaction that inserts it.
		revision: q(`SELECT revision FROM {s}.a2a_tasks WHERE id = $1`),
		// replied reports whether a task-less reply answered a message
		// for the task (the gave-up marker is no answer).
		replied: q(`SELECT EXISTS (SELECT 1 FROM {s}.a2a_cluster_events
			WHERE task_id = $1 AND version = 0 AND protocol <> $2)`),
		// heartbeat renews the lease and reads the task's state: a
		// cancel is state, which the execution learns here at the latest
		// (K8). A lease that has run out is not renewed: a rescuer may
		// have listed it as expired and be giving it up (K4).
		heartbeat: q(`UPDATE {s}.a2a_cluster_work w SET lease_expires = now() + $3::interval
			WHERE id = $1 AND lease_token = $2 AND state = 'running' AND lease_expires >= now()
			RETURNING (SELECT t.state FROM {s}.a2a_tasks t WHERE t.id = w.task_id)`),
		taskStates: q(`SELECT id, state FROM {s}.a2a_tasks WHERE id = ANY($1::text[])`),
		complete: q(`UPDATE {s}.a2a_cluster_work SET state = 'done', finished_at = now(), outcome = $3,
				lease_token = NULL, lease_expires = NULL
			WHERE id = $1 AND lease_token = $2 AND state = 'running'`),
		retry: q(`UPDATE {s}.a2a_cluster_work SET state = 'available', available_at = now() + $3::interval,
				lease_owner = NULL, lease_token = NULL, lease_expires = NULL
			WHERE id = $1 AND lease_token = $2 AND state = 'running'`),
		// release gives a handed-over execution back at once, its
		// attempt not counted, its payload naming the stored task.
		release: q(`UPDATE {s}.a2a_cluster_work SET state = 'available', available_at = now(),
				attempt = greatest(attempt - 1, 0), payload = $3,
				lease_owner = NULL, lease_token = NULL, lease_expires = NULL
			WHERE id = $1 AND lease_token = $2 AND state = 'running'`),
		// requeue puts back an item this instance claimed but could not
		// decide to run (its answered check failed): due after $3, its
		// attempt not counted.
		requeue: q(`UPDATE {s}.a2a_cluster_work SET state = 'available', available_at = now() + $3::interval,
				attempt = greatest(attempt - 1, 0), lease_owner = NULL, lease_token = NULL, lease_expires = NULL
			WHERE id = $1 AND lease_token = $2 AND state = 'running'`),
		finish: q(`UPDATE {s}.a2a_cluster_work SET state = 'done', finished_at = now(), outcome = $3,
				lease_token = NULL, lease_expires = NULL
			WHERE id = $1 AND state <> 'done' AND lease_token IS NOT DISTINCT FROM $2`),
		// takeExpired takes an item expired lists for the rescuer's give-up,
		// under a token of its own, if its lease has still run out: a
		// heartbeat that renewed it first (READ COMMITTED re-reads the
		// row) leaves it to its holder, and a heartbeat after this finds
		// another token (ErrLeaseLost).
		takeExpired: q(`UPDATE {s}.a2a_cluster_work SET lease_token = $3
			WHERE id = $1 AND lease_token IS NOT DISTINCT FROM $2 AND state = 'running' AND lease_expires < now()`),
		// expired lists the items whose lease ran out and whose attempts
		// are used up: the rescuer finishes their tasks first.
		// Items set aside ($3: their give-up failed) are skipped.
		expired: q(`SELECT id, task_id, kind, payload, lease_token, attempt FROM {s}.a2a_cluster_work
			WHERE state = 'running' AND lease_expires < now()
				AND attempt >= CASE kind WHEN 'cancel' THEN $1::int ELSE $2::int END
				AND id <> ALL($3::bigint[])
			ORDER BY lease_expires LIMIT 100`),
		rescue: q(`UPDATE {s}.a2a_cluster_work SET state = 'available', available_at = now(),
				lease_owner = NULL, lease_token = NULL, lease_expires = NULL
			WHERE id IN (SELECT id FROM {s}.a2a_cluster_work
				WHERE state = 'running' AND lease_expires < now()
					AND attempt < CASE kind WHEN 'cancel' THEN $1::int ELSE $2::int END
				ORDER BY lease_expires LIMIT 100 FOR UPDATE SKIP LOCKED)
			RETURNING task_id`),
		depth: q(`SELECT count(*) FILTER (WHERE state = 'available'), count(*) FILTER (WHERE state = 'running')
			FROM {s}.a2a_cluster_work WHERE state <> 'done'`),
		lease: q(`SELECT lease_owner, state, attempt FROM {s}.a2a_cluster_work
			WHERE task_id = $1 AND kind = 'execute' ORDER BY id DESC LIMIT 1`),
		// insertReply stores a task-less reply (a Message answering a new
		// task that was never stored) as the next seq of its task, version
		// 0, and notifies; a concurrent insert makes it insert nothing
		// (the primary key), and it tries again.
		insertReply: q(`WITH ins AS (
				INSERT INTO {s}.a2a_cluster_events (task_id, seq, version, protocol, final, event)
				SELECT $1, coalesce(max(seq), 0) + 1, 0, $2, true, $3 FROM {s}.a2a_cluster_events WHERE task_id = $1
				ON CONFLICT DO NOTHING RETURNING seq)
			SELECT seq, pg_notify($4, $5) FROM ins`),
		lastSeq: q(`SELECT coalesce(max(seq), 0) FROM {s}.a2a_cluster_events WHERE task_id = $1`),
		readReply: q(`SELECT seq, protocol, event, created_at FROM {s}.a2a_cluster_events
			WHERE task_id = $1 AND seq > $2 AND version = 0 ORDER BY seq LIMIT 1`),
		cleanWork: q(`DELETE FROM {s}.a2a_cluster_work WHERE id IN (SELECT id FROM {s}.a2a_cluster_work
			WHERE state = 'done' AND finished_at < now() - $1::interval ORDER BY finished_at LIMIT $2)`),
		// cleanReplies drops replies older than the retention window;
		// cleanLegacy the event rows of the release before the task log
		// (final or not), once as old.
		cleanReplies: q(`DELETE FROM {s}.a2a_cluster_events WHERE ctid IN (SELECT ctid FROM {s}.a2a_cluster_events
			WHERE final AND created_at < now() - $1::interval ORDER BY created_at LIMIT $2)`),
		cleanLegacy: q(`DELETE FROM {s}.a2a_cluster_events WHERE ctid IN (SELECT ctid FROM {s}.a2a_cluster_events
			WHERE NOT final AND created_at < now() - $1::interval LIMIT $2)`),
	}
}
