package pgstore

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
)

// Task owners (O1–O6) live in a column of a2a_tasks:
//
//	owner text NOT NULL DEFAULT ''
//
// '' is "no owner" (engine.Record.Owner's zero value), so rows written by
// code that does not know the column — an older release, hand-written SQL
// — are ownerless rather than NULL, and no filter ever needs IS NULL. Two
// btree indexes serve owner-filtered pages without a sort:
//
//	idx_a2a_tasks_owner_updated         (owner, updated_at DESC, id COLLATE "C" DESC)
//	idx_a2a_tasks_owner_context_updated (owner, context_id, updated_at DESC, id COLLATE "C" DESC)
//
// The second makes an owner+context page read only that owner's tasks in
// that context, however many tasks other owners have there (O6); its total
// comes from the counters (counts.go).
//
// Before this column existed, engine/authz's OwnerPolicy recorded the
// owner in task metadata, under "a2astore.owner" by default or under the
// key its former MetadataKey option named. When the column is added — by
// the managed schema on first startup, or by the migration file — the
// same transaction copies the string value of one metadata key into the
// column for every row that has it (a string of 1..MaxOwnerBytes bytes,
// valid UTF-8 without NUL; other values leave the row ownerless): the key
// is Options.UpgradeOwnerKey (default "a2astore.owner"), and with
// Options.UpgradeWithoutOwners nothing is copied. The migration file reads
// the key from the setting a2astore.upgrade_owner_key (see its header).
// Only the key OwnerPolicy itself wrote may be trusted: any other metadata
// key was the client's, so a deployment that used another key must name
// it, and one that never kept owners in metadata must turn the backfill
// off. It runs only then, never again: after the upgrade, metadata is the
// client's and a task's owner is whatever CreateOwned recorded. The
// metadata itself is left as it is. Metadata is stored in taskcodec's
// binary form (bytea), so the copy is done by a PL/pgSQL reader of that
// form, a2a_taskcodec_metadata_string(metadata, key), installed beside the
// table (with its helpers a2a_taskcodec_uvarint and a2a_taskcodec_text).

// defaultUpgradeOwnerKey is the metadata key where engine/authz's
// OwnerPolicy kept owners by default before owners had a column (pgstore
// does not import the dispatcher).
const defaultUpgradeOwnerKey = "a2astore.owner"

// upgradeOwnerKeySetting is the (transaction-local) setting the owner
// backfill reads its metadata key from: "" or unset = no backfill.
const upgradeOwnerKeySetting = "a2astore.upgrade_owner_key"

// upgradeOwnerKeyDefaultSQL sets the backfill's key to the default unless
// the session set it already (the managed schema sets it first; psql users
// may set it with PGOPTIONS or edit the default in the migration file).
const upgradeOwnerKeyDefaultSQL = `SELECT set_config('` + upgradeOwnerKeySetting + `', ` +
	`coalesce(current_setting('` + upgradeOwnerKeySetting + `', true), '` + defaultUpgradeOwnerKey + `'), true)`

// codecFunctionsSQL create the PL/pgSQL reader of taskcodec's stored
// metadata used by the owner backfill ({schema} as in render).
var codecFunctionsSQL = []string{
	`CREATE OR REPLACE FUNCTION {schema}.a2a_taskcodec_uvarint(b bytea, INOUT pos integer, OUT v bigint)
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
$fn$`,
	`CREATE OR REPLACE FUNCTION {schema}.a2a_taskcodec_text(b bytea) RETURNS text
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
$fn$`,
	`CREATE OR REPLACE FUNCTION {schema}.a2a_taskcodec_metadata_string(meta bytea, field text) RETURNS text
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
	SELECT * INTO pos, v FROM {schema}.a2a_taskcodec_uvarint(meta, pos);
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
			SELECT * INTO pos, v FROM {schema}.a2a_taskcodec_uvarint(meta, pos);
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
			SELECT * INTO pos, v FROM {schema}.a2a_taskcodec_uvarint(meta, pos);
			IF v < 0 THEN
				RETURN NULL;
			END IF;
			IF mine THEN
				found := substring(meta FROM pos + 1 FOR v::integer);
			END IF;
			pos := pos + v::integer;
		WHEN kind IN (5, 6) THEN
			SELECT * INTO pos, v FROM {schema}.a2a_taskcodec_uvarint(meta, pos);
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
	RETURN {schema}.a2a_taskcodec_text(found);
END
$fn$`,
}

// ownerColumnSQL adds the owner column and, in the same statement block
// (so only ever once, when the column is new), copies owners recorded in
// metadata into it. ALTER TABLE takes an ACCESS EXCLUSIVE lock on
// a2a_tasks, held until the transaction ends: the copy runs with the
// table locked against reads and writes. Rows are found by a byte search
// for the key and decoded only then.
const ownerColumnSQL = `DO $do$
DECLARE
	k text := current_setting('{setting}', true); -- the metadata key; '' or NULL: none
BEGIN
	IF NOT EXISTS (SELECT FROM pg_attribute
	               WHERE attrelid = '{schema}.a2a_tasks'::regclass AND attname = 'owner' AND NOT attisdropped) THEN
		ALTER TABLE {schema}.a2a_tasks ADD COLUMN owner text NOT NULL DEFAULT '';
		IF k <> '' THEN
			UPDATE {schema}.a2a_tasks AS t SET owner = m.owner
			FROM (SELECT id, {schema}.a2a_taskcodec_metadata_string(metadata, k) AS owner
			      FROM {schema}.a2a_tasks
			      WHERE position(convert_to(k, 'UTF8') IN metadata) > 0) AS m
			WHERE t.id = m.id AND octet_length(m.owner) BETWEEN 1 AND {max};
		END IF;
	END IF;
END
$do$`

// ownerIndexesSQL are the owner ordering indexes ({schema} as in render).
var ownerIndexesSQL = []string{
	`CREATE INDEX IF NOT EXISTS idx_a2a_tasks_owner_updated
  ON {schema}.a2a_tasks (owner, updated_at DESC, id COLLATE "C" DESC)`,
	`CREATE INDEX IF NOT EXISTS idx_a2a_tasks_owner_context_updated
  ON {schema}.a2a_tasks (owner, context_id, updated_at DESC, id COLLATE "C" DESC)`,
}

// ownerColumnInstallSQL is the owner column's installation for schema qs:
// the codec functions, the backfill's key (the default unless already
// set), then the column with its one-time backfill. It runs in one
// transaction.
func ownerColumnInstallSQL(qs string) []string {
	var stmts []string
	for _, f := range codecFunctionsSQL {
		stmts = append(stmts, render(f, qs))
	}
	col := render(ownerColumnSQL, qs)
	col = replaceAll(col, "{setting}", upgradeOwnerKeySetting, "{max}", fmt.Sprint(engine.MaxOwnerBytes))
	return append(stmts, upgradeOwnerKeyDefaultSQL, col)
}

// isOwnerIndex matches (owner, updated_at DESC, id COLLATE "C" DESC).
func isOwnerIndex(d indexDef) bool {
	return d.usable && len(d.columns) == 3 &&
		d.columns[0] == "owner" &&
		d.columns[1] == "updated_at" && d.desc[1] &&
		d.columns[2] == "id" && d.desc[2] && d.collations[2] == "C"
}

// isOwnerContextIndex matches (owner, context_id, updated_at DESC, id
// COLLATE "C" DESC); owner and context_id are matched by equality, so
// their direction and (deterministic) collation do not matter.
func isOwnerContextIndex(d indexDef) bool {
	return d.usable && len(d.columns) == 4 &&
		d.columns[0] == "owner" && d.columns[1] == "context_id" &&
		d.columns[2] == "updated_at" && d.desc[2] &&
		d.columns[3] == "id" && d.desc[3] && d.collations[3] == "C"
}

// validateOwner checks an owner (O1): the engine's length rule and what
// PostgreSQL text can hold (as for IDs, S8).
func validateOwner(owner string) error {
	if err := engine.ValidateOwner(owner); err != nil {
		return err
	}
	if !storable(owner) {
		return fmt.Errorf("pgstore: owner with NUL or invalid UTF-8: %w", engine.ErrInvalidArgument)
	}
	return nil
}

// CreateOwned implements engine.OwnerStore: Create recording owner as the
// task's owner (O1). Owners with NUL or invalid UTF-8 are
// engine.ErrInvalidArgument, decided before any SQL runs.
func (s *Store) CreateOwned(ctx context.Context, task *a2a.Task, owner string) (engine.Record, error) {
	if err := validateOwner(owner); err != nil {
		return engine.Record{}, err
	}
	return s.create(ctx, task, owner)
}
