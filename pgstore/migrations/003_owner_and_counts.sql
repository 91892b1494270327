-- a2astore migration 003: task owners (issue 15) and exact task counts
-- (issue 11), for an externally managed schema (pgstore.Options
-- {ExternalSchema: true}). Run it after 001_ordering_indexes.sql (it needs
-- nothing else; 002 is issue 12's), with psql:
--
--   psql "$DSN" -v ON_ERROR_STOP=1 -f pgstore/migrations/003_owner_and_counts.sql
--
-- It is written for schema public; for another schema replace "public."
-- throughout (quoted or as quote_ident writes the name). Running it again is
-- harmless: every statement creates only what is missing or replaces a
-- function with the same text, and the owner backfill runs only in the
-- transaction that adds the column. Startup (P3) checks all of it — the
-- column, both indexes by definition, the counter table, the function
-- bodies and the triggers (their events, no WHEN condition, enabled as
-- CREATE TRIGGER enables them or ENABLE ALWAYS) — and names this file when
-- something is missing or different.
-- The managed schema (the default) runs the same statements at startup.
--
-- Roles that write a2a_tasks need SELECT, INSERT, UPDATE and DELETE on
-- a2a_task_counts as well: the triggers run as the writing role.
--
-- Three steps, each its own transaction. Locks on a2a_tasks:
--
-- 1. The owner column (text NOT NULL DEFAULT '': '' is "no owner"). ALTER
--    TABLE ... ADD COLUMN takes ACCESS EXCLUSIVE (reads and writes wait)
--    until COMMIT. Adding a column with a constant default is instant, but
--    the same transaction copies owners recorded in task metadata (where
--    engine/authz's OwnerPolicy kept them before this column existed) into
--    the column, so the lock lasts for one scan of the table plus an update
--    of each such row. Stop servers of older releases that create tasks
--    through OwnerPolicy before running it: tasks they create afterwards
--    get no owner. Metadata is left as it is. The a2a_taskcodec_* functions
--    read taskcodec's binary metadata form.
--
--    THE BACKFILL'S KEY. The owner is copied from metadata key
--    "a2astore.owner", OwnerPolicy's default. Only the key OwnerPolicy
--    wrote may be trusted: any other key was ordinary metadata a client
--    could set. If your OwnerPolicy used another key (its former
--    MetadataKey option, e.g. "tenant"), "a2astore.owner" was client
--    metadata and copying it would give a task to whoever the client
--    named: name your key instead. If no OwnerPolicy kept owners in
--    metadata, turn the backfill off (''). Either run the file with
--
--      PGOPTIONS='-c a2astore.upgrade_owner_key=tenant' psql ...   (or =)
--
--    or edit the set_config line before the DO block below. (A managed
--    schema takes pgstore.Options.UpgradeOwnerKey / UpgradeWithoutOwners.)
-- 2. The owner ordering indexes. CREATE INDEX takes SHARE (writes wait,
--    reads go on) while each index is built. To build them without
--    blocking writes, first run the same two statements with CREATE INDEX
--    CONCURRENTLY (outside a transaction; drop an index left INVALID by a
--    failed attempt and run it again): these then do nothing.
-- 3. The task counters: table a2a_task_counts, its trigger functions and
--    triggers on a2a_tasks, and a recount of every counter. LOCK TABLE ...
--    SHARE ROW EXCLUSIVE comes first (writes wait, reads go on) and holds
--    until COMMIT, so that every write is counted exactly once: either it
--    committed before the recount, or it runs after COMMIT and its trigger
--    counts it. The lock lasts for one scan of a2a_tasks. Writers of older
--    releases keep working afterwards, and the triggers count their writes
--    too.

-- Step 1: the owner column and its one-time backfill.
BEGIN;
CREATE OR REPLACE FUNCTION public.a2a_taskcodec_uvarint(b bytea, INOUT pos integer, OUT v bigint)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
-- The unsigned varint at byte offset pos (0-based) of b: v is its value and
-- pos the offset after it. v is -1 when the varint is malformed or larger
-- than the number of bytes that follow it (every length or count in
-- taskcodec's form is bounded so).
DECLARE
	shift integer := 0;
	c integer;
BEGIN
	v := 0;
	LOOP
		IF pos >= length(b) OR shift > 63 THEN
			v := -1;
			RETURN;
		END IF;
		c := get_byte(b, pos);
		pos := pos + 1;
		v := v | ((c & 127)::bigint << shift);
		EXIT WHEN c < 128;
		shift := shift + 7;
	END LOOP;
	IF v < 0 OR v > length(b) - pos THEN
		v := -1;
	END IF;
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_taskcodec_text(b bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
-- b as text when it is valid UTF-8 without NUL (what text can hold), else
-- NULL, without raising an error.
DECLARE
	i integer := 0;
	c integer;
	need integer;
	lo integer;
	hi integer;
BEGIN
	WHILE i < length(b) LOOP
		c := get_byte(b, i);
		i := i + 1;
		CONTINUE WHEN c BETWEEN 1 AND 127;
		-- The lead byte fixes the length and the range of the second byte
		-- (no overlong forms, surrogates or code points above U+10FFFF).
		lo := 128;
		hi := 191;
		CASE
		WHEN c BETWEEN 194 AND 223 THEN need := 1;
		WHEN c = 224 THEN need := 2; lo := 160;
		WHEN c = 237 THEN need := 2; hi := 159;
		WHEN c BETWEEN 225 AND 239 THEN need := 2;
		WHEN c = 240 THEN need := 3; lo := 144;
		WHEN c BETWEEN 241 AND 243 THEN need := 3;
		WHEN c = 244 THEN need := 3; hi := 143;
		ELSE RETURN NULL; -- NUL, a continuation byte, or an invalid lead byte
		END CASE;
		IF i + need > length(b) THEN
			RETURN NULL;
		END IF;
		FOR k IN 1..need LOOP
			c := get_byte(b, i);
			IF c < lo OR c > hi THEN
				RETURN NULL;
			END IF;
			lo := 128;
			hi := 191;
			i := i + 1;
		END LOOP;
	END LOOP;
	RETURN convert_from(b, 'UTF8');
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_taskcodec_metadata_string(meta bytea, field text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
-- The string value of the top-level key field in task metadata stored in
-- taskcodec's binary form (the metadata column); NULL when the key is
-- missing, its value is not a string, the string is not valid UTF-8 or has
-- NUL, or meta is not a well-formed metadata object (as Go's
-- taskcodec.DecodeMetadata would refuse it). The form: a version byte (1),
-- then a value: a kind byte and its payload — 0 null, 1 false, 2 true,
-- 3 number (8 bytes, a little-endian IEEE float64, finite), 4 string
-- (uvarint length, bytes), 5 array (uvarint count, values), 6 object
-- (uvarint count, then per entry a key string without kind byte and a
-- value). A key that appears twice counts with its last value.
DECLARE
	want bytea := convert_to(field, 'UTF8');
	pos integer := 2;
	todo bigint[]; -- values left to read in each open array or object
	isobj boolean[];
	top integer := 1;
	mine boolean;
	found bytea;
	kind integer;
	v bigint;
BEGIN
	IF length(meta) < 2 OR get_byte(meta, 0) <> 1 OR get_byte(meta, 1) <> 6 THEN
		RETURN NULL;
	END IF;
	SELECT * INTO pos, v FROM public.a2a_taskcodec_uvarint(meta, pos);
	IF v < 0 THEN
		RETURN NULL;
	END IF;
	todo := ARRAY[v];
	isobj := ARRAY[true];
	WHILE top > 0 LOOP
		IF todo[top] = 0 THEN
			top := top - 1;
			CONTINUE;
		END IF;
		todo[top] := todo[top] - 1;
		mine := false;
		IF isobj[top] THEN
			SELECT * INTO pos, v FROM public.a2a_taskcodec_uvarint(meta, pos);
			IF v < 0 THEN
				RETURN NULL;
			END IF;
			mine := top = 1 AND substring(meta FROM pos + 1 FOR v::integer) = want;
			pos := pos + v::integer;
			IF mine THEN
				found := NULL;
			END IF;
		END IF;
		IF pos >= length(meta) THEN
			RETURN NULL;
		END IF;
		kind := get_byte(meta, pos);
		pos := pos + 1;
		CASE
		WHEN kind <= 2 THEN
			NULL;
		WHEN kind = 3 THEN
			IF pos + 8 > length(meta) OR (get_byte(meta, pos + 7) & 127 = 127 AND get_byte(meta, pos + 6) & 240 = 240) THEN
				RETURN NULL;
			END IF;
			pos := pos + 8;
		WHEN kind = 4 THEN
			SELECT * INTO pos, v FROM public.a2a_taskcodec_uvarint(meta, pos);
			IF v < 0 THEN
				RETURN NULL;
			END IF;
			IF mine THEN
				found := substring(meta FROM pos + 1 FOR v::integer);
			END IF;
			pos := pos + v::integer;
		WHEN kind IN (5, 6) THEN
			SELECT * INTO pos, v FROM public.a2a_taskcodec_uvarint(meta, pos);
			IF v < 0 THEN
				RETURN NULL;
			END IF;
			top := top + 1;
			todo[top] := v;
			isobj[top] := kind = 6;
		ELSE
			RETURN NULL;
		END CASE;
	END LOOP;
	IF pos <> length(meta) THEN
		RETURN NULL;
	END IF;
	RETURN public.a2a_taskcodec_text(found);
END
$fn$;
-- The metadata key of the owner backfill (see above): 'a2astore.owner'
-- unless the session set a2astore.upgrade_owner_key (PGOPTIONS). To use
-- another key, edit 'a2astore.owner' on the next line, or set it to '' for
-- no backfill.
SELECT set_config('a2astore.upgrade_owner_key', coalesce(current_setting('a2astore.upgrade_owner_key', true), 'a2astore.owner'), true);
DO $do$
DECLARE
	k text := current_setting('a2astore.upgrade_owner_key', true); -- the metadata key; '' or NULL: none
BEGIN
	IF NOT EXISTS (SELECT FROM pg_attribute
	               WHERE attrelid = 'public.a2a_tasks'::regclass AND attname = 'owner' AND NOT attisdropped) THEN
		ALTER TABLE public.a2a_tasks ADD COLUMN owner text NOT NULL DEFAULT '';
		IF k <> '' THEN
			UPDATE public.a2a_tasks AS t SET owner = m.owner
			FROM (SELECT id, public.a2a_taskcodec_metadata_string(metadata, k) AS owner
			      FROM public.a2a_tasks
			      WHERE position(convert_to(k, 'UTF8') IN metadata) > 0) AS m
			WHERE t.id = m.id AND octet_length(m.owner) BETWEEN 1 AND 1024;
		END IF;
	END IF;
END
$do$;
COMMIT;

-- Step 2: the owner ordering indexes.
CREATE INDEX IF NOT EXISTS idx_a2a_tasks_owner_updated
  ON public.a2a_tasks (owner, updated_at DESC, id COLLATE "C" DESC);
CREATE INDEX IF NOT EXISTS idx_a2a_tasks_owner_context_updated
  ON public.a2a_tasks (owner, context_id, updated_at DESC, id COLLATE "C" DESC);

-- Step 3: the task counters.
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
CREATE OR REPLACE FUNCTION public.a2a_task_counts_on_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
	zk smallint[];
	zn text[];
	zs text[];
	zh smallint[];
BEGIN
	WITH up AS (
		INSERT INTO public.a2a_task_counts AS c (kind, name, state, shard, n)
		SELECT kind, name, state, shard, sum(d) FROM (
			SELECT k.kind, k.name, r.state, r.shard, 1
			FROM (SELECT state, context_id, owner, ((hashtext(id) & 2147483647) % 16)::smallint AS shard FROM new_rows) AS r
			CROSS JOIN LATERAL (VALUES (0::smallint, ''::text), (1::smallint, r.context_id), (2::smallint, r.owner),
				(3::smallint, CASE WHEN r.owner <> '' AND r.context_id <> '' THEN octet_length(r.owner)::text || ':' || r.owner || r.context_id ELSE '' END)) AS k (kind, name)) AS delta (kind, name, state, shard, d)
		WHERE kind = 0 OR name <> ''
		GROUP BY kind, name, state, shard
		HAVING sum(d) <> 0
		ORDER BY kind, name COLLATE "C", state COLLATE "C", shard
		ON CONFLICT (kind, name, state, shard) DO UPDATE SET n = c.n + excluded.n
		RETURNING kind, name, state, shard, n)
	SELECT array_agg(kind), array_agg(name), array_agg(state), array_agg(shard) INTO zk, zn, zs, zh
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
	WITH up AS (
		INSERT INTO public.a2a_task_counts AS c (kind, name, state, shard, n)
		SELECT kind, name, state, shard, sum(d) FROM (
			SELECT k.kind, k.name, r.state, r.shard, -1
			FROM (SELECT state, context_id, owner, ((hashtext(id) & 2147483647) % 16)::smallint AS shard FROM old_rows) AS r
			CROSS JOIN LATERAL (VALUES (0::smallint, ''::text), (1::smallint, r.context_id), (2::smallint, r.owner),
				(3::smallint, CASE WHEN r.owner <> '' AND r.context_id <> '' THEN octet_length(r.owner)::text || ':' || r.owner || r.context_id ELSE '' END)) AS k (kind, name)) AS delta (kind, name, state, shard, d)
		WHERE kind = 0 OR name <> ''
		GROUP BY kind, name, state, shard
		HAVING sum(d) <> 0
		ORDER BY kind, name COLLATE "C", state COLLATE "C", shard
		ON CONFLICT (kind, name, state, shard) DO UPDATE SET n = c.n + excluded.n
		RETURNING kind, name, state, shard, n)
	SELECT array_agg(kind), array_agg(name), array_agg(state), array_agg(shard) INTO zk, zn, zs, zh
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
DECLARE
	zk smallint[];
	zn text[];
	zs text[];
	zh smallint[];
	old_shard smallint := ((hashtext(OLD.id) & 2147483647) % 16)::smallint;
	new_shard smallint := ((hashtext(NEW.id) & 2147483647) % 16)::smallint;
BEGIN
	IF OLD.state IS NOT DISTINCT FROM NEW.state AND OLD.context_id IS NOT DISTINCT FROM NEW.context_id
			AND OLD.owner IS NOT DISTINCT FROM NEW.owner AND OLD.id IS NOT DISTINCT FROM NEW.id THEN
		RETURN NULL;
	END IF;
	WITH up AS (
		INSERT INTO public.a2a_task_counts AS c (kind, name, state, shard, n)
		SELECT kind, name, state, shard, sum(d) FROM (VALUES
			(0::smallint, ''::text, OLD.state, old_shard, -1), (0::smallint, ''::text, NEW.state, new_shard, 1),
			(1::smallint, OLD.context_id, OLD.state, old_shard, -1), (1::smallint, NEW.context_id, NEW.state, new_shard, 1),
			(2::smallint, OLD.owner, OLD.state, old_shard, -1), (2::smallint, NEW.owner, NEW.state, new_shard, 1),
			(3::smallint, CASE WHEN OLD.owner <> '' AND OLD.context_id <> '' THEN octet_length(OLD.owner)::text || ':' || OLD.owner || OLD.context_id ELSE '' END, OLD.state, old_shard, -1),
			(3::smallint, CASE WHEN NEW.owner <> '' AND NEW.context_id <> '' THEN octet_length(NEW.owner)::text || ':' || NEW.owner || NEW.context_id ELSE '' END, NEW.state, new_shard, 1)) AS delta (kind, name, state, shard, d)
		WHERE kind = 0 OR name <> ''
		GROUP BY kind, name, state, shard
		HAVING sum(d) <> 0
		ORDER BY kind, name COLLATE "C", state COLLATE "C", shard
		ON CONFLICT (kind, name, state, shard) DO UPDATE SET n = c.n + excluded.n
		RETURNING kind, name, state, shard, n)
	SELECT array_agg(kind), array_agg(name), array_agg(state), array_agg(shard) INTO zk, zn, zs, zh
	FROM up WHERE kind > 0 AND n = 0;
	IF zk IS NOT NULL THEN
		DELETE FROM public.a2a_task_counts c
		USING unnest(zk, zn, zs, zh) AS z (kind, name, state, shard)
		WHERE c.kind = z.kind AND c.name = z.name AND c.state = z.state AND c.shard = z.shard AND c.n = 0;
	END IF;
	RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_task_counts_on_truncate() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
	DELETE FROM public.a2a_task_counts;
	RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION public.a2a_task_counts_rebuild() RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
	LOCK TABLE public.a2a_tasks IN SHARE ROW EXCLUSIVE MODE;
	DELETE FROM public.a2a_task_counts;
	INSERT INTO public.a2a_task_counts (kind, name, state, shard, n)
	SELECT kind, name, state, shard, n FROM (
	SELECT CASE WHEN grouping(context_id) = 0 AND grouping(owner) = 0 THEN 3
			WHEN grouping(context_id) = 0 THEN 1 WHEN grouping(owner) = 0 THEN 2 ELSE 0 END::smallint AS kind,
		CASE WHEN grouping(context_id) = 0 AND grouping(owner) = 0 THEN CASE WHEN owner <> '' AND context_id <> '' THEN octet_length(owner)::text || ':' || owner || context_id ELSE '' END
			WHEN grouping(context_id) = 0 THEN context_id WHEN grouping(owner) = 0 THEN owner ELSE '' END COLLATE "C" AS name,
		state COLLATE "C" AS state, shard, count(*) AS n
	FROM (SELECT context_id, owner, state, ((hashtext(id) & 2147483647) % 16)::smallint AS shard FROM public.a2a_tasks) AS t
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
