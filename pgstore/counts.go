package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2astore/a2astore/engine"
	"github.com/jackc/pgx/v5"
)

// Exact totals (L5, C4) come from a counter table that triggers keep in
// step with a2a_tasks inside every writing transaction, whoever writes:
// the store, another process, or hand-written SQL. A count read in the
// page's REPEATABLE READ transaction is therefore exact for that snapshot
// (L8).
//
// <schema>.a2a_task_counts holds one row per (kind, name, state, shard):
//
//	kind 0 (all tasks): name ''.
//	kind 1 (by context): name = the context ID. Tasks without a context
//	       ('') are not counted here: "" filters nothing.
//	kind 2 (by owner):   name = the owner. Tasks without an owner ('') are
//	       not counted here either.
//	kind 3 (by owner and context): name = the owner's length in bytes,
//	       ':', the owner, then the context ID (ownerContextName; the
//	       length keeps every pair's name distinct). Only tasks with both
//	       an owner and a context are counted here.
//
// Every kind is split over countShards rows per (name, state): a task
// counts in the shard of its ID (countShardSQL: hashtext of the ID,
// modulo countShards), so concurrent writers of different tasks mostly update
// different rows instead of queueing on one — for the global and
// per-state counts, and as much for one busy owner or context. A task's
// shard never changes (it follows the ID), so its create, its state or
// context changes and its delete all move the same shard row: each row is
// the exact count of its (kind, name, state) among the tasks of its shard,
// never negative, and a total is the sum over the shards (a read of at
// most countShards rows per state).
//
// Rows of kinds 1 to 3 that reach zero are deleted by the statement that
// zeroed them, so the table holds a row per live (context, state, shard),
// (owner, state, shard) and (owner, context, state, shard) and does not
// grow with contexts or owners that are gone; kind 0 rows (at most
// countShards per state) stay.
//
// Shapes read from it: none (kind 0, every row), state (kind 0, one state),
// context, owner and owner+context (kinds 1 to 3, one name: the rows of
// every state), and each of those with a state (one name and state): at
// most countShards rows per state, whatever the table holds. A total with
// StatusTimestampAfter counts the matching rows and may scan (C4).
//
// Triggers:
//
//	a2a_task_counts_insert   AFTER INSERT, FOR EACH STATEMENT, transition table
//	a2a_task_counts_delete   AFTER DELETE, FOR EACH STATEMENT, transition table
//	a2a_task_counts_update   AFTER UPDATE OF id, state, context_id, owner, FOR EACH ROW
//	a2a_task_counts_truncate AFTER TRUNCATE, FOR EACH STATEMENT
//
// INSERT (COPY included) and DELETE aggregate a whole statement's rows
// before touching the counters, so bulk loads and retention deletes cost one
// upsert per affected counter row, not per task. UPDATE is per row because
// a statement-level UPDATE trigger cannot name columns: with UPDATE OF, an
// update that sets none of id, state, context_id and owner (AppendHistory)
// fires nothing at all, and the function returns at once when the values
// it sets are unchanged (a Replace that keeps state and context). (The
// store never changes an ID; hand-written SQL that does moves the task's
// counts to its new shard.) Every
// trigger upserts its counter rows in one statement, ordered by the
// table's key, so two single-statement writers never deadlock on counter
// rows; one UPDATE statement that changes many rows locks their counter
// rows row by row and may deadlock with another such statement (PostgreSQL
// then aborts one of them; counts are never wrong). TRUNCATE empties the
// counters.

// countShards is the number of rows per (kind, name, state).
const countShards = 16

// countShardSQL is the shard of the task whose ID is column id: its
// hashtext, made non-negative, modulo {shards}. Triggers and the recount
// must agree.
const countShardSQL = `((hashtext(id) & 2147483647) % {shards})::smallint`

// Counter kinds.
const (
	countAll     = 0
	countContext = 1
	countOwner   = 2
	// countOwnerContext counts by (owner, context); see ownerContextName.
	countOwnerContext = 3
)

// ownerContextNameSQL is the kind-3 name of owner {o} and context {c}:
// ownerContextName in SQL (” when either is empty: not counted).
const ownerContextNameSQL = `CASE WHEN {o} <> '' AND {c} <> '' THEN octet_length({o})::text || ':' || {o} || {c} ELSE '' END`

func ownerContextNameOf(o, c string) string {
	return replaceAll(ownerContextNameSQL, "{o}", o, "{c}", c)
}

// ownerContextName is the kind-3 counter name of an owner and a context,
// both non-empty: the owner's length in bytes, ':', the owner, the
// context. (A name must be text: an owner and a context may hold any
// character but NUL, so no separator alone would do.)
func ownerContextName(owner, contextID string) string {
	return strconv.Itoa(len(owner)) + ":" + owner + contextID
}

// The SQL below is written for schema {schema} (replaced by the schema as
// quote_ident quotes it); {shards} is countShards.

// countsTableSQL creates the counter table. fillfactor leaves room on each
// page for HOT updates of n.
const countsTableSQL = `CREATE TABLE IF NOT EXISTS {schema}.a2a_task_counts (
	kind  smallint NOT NULL,
	name  text COLLATE "C" NOT NULL,
	state text COLLATE "C" NOT NULL,
	shard smallint NOT NULL,
	n     bigint NOT NULL,
	PRIMARY KEY (kind, name, state, shard)
) WITH (fillfactor = 50)`

// countDelta is the statement every trigger function runs: it adds the
// deltas of its rows, summed per counter row, in key order, and deletes
// the rows of kinds 1 to 3 it brought to zero. {delta} is the source of
// (kind, name, state, shard, d) rows.
const countDelta = `WITH up AS (
		INSERT INTO {schema}.a2a_task_counts AS c (kind, name, state, shard, n)
		SELECT kind, name, state, shard, sum(d) FROM ({delta}) AS delta (kind, name, state, shard, d)
		WHERE kind = 0 OR name <> ''
		GROUP BY kind, name, state, shard
		HAVING sum(d) <> 0
		ORDER BY kind, name COLLATE "C", state COLLATE "C", shard
		ON CONFLICT (kind, name, state, shard) DO UPDATE SET n = c.n + excluded.n
		RETURNING kind, name, state, shard, n)
	SELECT array_agg(kind), array_agg(name), array_agg(state), array_agg(shard) INTO zk, zn, zs, zh
	FROM up WHERE kind > 0 AND n = 0;
	IF zk IS NOT NULL THEN
		DELETE FROM {schema}.a2a_task_counts c
		USING unnest(zk, zn, zs, zh) AS z (kind, name, state, shard)
		WHERE c.kind = z.kind AND c.name = z.name AND c.state = z.state AND c.shard = z.shard AND c.n = 0;
	END IF;`

// countTransition is the delta source of a statement trigger: every row
// of transition table {rows} counts {d} in its shard, under each kind.
// The transition table is read once.
var countTransition = `
			SELECT k.kind, k.name, r.state, r.shard, {d}
			FROM (SELECT state, context_id, owner, ` + countShardSQL + ` AS shard FROM {rows}) AS r
			CROSS JOIN LATERAL (VALUES (0::smallint, ''::text), (1::smallint, r.context_id), (2::smallint, r.owner),
				(3::smallint, ` + ownerContextNameOf("r.owner", "r.context_id") + `)) AS k (kind, name)`

// countRow is the delta source of the row trigger on UPDATE.
var countRow = `VALUES
			(0::smallint, ''::text, OLD.state, old_shard, -1), (0::smallint, ''::text, NEW.state, new_shard, 1),
			(1::smallint, OLD.context_id, OLD.state, old_shard, -1), (1::smallint, NEW.context_id, NEW.state, new_shard, 1),
			(2::smallint, OLD.owner, OLD.state, old_shard, -1), (2::smallint, NEW.owner, NEW.state, new_shard, 1),
			(3::smallint, ` + ownerContextNameOf("OLD.owner", "OLD.context_id") + `, OLD.state, old_shard, -1),
			(3::smallint, ` + ownerContextNameOf("NEW.owner", "NEW.context_id") + `, NEW.state, new_shard, 1)`

const countDeclare = `
DECLARE
	zk smallint[];
	zn text[];
	zs text[];
	zh smallint[];`

// countFunctions are the trigger functions, by name, with their bodies.
// The bodies are compared with the database's at startup (P3), so any
// change here must be made in OwnerCountsMigrationFile too (a test checks
// it holds them); running that file again replaces the functions and
// triggers and recounts.
var countFunctions = []struct{ name, body string }{
	{"a2a_task_counts_on_insert", countDeclare + `
BEGIN
	` + strings.NewReplacer("{delta}", strings.NewReplacer("{rows}", "new_rows", "{d}", "1").Replace(countTransition)).Replace(countDelta) + `
	RETURN NULL;
END
`},
	{"a2a_task_counts_on_delete", countDeclare + `
BEGIN
	` + strings.NewReplacer("{delta}", strings.NewReplacer("{rows}", "old_rows", "{d}", "-1").Replace(countTransition)).Replace(countDelta) + `
	RETURN NULL;
END
`},
	{"a2a_task_counts_on_update", countDeclare + `
	old_shard smallint := ` + strings.ReplaceAll(countShardSQL, "(id)", "(OLD.id)") + `;
	new_shard smallint := ` + strings.ReplaceAll(countShardSQL, "(id)", "(NEW.id)") + `;
BEGIN
	IF OLD.state IS NOT DISTINCT FROM NEW.state AND OLD.context_id IS NOT DISTINCT FROM NEW.context_id
			AND OLD.owner IS NOT DISTINCT FROM NEW.owner AND OLD.id IS NOT DISTINCT FROM NEW.id THEN
		RETURN NULL;
	END IF;
	` + strings.NewReplacer("{delta}", countRow).Replace(countDelta) + `
	RETURN NULL;
END
`},
	{"a2a_task_counts_on_truncate", `
BEGIN
	DELETE FROM {schema}.a2a_task_counts;
	RETURN NULL;
END
`},
}

// countTriggers wire the functions to a2a_tasks.
var countTriggers = []struct {
	name, function     string
	def                string // after "CREATE OR REPLACE TRIGGER <name> "
	tgtype             int16  // pg_trigger.tgtype
	oldTable, newTable string // transition tables
	columns            []string
}{
	{"a2a_task_counts_insert", "a2a_task_counts_on_insert",
		"AFTER INSERT ON {schema}.a2a_tasks REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT", tgInsert, "", "new_rows", nil},
	{"a2a_task_counts_delete", "a2a_task_counts_on_delete",
		"AFTER DELETE ON {schema}.a2a_tasks REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT", tgDelete, "old_rows", "", nil},
	{"a2a_task_counts_update", "a2a_task_counts_on_update",
		"AFTER UPDATE OF id, state, context_id, owner ON {schema}.a2a_tasks FOR EACH ROW", tgRow | tgUpdate, "", "",
		[]string{"id", "state", "context_id", "owner"}},
	{"a2a_task_counts_truncate", "a2a_task_counts_on_truncate",
		"AFTER TRUNCATE ON {schema}.a2a_tasks FOR EACH STATEMENT", tgTruncate, "", "", nil},
}

// pg_trigger.tgtype bits (AFTER is the absence of tgBefore and tgInstead).
const (
	tgRow      = 1 << 0
	tgBefore   = 1 << 1
	tgInsert   = 1 << 2
	tgDelete   = 1 << 3
	tgUpdate   = 1 << 4
	tgTruncate = 1 << 5
	tgInstead  = 1 << 6
)

// recountSQL counts a2a_tasks the way the triggers do, in one scan:
// (kind, name, state, shard, n) per group; groups of kinds 1 to 3 with an
// empty name are not counters.
var recountSQL = `SELECT CASE WHEN grouping(context_id) = 0 AND grouping(owner) = 0 THEN 3
			WHEN grouping(context_id) = 0 THEN 1 WHEN grouping(owner) = 0 THEN 2 ELSE 0 END::smallint AS kind,
		CASE WHEN grouping(context_id) = 0 AND grouping(owner) = 0 THEN ` + ownerContextNameOf("owner", "context_id") + `
			WHEN grouping(context_id) = 0 THEN context_id WHEN grouping(owner) = 0 THEN owner ELSE '' END COLLATE "C" AS name,
		state COLLATE "C" AS state, shard, count(*) AS n
	FROM (SELECT context_id, owner, state, ` + countShardSQL + ` AS shard FROM {schema}.a2a_tasks) AS t
	GROUP BY GROUPING SETS ((state, shard), (context_id, state, shard), (owner, state, shard), (owner, context_id, state, shard))`

// rebuildBody recomputes every counter. It locks a2a_tasks against writes
// (SHARE ROW EXCLUSIVE: reads go on) until the calling transaction ends,
// so no write falls between the recount and the triggers.
var rebuildBody = `
BEGIN
	LOCK TABLE {schema}.a2a_tasks IN SHARE ROW EXCLUSIVE MODE;
	DELETE FROM {schema}.a2a_task_counts;
	INSERT INTO {schema}.a2a_task_counts (kind, name, state, shard, n)
	SELECT kind, name, state, shard, n FROM (
	` + recountSQL + `
	) AS g
	WHERE kind = 0 OR name <> '';
END
`

// render fills a template's {schema} (qs: quoted as quote_ident quotes)
// and {shards}.
func render(tmpl, qs string) string {
	return strings.NewReplacer("{schema}", qs, "{shards}", strconv.Itoa(countShards)).Replace(tmpl)
}

// replaceAll replaces each old string with the new one after it.
func replaceAll(s string, oldnew ...string) string {
	return strings.NewReplacer(oldnew...).Replace(s)
}

// createFunctionSQL is the CREATE OR REPLACE FUNCTION statement of a
// function without arguments.
func createFunctionSQL(qs, name, returns, body string) string {
	return "CREATE OR REPLACE FUNCTION " + qs + "." + name + "() RETURNS " + returns +
		" LANGUAGE plpgsql AS $fn$" + render(body, qs) + "$fn$"
}

// countsInstallSQL is the counters' installation for schema qs, in order:
// lock a2a_tasks against writes, create the table, the functions and the
// triggers, then rebuild every counter. It must run in one transaction:
// the lock taken first is held until commit, so a write either committed
// before the rebuild (which counts it) or runs after the commit (and its
// trigger counts it). Reads go on throughout.
func countsInstallSQL(qs string) []string {
	stmts := []string{
		"LOCK TABLE " + qs + ".a2a_tasks IN SHARE ROW EXCLUSIVE MODE",
		render(countsTableSQL, qs),
	}
	for _, f := range countFunctions {
		stmts = append(stmts, createFunctionSQL(qs, f.name, "trigger", f.body))
	}
	stmts = append(stmts, createFunctionSQL(qs, "a2a_task_counts_rebuild", "void", rebuildBody))
	for _, tg := range countTriggers {
		stmts = append(stmts, "CREATE OR REPLACE TRIGGER "+tg.name+" "+render(tg.def, qs)+
			" EXECUTE FUNCTION "+qs+"."+tg.function+"()")
	}
	return append(stmts, "SELECT "+qs+".a2a_task_counts_rebuild()")
}

// countQuery returns the SQL and arguments that read q's total from the
// counter table, or ok = false when q's shape is not counted there.
func (s *Store) countQuery(q *engine.Query) (sql string, args []any, ok bool) {
	if q.StatusAfter != nil {
		return "", nil, false
	}
	var a sqlArgs
	where := []string{"kind = " + strconv.Itoa(countAll), "name = ''"}
	switch {
	case q.Owner != "" && q.ContextID != "":
		where = []string{"kind = " + strconv.Itoa(countOwnerContext), "name = " + a.add(ownerContextName(q.Owner, q.ContextID))}
	case q.ContextID != "":
		where = []string{"kind = " + strconv.Itoa(countContext), "name = " + a.add(q.ContextID)}
	case q.Owner != "":
		where = []string{"kind = " + strconv.Itoa(countOwner), "name = " + a.add(q.Owner)}
	}
	if q.Status != a2a.TaskStateUnspecified {
		where = append(where, "state = "+a.add(string(q.Status)))
	}
	return "SELECT coalesce(sum(n), 0)::bigint FROM " + s.sql.counts + whereClause(where), a, true
}

// CountDrift is one counter that differs from a recount of a2a_tasks.
type CountDrift struct {
	Kind  string // "all", "context", "owner" or "owner+context"
	Name  string // the context ID, owner, or kind-3 name; "" for "all"
	State string
	Have  int64 // what the counter table says (summed over shards)
	Want  int64 // what a recount says
	// ZeroRows reports a context or owner row left at zero, which the
	// triggers delete.
	ZeroRows bool
	// Shards reports shard rows that differ from a recount of their
	// shard (each row counts the tasks whose ID hashes to it), even
	// where the sum agrees.
	Shards bool
}

func (d CountDrift) String() string {
	s := fmt.Sprintf("%s %q state %s: counter %d, recount %d", d.Kind, d.Name, d.State, d.Have, d.Want)
	if d.ZeroRows {
		s += " (zero row left)"
	}
	if d.Shards {
		s += " (shard rows differ)"
	}
	return s
}

// ErrCountDrift is returned by CheckInvariants when the counter table
// disagrees with a recount: something wrote a2a_tasks without its triggers
// (they were disabled, dropped, or bypassed with session_replication_role
// = replica) or wrote a2a_task_counts directly. Run
// SELECT <schema>.a2a_task_counts_rebuild() to repair.
var ErrCountDrift = errors.New("pgstore: task counters differ from a recount")

// checkCounts compares every counter row with a recount of its shard,
// both read from one REPEATABLE READ snapshot, and returns the
// differences per (kind, name, state) (at most limit).
func (s *Store) checkCounts(ctx context.Context, limit int) ([]CountDrift, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `WITH want AS (`+render(recountSQL, s.qschema)+`),
pairs AS (
	SELECT coalesce(w.kind, h.kind) AS kind, coalesce(w.name, h.name) AS name, coalesce(w.state, h.state) AS state,
	       coalesce(h.n, 0) AS have, coalesce(w.n, 0) AS want, coalesce(h.kind > 0 AND h.n = 0, false) AS zero
	FROM (SELECT * FROM want WHERE kind = 0 OR name <> '') w
	FULL JOIN `+s.sql.counts+` h ON h.kind = w.kind AND h.name = w.name AND h.state = w.state AND h.shard = w.shard)
SELECT kind, name, state, sum(have)::bigint, sum(want)::bigint, bool_or(zero), bool_or(have <> want)
FROM pairs
GROUP BY kind, name, state
HAVING sum(have) <> sum(want) OR bool_or(zero) OR bool_or(have <> want)
ORDER BY 1, 2, 3
LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	kinds := []string{countAll: "all", countContext: "context", countOwner: "owner", countOwnerContext: "owner+context"}
	drift, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CountDrift, error) {
		var d CountDrift
		var kind int16
		var shards bool
		err := r.Scan(&kind, &d.Name, &d.State, &d.Have, &d.Want, &d.ZeroRows, &shards)
		d.Shards = shards && d.Have == d.Want
		d.Kind = strconv.Itoa(int(kind))
		if int(kind) < len(kinds) && kind >= 0 {
			d.Kind = kinds[kind]
		}
		return d, err
	})
	if err != nil {
		return nil, err
	}
	return drift, tx.Commit(ctx)
}

// CountDrifts compares every counter with a recount of a2a_tasks, both
// read from one snapshot, and returns up to limit differences (none: the
// counters are exact). It reads the whole table; CheckInvariants calls it.
func (s *Store) CountDrifts(ctx context.Context, limit int) ([]CountDrift, error) {
	d, err := s.checkCounts(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: check counters: %w", err)
	}
	return d, nil
}

// driftError formats drifts as an ErrCountDrift.
func (s *Store) driftError(drift []CountDrift) error {
	var b strings.Builder
	for i, d := range drift {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.String())
	}
	return fmt.Errorf("%w in %s (repair with SELECT %s.a2a_task_counts_rebuild()): %s", ErrCountDrift, s.sql.counts, s.qschema, b.String())
}

// checkOwnersAndCounts is CheckInvariants's part for the owner column and
// the counters: both installed as startup requires, no owner longer than
// engine.MaxOwnerBytes (hand-written SQL could store one), and every
// counter equal to a recount.
func (s *Store) checkOwnersAndCounts(ctx context.Context) error {
	if err := s.checkExtras(ctx); err != nil {
		return err
	}
	var long int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.sql.table+` WHERE octet_length(owner) > $1`,
		engine.MaxOwnerBytes).Scan(&long); err != nil {
		return fmt.Errorf("pgstore: check invariants: %w", err)
	}
	if long > 0 {
		return fmt.Errorf("pgstore: %d rows in %s have an owner longer than %d bytes", long, s.sql.table, engine.MaxOwnerBytes)
	}
	drift, err := s.CountDrifts(ctx, 10)
	if err != nil {
		return err
	}
	if len(drift) > 0 {
		return s.driftError(drift)
	}
	return nil
}
