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

// Exact totals (L5, C4) come from three tables that triggers keep in step
// with a2a_tasks inside every writing transaction, whoever writes: the
// store, another process, or hand-written SQL (issue 20's insert-only
// delta ledger).
//
// <schema>.a2a_task_count_deltas is the ledger: every write appends
// signed deltas (shard, state, context_id, owner, d) — a create one row
// (+1), a change of state, context or owner two (-1 for the old values,
// +1 for the new), a delete one (-1), a multi-row statement one row per
// distinct (shard, state, context, owner) it touched. Appending takes no
// row lock (it adds one index entry, on xact, the writing transaction's
// ID, at the index's right edge), so concurrent writers never queue on a
// counter. One delta row stands for all four kinds below.
//
// <schema>.a2a_task_count_moves is the second ledger: the update trigger
// appends there a change of state alone (context, owner and ID kept) —
// the moves of every lifecycle — as one row (shard, old_state, new_state,
// context_id, owner) that stands for -1 of the old state and +1 of the
// new. A move leaves every total not filtered by state unchanged, so only
// a total by state reads this ledger: writers moving tasks through their
// states, however fast, lengthen no other total's scan. One row, not two:
// a fold takes a move whole or not at all, so what it leaves pending in
// this ledger still nets to zero for every total that does not read it.
//
// <schema>.a2a_task_counts is the base: one row per (kind, name, state,
// shard), written only by the roll-up (a2a_task_counts_fold, run by the
// service in rollup.go), the recount (a2a_task_counts_rebuild), TRUNCATE
// and the triggers of statements of bulkRows rows or more:
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
// Each base row, plus the pending deltas of its (kind, name, state,
// shard), is the exact count of its tasks. The shard column is always 0
// (countShards): see there why. Rows of kinds 1 to 3 that reach zero are
// deleted by the fold that zeroed them.
//
// A total is base + pending deltas, both read in the page's REPEATABLE
// READ snapshot (L8): the fold deletes the deltas it adds to the base in
// one transaction, so every snapshot sees each delta exactly once, in a
// ledger or in the base. The fold takes a transaction-scoped advisory lock
// (foldLockSQL; the rebuild and TRUNCATE wait for it), so of several
// servers on one database one folds at a time; a fold that dies halfway
// rolls back whole and its deltas stay pending. A total reads the
// ledgers by their xact index above the latest fold's watermark
// (a2a_task_count_folds, issue 53; see foldBody), so the dead rows the
// folds leave are never visited, whatever snapshot elsewhere keeps them
// (SPEC C5); what it reads is what is pending, which the roll-up keeps
// short (cadence, size, and a wake from any total that read more than
// foldOnReadRows rows).
//
// Shapes read: none (kind 0, every row), state (kind 0, one state),
// context, owner and owner+context (kinds 1 to 3, one name: the rows of
// every state), and each of those with a state: at most countShards base
// rows per state plus the pending deltas. A total with
// StatusTimestampAfter counts the matching rows and may scan (C4).
//
// Triggers:
//
//	a2a_task_counts_insert   AFTER INSERT, FOR EACH STATEMENT, transition table
//	a2a_task_counts_delete   AFTER DELETE, FOR EACH STATEMENT, transition table
//	a2a_task_counts_update   AFTER UPDATE OF id, state, context_id, owner, FOR EACH ROW,
//	                         WHEN one of them changes value (countedChangeSQL)
//	a2a_task_counts_truncate AFTER TRUNCATE, FOR EACH STATEMENT
//
// INSERT (COPY included) and DELETE append one multi-row INSERT per
// statement, grouped. UPDATE is per row because a statement-level UPDATE
// trigger cannot name columns: with UPDATE OF, an update that sets none of
// id, state, context_id and owner (AppendHistory) fires nothing at all,
// and the WHEN condition keeps one that sets them to the values they had
// (a Replace that keeps state and context) from calling the function
// (issue 53; before, it was called and returned at once); a change of
// state alone goes to the moves ledger. (The store never changes an
// ID; hand-written SQL that does appends a -1 and a +1 that cancel out
// with one shard, and would move the task's counts to its new shard with
// several.) TRUNCATE empties base and ledgers by TRUNCATE too, not
// DELETE: TRUNCATE is not MVCC-safe, so a snapshot taken before it finds
// a2a_tasks empty afterwards (the counters must look as empty to it, L8),
// and a REPEATABLE READ transaction that truncates removes tasks committed
// after its snapshot, whose ledger rows a DELETE in that snapshot would
// miss (TestTruncateAcrossSnapshots).

// countShards is the number of base rows per (kind, name, state): one.
// Releases before spread a task's counts over 16 rows by its ID's hash,
// a remnant of the triggers that once updated the base in every writer's
// transaction. Since the ledger, only the fold (one at a time) and bulk
// statements (which touch every shard anyway) write the base, and shards
// only cost: the fold nets a batch's deltas per (shard, state, context,
// owner), so 16 shards made up to 16 rows of counts of 0 or 1 where one
// would do, and each of their crossings of zero a delete and a reinsert.
// Measured (issue 31, BenchmarkTotalUnderWriters, 1e5 tasks, 4 writers
// flipping random tasks, binaries alternating, 6 runs each, load 0.5-9
// at the starts, raised by the 16-writer runs before): a first page with
// its total took 5.0-11.0 ms with 16 shards (4.0-8.5x the page alone),
// 1.7-3.3 ms with one (1.7-2.6x). With 16 writers, no change: they
// outrun the fold either way.
// The shard column stays (the table's key); a database of an earlier
// release is recounted into shard 0 when its functions are replaced.
const countShards = 1

// countShardSQL stands for the shard of the task whose ID is column id
// (and {shard(OLD.id)}, {shard(NEW.id)} in the update trigger): rendered
// by shardSQL. Triggers and the recount must agree.
const countShardSQL = `{shard(id)}`

// shardSQL is the shard of the task whose ID is expression id with the
// given number of shards: 0 for one, else its hashtext made non-negative
// modulo shards.
func shardSQL(shards int, id string) string {
	if shards == 1 {
		return "0::smallint"
	}
	return "((hashtext(" + id + ") & 2147483647) % " + strconv.Itoa(shards) + ")::smallint"
}

// renderShards fills the shard placeholders of tmpl for shards.
func renderShards(tmpl string, shards int) string {
	var oldnew []string
	for _, id := range []string{"id", "OLD.id", "NEW.id"} {
		oldnew = append(oldnew, "{shard("+id+")}", shardSQL(shards, id))
	}
	return replaceAll(tmpl, oldnew...)
}

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
// quote_ident quotes it); the shard placeholders are for countShards.

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

// countsDeltasTableSQL creates the ledger. No index, no key: writers
// only append; the fold and totals scan it, and the roll-up keeps it
// short. Autovacuum is told to clean it after every thousand deleted rows.
const countsDeltasTableSQL = `CREATE TABLE IF NOT EXISTS {schema}.a2a_task_count_deltas (
	shard      smallint NOT NULL,
	state      text COLLATE "C" NOT NULL,
	context_id text COLLATE "C" NOT NULL,
	owner      text COLLATE "C" NOT NULL,
	d          bigint NOT NULL,
	xact       xid8 NOT NULL DEFAULT pg_current_xact_id()
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000)`

// countsMovesTableSQL creates the moves ledger, kept as the deltas ledger
// is.
const countsMovesTableSQL = `CREATE TABLE IF NOT EXISTS {schema}.a2a_task_count_moves (
	shard      smallint NOT NULL,
	old_state  text COLLATE "C" NOT NULL,
	new_state  text COLLATE "C" NOT NULL,
	context_id text COLLATE "C" NOT NULL,
	owner      text COLLATE "C" NOT NULL,
	xact       xid8 NOT NULL DEFAULT pg_current_xact_id()
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000)`

// ledgerXactSQL gives the ledgers of a release before issue 53 their
// xact column (the writing transaction's top-level ID, filled by its
// default whoever inserts: the triggers of this release or of an older
// one) and creates the index a total and the fold read them by. The
// ADD COLUMN rewrites each ledger (a volatile default), under the
// install's lock on a2a_tasks, so no writer appends meanwhile.
var ledgerXactSQL = []string{
	`ALTER TABLE {schema}.a2a_task_count_deltas ADD COLUMN IF NOT EXISTS xact xid8 NOT NULL DEFAULT pg_current_xact_id()`,
	`ALTER TABLE {schema}.a2a_task_count_moves ADD COLUMN IF NOT EXISTS xact xid8 NOT NULL DEFAULT pg_current_xact_id()`,
	`CREATE INDEX IF NOT EXISTS a2a_task_count_deltas_xact ON {schema}.a2a_task_count_deltas (xact)`,
	`CREATE INDEX IF NOT EXISTS a2a_task_count_moves_xact ON {schema}.a2a_task_count_moves (xact)`,
}

// countsFoldsTableSQL creates the fold watermarks (issue 53): the
// latest fold's row (the highest fold) says which ledger rows every fold
// so far has taken — every row whose xact is below upto and not in
// running, the transactions still running below upto when that fold took
// its snapshot. A total reads only the rest, by the xact index: rows at
// or above upto, and rows of the transactions in running. The fold inserts its own row and
// deletes the one before, so a reader's backward index scan meets the
// newest row first, whatever dead rows a held snapshot keeps behind it.
const countsFoldsTableSQL = `CREATE TABLE IF NOT EXISTS {schema}.a2a_task_count_folds (
	fold    bigint PRIMARY KEY,
	upto    xid8 NOT NULL,
	running xid8[] NOT NULL
)`

// watermarkCTE is the WITH item wm: the latest fold's watermark (upto,
// running), ('0', '{}') before the first fold. folds is the quoted table.
func watermarkCTE(folds string) string {
	return "wm AS (SELECT coalesce(f.upto, '0'::xid8) AS upto, coalesce(f.running, '{}'::xid8[]) AS running FROM (SELECT) AS one" +
		" LEFT JOIN LATERAL (SELECT upto, running FROM " + folds + " ORDER BY fold DESC LIMIT 1) AS f ON true)"
}

// pendingRows is the subquery of ledger's rows no fold has taken, as wm
// says (watermarkCTE), with columns cols: two index range reads of the
// xact index (with enable_seqscan off, as totals and the fold run), so
// a read never visits the dead rows folds left below the watermark.
func pendingRows(ledger, cols string) string {
	return "(SELECT " + cols + " FROM " + ledger + " WHERE xact >= (SELECT upto FROM wm)" +
		" UNION ALL SELECT " + cols + " FROM " + ledger + " WHERE xact = ANY ((SELECT running FROM wm)::xid8[]))"
}

// noSeqScanSQL turns sequential scans off for the rest of a total's
// transaction (issue 53), so the planner reads the ledgers by their xact
// index whatever their statistics say: a sequential scan would read
// every dead row of a churning ledger.
const noSeqScanSQL = "SET LOCAL enable_seqscan = off"

// movesAsDeltas reads the move rows of {from} (aliased m) as delta rows
// (shard, state, context_id, owner, d): -1 of the old state, +1 of the new.
func movesAsDeltas(from string) string {
	return "SELECT m.shard, v.state, m.context_id, m.owner, v.d FROM " + from +
		" AS m CROSS JOIN LATERAL (VALUES (m.old_state, -1::bigint), (m.new_state, 1::bigint)) AS v (state, d)"
}

// foldBatch is about the most rows of each ledger one fold transaction
// takes: the fold stops at the transaction of the foldBatch-th row (and
// takes all of that transaction's rows).
const foldBatch = 10000

// foldLockSQL is the fold's transaction-scoped advisory lock: key 1, the
// first letters of a2astore; key 2, the counter table's OID, so that each
// schema has its own. {wait} is pg_advisory_xact_lock (the rebuild and
// TRUNCATE wait for a fold) or pg_try_advisory_xact_lock (a fold that
// finds another one running skips).
const foldLockSQL = `{wait}(1093812563, $k${schema}.a2a_task_counts$k$::regclass::oid::integer)`

// countExpand is the delta source of the fold: each delta row of {rows}
// (shard, state, context_id, owner, d) under each kind.
var countExpand = `
			SELECT k.kind, k.name, r.state, r.shard, r.d
			FROM {rows} AS r
			CROSS JOIN LATERAL (VALUES (0::smallint, ''::text), (1::smallint, r.context_id), (2::smallint, r.owner),
				(3::smallint, ` + ownerContextNameOf("r.owner", "r.context_id") + `)) AS k (kind, name)
			WHERE k.kind = 0 OR k.name <> ''`

// baseUpsert adds the signed counts of {delta} (rows shard, state,
// context_id, owner, d; a query or a CTE name) to the base counters in
// one statement, per counter row in key order (so two of them never wait
// for each other in a cycle), and deletes the rows of kinds 1 to 3 it
// brought to zero. {before} opens the statement's WITH list ("WITH" or a
// CTE followed by a comma); {into} receives the zero rows' keys. Used by
// the fold and by the triggers of bulk statements.
var baseUpsert = `
	{before} up AS (
		INSERT INTO {schema}.a2a_task_counts AS c (kind, name, state, shard, n)
		SELECT kind, name, state, shard, sum(d) FROM (` + strings.ReplaceAll(countExpand, "{rows}", "{delta}") + `
		) AS delta (kind, name, state, shard, d)
		GROUP BY kind, name, state, shard
		HAVING sum(d) <> 0
		ORDER BY kind, name COLLATE "C", state COLLATE "C", shard
		ON CONFLICT (kind, name, state, shard) DO UPDATE SET n = c.n + excluded.n
		RETURNING kind, name, state, shard, n)
	SELECT {count}array_agg(kind), array_agg(name), array_agg(state), array_agg(shard)
	INTO {into}zk, zn, zs, zh
	FROM up WHERE kind > 0 AND n = 0;
	IF zk IS NOT NULL THEN
		DELETE FROM {schema}.a2a_task_counts c
		USING unnest(zk, zn, zs, zh) AS z (kind, name, state, shard)
		WHERE c.kind = z.kind AND c.name = z.name AND c.state = z.state AND c.shard = z.shard AND c.n = 0;
	END IF;`

// foldBody folds the ledger rows of the transactions that have ended
// into the base in one statement (issue 53's watermark): it reads the
// latest watermark (countsFoldsTableSQL) and a snapshot, and takes as
// its own upto the snapshot's xmax — lowered, when the ledgers hold more
// than foldBatch rows at or above the last upto, to just past the
// transaction of the foldBatch-th row, so one fold stays bounded — and
// as running the snapshot's running transactions below it, and its own
// transaction when that already holds an ID (a fold called by hand after
// writes: a snapshot never lists its own transaction, whose later writes
// would otherwise fall below the watermark, unread). Every ledger
// row of a transaction below upto and not running belongs to a
// transaction that had ended: if it committed, this fold sees the row and
// takes it; if it aborted, no snapshot ever will. So the rows a later
// snapshot must still count are at or above upto or of a running
// transaction, and that is all a total reads (pendingRows), by the xact
// index. The statement deletes
// the rows taken (read by that index from the last watermark up, never
// below it), nets their deltas per task group (shard, state, context,
// owner: a task's deltas within a batch mostly cancel out, as a created
// task's +1 and -1 of each state it passes), adds the non-zero sums per
// counter row (in key order), and deletes the rows of kinds 1 to 3 it
// brought to zero; the fold then records its watermark and deletes the
// one before, in the same transaction. It returns how many ledger rows it
// folded (of both ledgers), or -1 when another fold holds the lock. A
// fold that took no row and found the same running transactions writes
// nothing.
var foldBody = `
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
	IF NOT ` + strings.ReplaceAll(foldLockSQL, "{wait}", "pg_try_advisory_xact_lock") + ` THEN
		RETURN -1;
	END IF;
	PERFORM set_config('enable_seqscan', 'off', true);
	SELECT f.fold, f.upto, f.running INTO prev, old_upto, old_running FROM {schema}.a2a_task_count_folds AS f ORDER BY f.fold DESC LIMIT 1;
	IF NOT FOUND THEN
		prev := 0;
		old_upto := '0';
		old_running := '{}';
	END IF;
	snap := pg_current_snapshot();
	new_upto := least(pg_snapshot_xmax(snap),
		(SELECT (l.xact::text::bigint + 1)::text::xid8 FROM {schema}.a2a_task_count_deltas AS l
		 WHERE l.xact >= old_upto ORDER BY l.xact OFFSET {batch} - 1 LIMIT 1),
		(SELECT (l.xact::text::bigint + 1)::text::xid8 FROM {schema}.a2a_task_count_moves AS l
		 WHERE l.xact >= old_upto ORDER BY l.xact OFFSET {batch} - 1 LIMIT 1));
	SELECT coalesce(array_agg(x ORDER BY x), '{}') INTO new_running FROM (SELECT pg_snapshot_xip(snap) UNION SELECT pg_current_xact_id_if_assigned()) AS r (x) WHERE x < new_upto;` +
	replaceAll(baseUpsert, "{before}", `WITH gone AS (`+foldTake("a2a_task_count_deltas", "state, context_id, owner, d")+`
	), moved AS (`+foldTake("a2a_task_count_moves", "old_state, new_state, context_id, owner")+`
	), net AS (
		SELECT shard, state, context_id, owner, sum(d) AS d
		FROM (SELECT * FROM gone UNION ALL `+movesAsDeltas("moved")+`) AS g
		GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0
	),`, "{delta}", "net", "{count}", "(SELECT count(*) FROM gone) + (SELECT count(*) FROM moved), ", "{into}", "folded, ") + `
	IF folded > 0 OR new_running <> old_running THEN
		INSERT INTO {schema}.a2a_task_count_folds (fold, upto, running) VALUES (prev + 1, new_upto, new_running);
		DELETE FROM {schema}.a2a_task_count_folds WHERE fold = prev;
	END IF;
	PERFORM set_config('enable_seqscan', seqscan, true);
	RETURN folded;
END
`

// foldTake is the fold's delete of the rows of ledger that the fold
// takes (see foldBody), returning their shard and columns. Its two index
// conditions on xact — the range from the last watermark up, and the
// last fold's running transactions, which lie below that range, so no
// row meets both — are read as one bitmap (seqscan off), so each heap
// page of the batch is visited once, by the delete itself (issue 53:
// before, an index scan collected the rows' ctids and a TID scan visited
// each again).
func foldTake(ledger, columns string) string {
	return replaceAll(`
		DELETE FROM {schema}.{ledger} AS l
		WHERE (l.xact >= old_upto AND l.xact < new_upto OR l.xact = ANY (old_running)) AND l.xact <> ALL (new_running)
		RETURNING shard, {columns}`, "{ledger}", ledger, "{columns}", columns)
}

// bulkRows is how many rows a statement must insert or delete for its
// trigger to add its counts to the base at once rather than append them
// to the ledger: a bulk load or a retention batch then leaves no backlog
// that totals would scan until the roll-up folds it, while single-task
// writes keep the ledger's append without row locks.
const bulkRows = 64

// countAppend is a statement trigger's append: the rows of transition
// table {rows}, grouped, each group counting {sign}count(*). A statement
// of fewer than bulkRows rows costs one SQL statement (issue 53: the
// size test is the INSERT's one-time filter, not a query of its own);
// one of more, or of none, inserts nothing there and goes on to the base.
var countAppend = `
DECLARE
	zk smallint[];
	zn text[];
	zs text[];
	zh smallint[];
BEGIN
	INSERT INTO {schema}.a2a_task_count_deltas (shard, state, context_id, owner, d)
	SELECT ` + countShardSQL + `, state, context_id, owner, {sign}count(*)
	FROM {rows} WHERE (SELECT count(*) FROM (SELECT FROM {rows} LIMIT ` + strconv.Itoa(bulkRows) + `) AS b) < ` + strconv.Itoa(bulkRows) + `
	GROUP BY 1, 2, 3, 4;
	IF FOUND THEN
		RETURN NULL;
	END IF;` + replaceAll(baseUpsert, "{before}", `WITH g AS (
		SELECT `+countShardSQL+` AS shard, state, context_id, owner, {sign}count(*) AS d
		FROM {rows} GROUP BY 1, 2, 3, 4
	),`, "{delta}", "g", "{count}", "", "{into}", "") + `
	RETURN NULL;
END
`

// countFunctions are the trigger functions, by name, with their bodies.
// The bodies are compared with the database's at startup (P3), so any
// change here must be made in CountLedgerMigrationFile too (a test checks
// it holds them); running that file again replaces the functions and
// triggers and recounts.
var countFunctions = []struct{ name, body string }{
	{"a2a_task_counts_on_insert", replaceAll(countAppend, "{rows}", "new_rows", "{sign}", "")},
	{"a2a_task_counts_on_delete", replaceAll(countAppend, "{rows}", "old_rows", "{sign}", "-")},
	{"a2a_task_counts_on_update", `
BEGIN
	IF OLD.context_id IS NOT DISTINCT FROM NEW.context_id AND OLD.owner IS NOT DISTINCT FROM NEW.owner
			AND OLD.id IS NOT DISTINCT FROM NEW.id THEN
		INSERT INTO {schema}.a2a_task_count_moves (shard, old_state, new_state, context_id, owner) VALUES
			({shard(NEW.id)}, OLD.state, NEW.state, NEW.context_id, NEW.owner);
	ELSE
		INSERT INTO {schema}.a2a_task_count_deltas (shard, state, context_id, owner, d) VALUES
			({shard(OLD.id)}, OLD.state, OLD.context_id, OLD.owner, -1),
			({shard(NEW.id)}, NEW.state, NEW.context_id, NEW.owner, 1);
	END IF;
	RETURN NULL;
END
`},
	{"a2a_task_counts_on_truncate", `
BEGIN
	PERFORM ` + strings.ReplaceAll(foldLockSQL, "{wait}", "pg_advisory_xact_lock") + `;
	TRUNCATE {schema}.a2a_task_counts, {schema}.a2a_task_count_deltas, {schema}.a2a_task_count_moves;
	RETURN NULL;
END
`},
}

// countProcs are the other functions, checked at startup like the
// trigger functions.
var countProcs = []struct{ name, returns, body string }{
	{"a2a_task_counts_fold", "bigint", foldBody},
	{"a2a_task_counts_rebuild", "void", rebuildBody},
}

// countTriggers wire the functions to a2a_tasks.
var countTriggers = []struct {
	name, function     string
	def                string // after "CREATE OR REPLACE TRIGGER <name> "
	tgtype             int16  // pg_trigger.tgtype
	oldTable, newTable string // transition tables
	columns            []string
	when               string // the WHEN condition as the server deparses it ("": none)
}{
	{"a2a_task_counts_insert", "a2a_task_counts_on_insert",
		"AFTER INSERT ON {schema}.a2a_tasks REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT", tgInsert, "", "new_rows", nil, ""},
	{"a2a_task_counts_delete", "a2a_task_counts_on_delete",
		"AFTER DELETE ON {schema}.a2a_tasks REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT", tgDelete, "old_rows", "", nil, ""},
	{"a2a_task_counts_update", "a2a_task_counts_on_update",
		"AFTER UPDATE OF id, state, context_id, owner ON {schema}.a2a_tasks FOR EACH ROW WHEN (" + countedChangeSQL + ")", tgRow | tgUpdate, "", "",
		[]string{"id", "state", "context_id", "owner"}, countedChangeDeparsed},
	{"a2a_task_counts_truncate", "a2a_task_counts_on_truncate",
		"AFTER TRUNCATE ON {schema}.a2a_tasks FOR EACH STATEMENT", tgTruncate, "", "", nil, ""},
}

// countedChangeSQL is the update trigger's WHEN condition (issue 53): a
// counted column changed. An update that sets one of them to the value
// it had (a Replace that keeps state and context, as a lifecycle's
// artifact) queues no trigger event and calls no function. It is true
// whenever the function would append anything, so the counts are as
// exact as without it; startup accepts this condition and no other
// (countedChangeDeparsed).
const countedChangeSQL = `OLD.id IS DISTINCT FROM NEW.id OR OLD.state IS DISTINCT FROM NEW.state` +
	` OR OLD.context_id IS DISTINCT FROM NEW.context_id OR OLD.owner IS DISTINCT FROM NEW.owner`

// countedChangeDeparsed is countedChangeSQL as pg_get_triggerdef writes
// it back (PostgreSQL 15), between "WHEN (" and ") EXECUTE".
const countedChangeDeparsed = `((old.id IS DISTINCT FROM new.id) OR (old.state IS DISTINCT FROM new.state)` +
	` OR (old.context_id IS DISTINCT FROM new.context_id) OR (old.owner IS DISTINCT FROM new.owner))`

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

// rebuildBody recomputes every counter into the base and empties the
// ledger. It locks a2a_tasks against writes (SHARE ROW EXCLUSIVE: reads go
// on) until the calling transaction ends, so no write falls between the
// recount and the triggers, and waits for a running fold.
var rebuildBody = `
BEGIN
	LOCK TABLE {schema}.a2a_tasks IN SHARE ROW EXCLUSIVE MODE;
	PERFORM ` + strings.ReplaceAll(foldLockSQL, "{wait}", "pg_advisory_xact_lock") + `;
	DELETE FROM {schema}.a2a_task_counts;
	DELETE FROM {schema}.a2a_task_count_deltas;
	DELETE FROM {schema}.a2a_task_count_moves;
	INSERT INTO {schema}.a2a_task_counts (kind, name, state, shard, n)
	SELECT kind, name, state, shard, n FROM (
	` + recountSQL + `
	) AS g
	WHERE kind = 0 OR name <> '';
END
`

// render fills a template's {schema} (qs: quoted as quote_ident quotes),
// shards (countShards) and {batch}.
func render(tmpl, qs string) string {
	return renderShards(replaceAll(tmpl, "{schema}", qs, "{batch}", strconv.Itoa(foldBatch)), countShards)
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
// lock a2a_tasks against writes, create the tables, the functions and the
// triggers (replacing those of an older release), then rebuild every
// counter. It must run in one transaction:
// the lock taken first is held until commit, so a write either committed
// before the rebuild (which counts it) or runs after the commit (and its
// trigger counts it). Reads go on throughout.
//
// The fold's lock comes next, as soon as the counter table it is keyed
// by exists, before anything locks a ledger: the ALTER TABLEs below lock
// each ledger ACCESS EXCLUSIVE (even when the column is there), and a
// fold holds its lock while it reads the ledgers. Taken later (only by
// the rebuild), a fold that began between the ALTER and the rebuild
// waited for the ledger while the install waited for its lock: deadlock
// (TestInstallBesideFold). The rebuild takes it again, which a
// transaction that holds it passes at once.
func countsInstallSQL(qs string) []string {
	stmts := []string{
		"LOCK TABLE " + qs + ".a2a_tasks IN SHARE ROW EXCLUSIVE MODE",
		render(countsTableSQL, qs),
		"SELECT " + render(strings.ReplaceAll(foldLockSQL, "{wait}", "pg_advisory_xact_lock"), qs),
		render(countsDeltasTableSQL, qs),
		render(countsMovesTableSQL, qs),
	}
	for _, stmt := range ledgerXactSQL {
		stmts = append(stmts, render(stmt, qs))
	}
	stmts = append(stmts, render(countsFoldsTableSQL, qs))
	for _, f := range countFunctions {
		stmts = append(stmts, createFunctionSQL(qs, f.name, "trigger", f.body))
	}
	for _, f := range countProcs {
		stmts = append(stmts, createFunctionSQL(qs, f.name, f.returns, f.body))
	}
	for _, tg := range countTriggers {
		stmts = append(stmts, "CREATE OR REPLACE TRIGGER "+tg.name+" "+render(tg.def, qs)+
			" EXECUTE FUNCTION "+qs+"."+tg.function+"()")
	}
	return append(stmts, "SELECT "+qs+".a2a_task_counts_rebuild()")
}

// countQuery returns the SQL and arguments that read q's total from the
// base counters plus the pending ledger rows — those no fold has taken,
// read by the ledgers' xact index above the latest fold's watermark
// (pendingRows) — and the number of pending rows the total read, or ok =
// false when q's shape is not counted there. Only a total by state reads
// a2a_task_count_moves. The statement runs after noSeqScanSQL in its
// transaction (listOn).
func (s *Store) countQuery(q *engine.Query) (sql string, args []any, ok bool) {
	if q.StatusAfter != nil {
		return "", nil, false
	}
	var a sqlArgs
	where := []string{"kind = " + strconv.Itoa(countAll), "name = ''"}
	var pending []string
	switch {
	case q.Owner != "" && q.ContextID != "":
		where = []string{"kind = " + strconv.Itoa(countOwnerContext), "name = " + a.add(ownerContextName(q.Owner, q.ContextID))}
		pending = []string{"owner = " + a.add(q.Owner), "context_id = " + a.add(q.ContextID)}
	case q.ContextID != "":
		p := a.add(q.ContextID)
		where = []string{"kind = " + strconv.Itoa(countContext), "name = " + p}
		pending = []string{"context_id = " + p}
	case q.Owner != "":
		p := a.add(q.Owner)
		where = []string{"kind = " + strconv.Itoa(countOwner), "name = " + p}
		pending = []string{"owner = " + p}
	}
	with := "WITH " + watermarkCTE(s.sql.folds) + " "
	deltas := pendingRows(s.sql.deltas, "state, context_id, owner, d")
	if q.Status == a2a.TaskStateUnspecified {
		return with + "SELECT ((SELECT coalesce(sum(n), 0) FROM " + s.sql.counts + whereClause(where) +
			") + p.d)::bigint, p.rows FROM " + pendingSum(deltas, "sum(d)", pending) + " AS p", a, true
	}
	st := a.add(string(q.Status))
	where = append(where, "state = "+st)
	// A move is -1 of its old state and +1 of its new, summed in place;
	// its context and owner are the task's.
	moves := pendingSum(pendingRows(s.sql.moves, "old_state, new_state, context_id, owner"),
		"sum((new_state = "+st+")::int - (old_state = "+st+")::int)", pending)
	return with + "SELECT ((SELECT coalesce(sum(n), 0) FROM " + s.sql.counts + whereClause(where) +
		") + p.d + m.d)::bigint, p.rows + m.rows FROM " + pendingSum(deltas, "sum(d)", append(pending, "state = "+st)) +
		" AS p, " + moves + " AS m", a, true
}

// pendingSum is the subquery of a total's pending part in rows (a
// subquery of pending ledger rows): agg over the rows meeting every
// condition (d) and the rows read (rows).
func pendingSum(rows, agg string, conds []string) string {
	if len(conds) > 0 {
		agg += " FILTER (WHERE " + strings.Join(conds, " AND ") + ")"
	}
	return "(SELECT coalesce(" + agg + ", 0) AS d, count(*) AS rows FROM " + rows + " AS l)"
}

// CountDrift is one counter that differs from a recount of a2a_tasks.
type CountDrift struct {
	Kind  string // "all", "context", "owner" or "owner+context"
	Name  string // the context ID, owner, or kind-3 name; "" for "all"
	State string
	Have  int64 // what the counters say: base + pending deltas, summed over shards
	Want  int64 // what a recount says
	// ZeroRows reports a context or owner base row left at zero, which
	// the fold deletes.
	ZeroRows bool
	// Shards reports shard rows that differ from a recount of their
	// shard (each row counts the tasks whose ID hashes to it), even
	// where the sum agrees.
	Shards bool
	// Unread is, for Kind "ledger", how many ledger rows lie below the
	// latest fold's watermark (issue 53) and outside its running
	// transactions: no total reads them, though the fold took them not
	// (written with an explicit xact, or by a fold that broke its rule).
	Unread int64
}

func (d CountDrift) String() string {
	if d.Kind == "ledger" {
		return fmt.Sprintf("%d ledger rows below the fold watermark, which totals do not read", d.Unread)
	}
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
// differences per (kind, name, state) (at most limit), and a "ledger"
// drift when ledger rows lie where no total reads them.
func (s *Store) checkCounts(ctx context.Context, limit int) ([]CountDrift, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, `WITH want AS (`+render(recountSQL, s.qschema)+`),
pending AS (
	SELECT kind, name, state, shard, sum(d) AS n FROM (`+render(strings.ReplaceAll(countExpand, "{rows}", s.sql.ledgers), s.qschema)+`
	) AS p (kind, name, state, shard, d)
	GROUP BY kind, name, state, shard),
have AS (
	SELECT coalesce(b.kind, p.kind) AS kind, coalesce(b.name, p.name) AS name, coalesce(b.state, p.state) AS state,
	       coalesce(b.shard, p.shard) AS shard, coalesce(b.n, 0) + coalesce(p.n, 0) AS n, coalesce(b.kind > 0 AND b.n = 0, false) AS zero
	FROM `+s.sql.counts+` b
	FULL JOIN pending p ON p.kind = b.kind AND p.name = b.name AND p.state = b.state AND p.shard = b.shard),
pairs AS (
	SELECT coalesce(w.kind, h.kind) AS kind, coalesce(w.name, h.name) AS name, coalesce(w.state, h.state) AS state,
	       coalesce(h.n, 0) AS have, coalesce(w.n, 0) AS want, coalesce(h.zero, false) AS zero
	FROM (SELECT * FROM want WHERE kind = 0 OR name <> '') w
	FULL JOIN have h ON h.kind = w.kind AND h.name = w.name AND h.state = w.state AND h.shard = w.shard)
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
	var unread int64
	if err := tx.QueryRow(ctx, s.sql.belowFolds).Scan(&unread); err != nil {
		return nil, err
	}
	if unread > 0 {
		drift = append(drift, CountDrift{Kind: "ledger", Unread: unread})
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
