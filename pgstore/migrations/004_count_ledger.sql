-- a2astore migration 004: the task counters as an insert-only delta ledger
-- (issue 20), for an externally managed schema (pgstore.Options
-- {ExternalSchema: true}). Run it after 003_owner_and_counts.sql, with psql:
--
--   psql "$DSN" -v ON_ERROR_STOP=1 -f pgstore/migrations/004_count_ledger.sql
--
-- It is written for schema public; for another schema replace "public."
-- throughout (quoted or as quote_ident writes the name). Running it again is
-- harmless (it recounts). Startup (P3) checks the tables, the function bodies
-- and the triggers, and names this file when something is missing or
-- different. The managed schema (the default) runs the same statements at
-- startup.
--
-- What changes: the triggers no longer update a2a_task_counts in the
-- writer's transaction; they append signed deltas to a2a_task_count_deltas
-- (no row lock, no upsert), a change of state alone as one row (old and
-- new state) to a second ledger, a2a_task_count_moves, that only totals
-- by state read — but for a statement inserting or deleting 64 rows or
-- more (a bulk load, a retention batch), whose counts go to
-- a2a_task_counts at once, so that no total scans a ledger it left — and
-- with one counter row per (kind, name, state), shard 0, where earlier
-- versions of this file kept 16 shards that the fold could not net and one
-- ledger (issue 31; a database that ran an earlier version of this file
-- runs it again, and its counters are recounted). A total reads
-- a2a_task_counts plus the pending deltas in one snapshot, so it stays
-- exact. The servers' roll-up service (or SELECT
-- public.a2a_task_counts_fold(), repeated while it returns 10000 or more)
-- folds the ledgers into a2a_task_counts, one transaction each. Servers of
-- releases before this one read a2a_task_counts alone, or one ledger:
-- their totals would miss pending deltas, and a managed server of such a
-- release would reinstall its own triggers. Upgrade every server at once.
--
-- Roles that write a2a_tasks need INSERT on a2a_task_count_deltas and
-- a2a_task_count_moves (the triggers run as them), SELECT, INSERT,
-- UPDATE, DELETE on a2a_task_counts for statements of 64 rows or more,
-- and DELETE on both ledgers for TRUNCATE; the servers' role
-- needs SELECT on the three tables (a total by state reads the moves
-- ledger) and, to fold, DELETE on both ledgers and all four on
-- a2a_task_counts.
--
-- One transaction. LOCK TABLE ... SHARE ROW EXCLUSIVE comes first (writes
-- wait, reads go on) and holds until COMMIT, for one scan of a2a_tasks (the
-- recount): every write is counted exactly once, either by the recount or
-- by the new triggers.

BEGIN;
LOCK TABLE public.a2a_tasks IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE IF NOT EXISTS public.a2a_task_counts (
	kind  smallint NOT NULL,
	name  text COLLATE "C" NOT NULL,
	state text COLLATE "C" NOT NULL,
	shard smallint NOT NULL,
	n     bigint NOT NULL,
	PRIMARY KEY (kind, name, state, shard)
) WITH (fillfactor = 50);
CREATE TABLE IF NOT EXISTS public.a2a_task_count_deltas (
	shard      smallint NOT NULL,
	state      text COLLATE "C" NOT NULL,
	context_id text COLLATE "C" NOT NULL,
	owner      text COLLATE "C" NOT NULL,
	d          bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
CREATE TABLE IF NOT EXISTS public.a2a_task_count_moves (
	shard      smallint NOT NULL,
	old_state  text COLLATE "C" NOT NULL,
	new_state  text COLLATE "C" NOT NULL,
	context_id text COLLATE "C" NOT NULL,
	owner      text COLLATE "C" NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
CREATE OR REPLACE FUNCTION public.a2a_task_counts_on_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
	zk smallint[];
	zn text[];
	zs text[];
	zh smallint[];
BEGIN
	IF (SELECT count(*) FROM (SELECT FROM new_rows LIMIT 64) AS b) < 64 THEN
		INSERT INTO public.a2a_task_count_deltas (shard, state, context_id, owner, d)
		SELECT 0::smallint, state, context_id, owner, count(*)
		FROM new_rows GROUP BY 1, 2, 3, 4;
		RETURN NULL;
	END IF;
	WITH g AS (
		SELECT 0::smallint AS shard, state, context_id, owner, count(*) AS d
		FROM new_rows GROUP BY 1, 2, 3, 4
	), up AS (
		INSERT INTO public.a2a_task_counts AS c (kind, name, state, shard, n)
		SELECT kind, name, state, shard, sum(d) FROM (
			SELECT k.kind, k.name, r.state, r.shard, r.d
			FROM g AS r
			CROSS JOIN LATERAL (VALUES (0::smallint, ''::text), (1::smallint, r.context_id), (2::smallint, r.owner),
				(3::smallint, CASE WHEN r.owner <> '' AND r.context_id <> '' THEN octet_length(r.owner)::text || ':' || r.owner || r.context_id ELSE '' END)) AS k (kind, name)
			WHERE k.kind = 0 OR k.name <> ''
		) AS delta (kind, name, state, shard, d)
		GROUP BY kind, name, state, shard
		HAVING sum(d) <> 0
		ORDER BY kind, name COLLATE "C", state COLLATE "C", shard
		ON CONFLICT (kind, name, state, shard) DO UPDATE SET n = c.n + excluded.n
		RETURNING kind, name, state, shard, n)
	SELECT array_agg(kind), array_agg(name), array_agg(state), array_agg(shard)
	INTO zk, zn, zs, zh
	FROM up WHERE kind > 0 AND n = 0;
	IF zk IS NOT NULL THEN
		DELETE FROM public.a2a_task_counts c
		USING unnest(zk, zn, zs, zh) AS z (kind, name, state, shard)
		WHERE c.kind = z.kind AND c.name = z.name AND c.state = z.state AND c.shard = z.shard AND c.n = 0;
	END IF;
	RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_task_counts_on_delete() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
	zk smallint[];
	zn text[];
	zs text[];
	zh smallint[];
BEGIN
	IF (SELECT count(*) FROM (SELECT FROM old_rows LIMIT 64) AS b) < 64 THEN
		INSERT INTO public.a2a_task_count_deltas (shard, state, context_id, owner, d)
		SELECT 0::smallint, state, context_id, owner, -count(*)
		FROM old_rows GROUP BY 1, 2, 3, 4;
		RETURN NULL;
	END IF;
	WITH g AS (
		SELECT 0::smallint AS shard, state, context_id, owner, -count(*) AS d
		FROM old_rows GROUP BY 1, 2, 3, 4
	), up AS (
		INSERT INTO public.a2a_task_counts AS c (kind, name, state, shard, n)
		SELECT kind, name, state, shard, sum(d) FROM (
			SELECT k.kind, k.name, r.state, r.shard, r.d
			FROM g AS r
			CROSS JOIN LATERAL (VALUES (0::smallint, ''::text), (1::smallint, r.context_id), (2::smallint, r.owner),
				(3::smallint, CASE WHEN r.owner <> '' AND r.context_id <> '' THEN octet_length(r.owner)::text || ':' || r.owner || r.context_id ELSE '' END)) AS k (kind, name)
			WHERE k.kind = 0 OR k.name <> ''
		) AS delta (kind, name, state, shard, d)
		GROUP BY kind, name, state, shard
		HAVING sum(d) <> 0
		ORDER BY kind, name COLLATE "C", state COLLATE "C", shard
		ON CONFLICT (kind, name, state, shard) DO UPDATE SET n = c.n + excluded.n
		RETURNING kind, name, state, shard, n)
	SELECT array_agg(kind), array_agg(name), array_agg(state), array_agg(shard)
	INTO zk, zn, zs, zh
	FROM up WHERE kind > 0 AND n = 0;
	IF zk IS NOT NULL THEN
		DELETE FROM public.a2a_task_counts c
		USING unnest(zk, zn, zs, zh) AS z (kind, name, state, shard)
		WHERE c.kind = z.kind AND c.name = z.name AND c.state = z.state AND c.shard = z.shard AND c.n = 0;
	END IF;
	RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_task_counts_on_update() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	IF OLD.context_id IS NOT DISTINCT FROM NEW.context_id AND OLD.owner IS NOT DISTINCT FROM NEW.owner
			AND OLD.id IS NOT DISTINCT FROM NEW.id THEN
		IF OLD.state IS NOT DISTINCT FROM NEW.state THEN
			RETURN NULL;
		END IF;
		INSERT INTO public.a2a_task_count_moves (shard, old_state, new_state, context_id, owner) VALUES
			(0::smallint, OLD.state, NEW.state, NEW.context_id, NEW.owner);
		RETURN NULL;
	END IF;
	INSERT INTO public.a2a_task_count_deltas (shard, state, context_id, owner, d) VALUES
		(0::smallint, OLD.state, OLD.context_id, OLD.owner, -1),
		(0::smallint, NEW.state, NEW.context_id, NEW.owner, 1);
	RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_task_counts_on_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM pg_advisory_xact_lock(1093812563, $k$public.a2a_task_counts$k$::regclass::oid::integer);
	DELETE FROM public.a2a_task_counts;
	DELETE FROM public.a2a_task_count_deltas;
	DELETE FROM public.a2a_task_count_moves;
	RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_task_counts_fold() RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
	zk smallint[];
	zn text[];
	zs text[];
	zh smallint[];
	folded bigint;
BEGIN
	IF NOT pg_try_advisory_xact_lock(1093812563, $k$public.a2a_task_counts$k$::regclass::oid::integer) THEN
		RETURN -1;
	END IF;
	WITH gone AS (
		DELETE FROM public.a2a_task_count_deltas
		WHERE ctid = ANY (ARRAY(SELECT ctid FROM public.a2a_task_count_deltas LIMIT 10000))
		RETURNING shard, state, context_id, owner, d
	), moved AS (
		DELETE FROM public.a2a_task_count_moves
		WHERE ctid = ANY (ARRAY(SELECT ctid FROM public.a2a_task_count_moves LIMIT 10000))
		RETURNING shard, old_state, new_state, context_id, owner
	), net AS (
		SELECT shard, state, context_id, owner, sum(d) AS d
		FROM (SELECT * FROM gone UNION ALL SELECT m.shard, v.state, m.context_id, m.owner, v.d FROM moved AS m CROSS JOIN LATERAL (VALUES (m.old_state, -1::bigint), (m.new_state, 1::bigint)) AS v (state, d)) AS g
		GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0
	), up AS (
		INSERT INTO public.a2a_task_counts AS c (kind, name, state, shard, n)
		SELECT kind, name, state, shard, sum(d) FROM (
			SELECT k.kind, k.name, r.state, r.shard, r.d
			FROM net AS r
			CROSS JOIN LATERAL (VALUES (0::smallint, ''::text), (1::smallint, r.context_id), (2::smallint, r.owner),
				(3::smallint, CASE WHEN r.owner <> '' AND r.context_id <> '' THEN octet_length(r.owner)::text || ':' || r.owner || r.context_id ELSE '' END)) AS k (kind, name)
			WHERE k.kind = 0 OR k.name <> ''
		) AS delta (kind, name, state, shard, d)
		GROUP BY kind, name, state, shard
		HAVING sum(d) <> 0
		ORDER BY kind, name COLLATE "C", state COLLATE "C", shard
		ON CONFLICT (kind, name, state, shard) DO UPDATE SET n = c.n + excluded.n
		RETURNING kind, name, state, shard, n)
	SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM moved), array_agg(kind), array_agg(name), array_agg(state), array_agg(shard)
	INTO folded, zk, zn, zs, zh
	FROM up WHERE kind > 0 AND n = 0;
	IF zk IS NOT NULL THEN
		DELETE FROM public.a2a_task_counts c
		USING unnest(zk, zn, zs, zh) AS z (kind, name, state, shard)
		WHERE c.kind = z.kind AND c.name = z.name AND c.state = z.state AND c.shard = z.shard AND c.n = 0;
	END IF;
	RETURN folded;
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_task_counts_rebuild() RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
	LOCK TABLE public.a2a_tasks IN SHARE ROW EXCLUSIVE MODE;
	PERFORM pg_advisory_xact_lock(1093812563, $k$public.a2a_task_counts$k$::regclass::oid::integer);
	DELETE FROM public.a2a_task_counts;
	DELETE FROM public.a2a_task_count_deltas;
	DELETE FROM public.a2a_task_count_moves;
	INSERT INTO public.a2a_task_counts (kind, name, state, shard, n)
	SELECT kind, name, state, shard, n FROM (
	SELECT CASE WHEN grouping(context_id) = 0 AND grouping(owner) = 0 THEN 3
			WHEN grouping(context_id) = 0 THEN 1 WHEN grouping(owner) = 0 THEN 2 ELSE 0 END::smallint AS kind,
		CASE WHEN grouping(context_id) = 0 AND grouping(owner) = 0 THEN CASE WHEN owner <> '' AND context_id <> '' THEN octet_length(owner)::text || ':' || owner || context_id ELSE '' END
			WHEN grouping(context_id) = 0 THEN context_id WHEN grouping(owner) = 0 THEN owner ELSE '' END COLLATE "C" AS name,
		state COLLATE "C" AS state, shard, count(*) AS n
	FROM (SELECT context_id, owner, state, 0::smallint AS shard FROM public.a2a_tasks) AS t
	GROUP BY GROUPING SETS ((state, shard), (context_id, state, shard), (owner, state, shard), (owner, context_id, state, shard))
	) AS g
	WHERE kind = 0 OR name <> '';
END
$fn$;
CREATE OR REPLACE TRIGGER a2a_task_counts_insert AFTER INSERT ON public.a2a_tasks REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.a2a_task_counts_on_insert();
CREATE OR REPLACE TRIGGER a2a_task_counts_delete AFTER DELETE ON public.a2a_tasks REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.a2a_task_counts_on_delete();
CREATE OR REPLACE TRIGGER a2a_task_counts_update AFTER UPDATE OF id, state, context_id, owner ON public.a2a_tasks FOR EACH ROW EXECUTE FUNCTION public.a2a_task_counts_on_update();
CREATE OR REPLACE TRIGGER a2a_task_counts_truncate AFTER TRUNCATE ON public.a2a_tasks FOR EACH STATEMENT EXECUTE FUNCTION public.a2a_task_counts_on_truncate();
SELECT public.a2a_task_counts_rebuild();
COMMIT;
