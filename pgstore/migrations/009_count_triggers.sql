-- a2astore migration 009: cheaper counting triggers (issue 53), for an
-- externally managed schema (pgstore.Options{ExternalSchema: true}). Run
-- it after 007_count_watermark.sql (or after 003_owner_and_counts.sql
-- alone: this file holds every counter statement, as 007 did), with psql:
--
--   psql "$DSN" -v ON_ERROR_STOP=1 -f pgstore/migrations/009_count_triggers.sql
--
-- It is written for schema public; for another schema replace "public."
-- throughout (quoted or as quote_ident writes the name). Running it again
-- is harmless (it recounts). Startup (P3) checks the function bodies and
-- the triggers and names this file when something is missing or
-- different. The managed schema (the default) runs the same statements at
-- startup.
--
-- What changes from 007 (tables, indexes, totals and recount are the same):
--
--   * The update trigger gets a WHEN condition: it fires only when id,
--     state, context_id or owner changes value. An UPDATE that sets them
--     to what they were (a Replace that keeps the state, as a task's
--     artifact update) queues no trigger event and calls no function;
--     before, it called the function, which returned at once.
--   * The update function has one IF, no early return: the WHEN has
--     already ruled out "nothing changed".
--   * The insert and delete functions append a statement of fewer than
--     64 rows in one SQL statement (the size test is the INSERT's
--     one-time filter) instead of a size query and then the INSERT.
--   * The fold deletes the rows it takes by one bitmap read of the xact
--     index (its range and the last fold's running transactions), so it
--     visits each heap page of its batch once; before, an index scan
--     collected the rows' ctids and a TID scan visited them again. It
--     takes the same rows and writes the same watermark.
--
-- Ledger rows mean what they meant: a row appended by the functions of
-- 007 and one appended by these are folded and read alike; 007's fold and
-- this one take the same rows, under the same lock, and may run on one
-- database in turn.
--
-- Mixed versions: totals stay exact in every mix (the ledgers are the
-- same; an update trigger without the WHEN, 007's, with this file's
-- function appends a move from a state to itself for an update that
-- changes nothing, which nets to zero). Upgrade order: run this file
-- while the servers of the release before run, then replace them. Do not
-- start a server of the release before afterwards: a managed one would
-- put 007's functions and trigger back (exact, as before), an external
-- one fails its startup check until 007 is run again.
--
-- Roles: as 007 says; nothing new.
--
-- One transaction, in 007's order: LOCK TABLE ... SHARE ROW EXCLUSIVE
-- first (writes wait, reads go on) until COMMIT, then the folds' advisory
-- lock, before anything locks a ledger (a server's fold holds it while it
-- reads them: taken later, it could deadlock against a fold that started
-- meanwhile), then the functions, the triggers and the recount (under
-- both locks it empties the ledgers, pending rows included, and counts
-- a2a_tasks again into the base: every write is counted once, by the
-- recount or by the new triggers).

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
SELECT pg_advisory_xact_lock(1093812563, $k$public.a2a_task_counts$k$::regclass::oid::integer);
CREATE TABLE IF NOT EXISTS public.a2a_task_count_deltas (
	shard      smallint NOT NULL,
	state      text COLLATE "C" NOT NULL,
	context_id text COLLATE "C" NOT NULL,
	owner      text COLLATE "C" NOT NULL,
	d          bigint NOT NULL,
	xact       xid8 NOT NULL DEFAULT pg_current_xact_id()
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
CREATE TABLE IF NOT EXISTS public.a2a_task_count_moves (
	shard      smallint NOT NULL,
	old_state  text COLLATE "C" NOT NULL,
	new_state  text COLLATE "C" NOT NULL,
	context_id text COLLATE "C" NOT NULL,
	owner      text COLLATE "C" NOT NULL,
	xact       xid8 NOT NULL DEFAULT pg_current_xact_id()
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);
ALTER TABLE public.a2a_task_count_deltas ADD COLUMN IF NOT EXISTS xact xid8 NOT NULL DEFAULT pg_current_xact_id();
ALTER TABLE public.a2a_task_count_moves ADD COLUMN IF NOT EXISTS xact xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS a2a_task_count_deltas_xact ON public.a2a_task_count_deltas (xact);
CREATE INDEX IF NOT EXISTS a2a_task_count_moves_xact ON public.a2a_task_count_moves (xact);
CREATE TABLE IF NOT EXISTS public.a2a_task_count_folds (
	fold    bigint PRIMARY KEY,
	upto    xid8 NOT NULL,
	running xid8[] NOT NULL
);
CREATE OR REPLACE FUNCTION public.a2a_task_counts_on_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
	zk smallint[];
	zn text[];
	zs text[];
	zh smallint[];
BEGIN
	INSERT INTO public.a2a_task_count_deltas (shard, state, context_id, owner, d)
	SELECT 0::smallint, state, context_id, owner, count(*)
	FROM new_rows WHERE (SELECT count(*) FROM (SELECT FROM new_rows LIMIT 64) AS b) < 64
	GROUP BY 1, 2, 3, 4;
	IF FOUND THEN
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
	INSERT INTO public.a2a_task_count_deltas (shard, state, context_id, owner, d)
	SELECT 0::smallint, state, context_id, owner, -count(*)
	FROM old_rows WHERE (SELECT count(*) FROM (SELECT FROM old_rows LIMIT 64) AS b) < 64
	GROUP BY 1, 2, 3, 4;
	IF FOUND THEN
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
		INSERT INTO public.a2a_task_count_moves (shard, old_state, new_state, context_id, owner) VALUES
			(0::smallint, OLD.state, NEW.state, NEW.context_id, NEW.owner);
	ELSE
		INSERT INTO public.a2a_task_count_deltas (shard, state, context_id, owner, d) VALUES
			(0::smallint, OLD.state, OLD.context_id, OLD.owner, -1),
			(0::smallint, NEW.state, NEW.context_id, NEW.owner, 1);
	END IF;
	RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_task_counts_on_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	PERFORM pg_advisory_xact_lock(1093812563, $k$public.a2a_task_counts$k$::regclass::oid::integer);
	TRUNCATE public.a2a_task_counts, public.a2a_task_count_deltas, public.a2a_task_count_moves;
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
	seqscan text := current_setting('enable_seqscan');
	prev bigint := 0;
	old_upto xid8 := '0';
	old_running xid8[] := '{}';
	snap pg_snapshot;
	new_upto xid8;
	new_running xid8[];
BEGIN
	IF NOT pg_try_advisory_xact_lock(1093812563, $k$public.a2a_task_counts$k$::regclass::oid::integer) THEN
		RETURN -1;
	END IF;
	PERFORM set_config('enable_seqscan', 'off', true);
	SELECT f.fold, f.upto, f.running INTO prev, old_upto, old_running FROM public.a2a_task_count_folds AS f ORDER BY f.fold DESC LIMIT 1;
	IF NOT FOUND THEN
		prev := 0;
		old_upto := '0';
		old_running := '{}';
	END IF;
	snap := pg_current_snapshot();
	new_upto := least(pg_snapshot_xmax(snap),
		(SELECT (l.xact::text::bigint + 1)::text::xid8 FROM public.a2a_task_count_deltas AS l
		 WHERE l.xact >= old_upto ORDER BY l.xact OFFSET 10000 - 1 LIMIT 1),
		(SELECT (l.xact::text::bigint + 1)::text::xid8 FROM public.a2a_task_count_moves AS l
		 WHERE l.xact >= old_upto ORDER BY l.xact OFFSET 10000 - 1 LIMIT 1));
	SELECT coalesce(array_agg(x ORDER BY x), '{}') INTO new_running FROM (SELECT pg_snapshot_xip(snap) UNION SELECT pg_current_xact_id_if_assigned()) AS r (x) WHERE x < new_upto;
	WITH gone AS (
		DELETE FROM public.a2a_task_count_deltas AS l
		WHERE (l.xact >= old_upto AND l.xact < new_upto OR l.xact = ANY (old_running)) AND l.xact <> ALL (new_running)
		RETURNING shard, state, context_id, owner, d
	), moved AS (
		DELETE FROM public.a2a_task_count_moves AS l
		WHERE (l.xact >= old_upto AND l.xact < new_upto OR l.xact = ANY (old_running)) AND l.xact <> ALL (new_running)
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
	IF folded > 0 OR new_running <> old_running THEN
		INSERT INTO public.a2a_task_count_folds (fold, upto, running) VALUES (prev + 1, new_upto, new_running);
		DELETE FROM public.a2a_task_count_folds WHERE fold = prev;
	END IF;
	PERFORM set_config('enable_seqscan', seqscan, true);
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
CREATE OR REPLACE TRIGGER a2a_task_counts_update AFTER UPDATE OF id, state, context_id, owner ON public.a2a_tasks FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.state IS DISTINCT FROM NEW.state OR OLD.context_id IS DISTINCT FROM NEW.context_id OR OLD.owner IS DISTINCT FROM NEW.owner) EXECUTE FUNCTION public.a2a_task_counts_on_update();
CREATE OR REPLACE TRIGGER a2a_task_counts_truncate AFTER TRUNCATE ON public.a2a_tasks FOR EACH STATEMENT EXECUTE FUNCTION public.a2a_task_counts_on_truncate();
SELECT public.a2a_task_counts_rebuild();
COMMIT;
