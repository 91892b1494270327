package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// OwnerCountsMigrationFile is the migration an externally managed schema
// runs, after MigrationFile, to get the owner column with its indexes
// (issue 15) and the task counters with their triggers (issue 11);
// startup errors about them name it (P3).
const OwnerCountsMigrationFile = "pgstore/migrations/003_owner_and_counts.sql"

// CountLedgerMigrationFile is the migration an externally managed schema
// runs after OwnerCountsMigrationFile to keep the counters with the delta
// ledger (issue 20): startup errors about the counters name both.
const CountLedgerMigrationFile = "pgstore/migrations/004_count_ledger.sql"

// CountWatermarkMigrationFile is the migration an externally managed
// schema runs after CountLedgerMigrationFile to read the ledgers by
// index above the folds' watermark (issue 53): it holds every counter
// statement the managed schema runs, so a database at 003 may run it
// alone. Startup errors about the counters name it. Migrations are
// found by these names, not by their numbers: a gap (006 is another
// change's) needs nothing.
const CountWatermarkMigrationFile = "pgstore/migrations/007_count_watermark.sql"

// CountTriggersMigrationFile is the migration an externally managed
// schema runs after CountWatermarkMigrationFile (or after
// OwnerCountsMigrationFile alone: it too holds every counter statement
// the managed schema runs) to get the cheaper counting triggers of
// issue 53: the update trigger's WHEN condition and one statement per
// small insert or delete. Startup errors about the counters name it.
const CountTriggersMigrationFile = "pgstore/migrations/009_count_triggers.sql"

// The owner column and the counters are installed in three steps, each
// its own transaction under the schema's advisory lock (the one
// ensureSchema takes), each skipped when the catalog shows it done:
//
//  1. owner column: the taskcodec reader functions, then the column and
//     its one-time backfill (ACCESS EXCLUSIVE on a2a_tasks while the
//     backfill runs; milliseconds when no row has an owner in metadata).
//  2. owner indexes: CREATE INDEX IF NOT EXISTS (SHARE: writes wait, reads
//     go on, for the index build).
//  3. counters: table, functions, triggers and a full recount under SHARE
//     ROW EXCLUSIVE (writes wait, reads go on, for one scan of a2a_tasks).
//
// The migration file holds the same statements for schema public; a test
// checks it does.

// extrasState is what the catalog says about the owner column, the owner
// indexes and the counters of one schema.
type extrasState struct {
	ownerColumn  bool     // owner text NOT NULL
	ownerIndexes []string // missing owner index definitions
	counts       []string // what is missing or wrong about the counters
}

func (st *extrasState) complete() bool {
	return st.ownerColumn && len(st.ownerIndexes) == 0 && len(st.counts) == 0
}

// problems describes what is missing, for ErrSchema.
func (st *extrasState) problems() string {
	var p []string
	if !st.ownerColumn {
		p = append(p, "column owner (text NOT NULL)")
	}
	if len(st.ownerIndexes) > 0 {
		p = append(p, "the owner index "+strings.Join(st.ownerIndexes, ", "))
	}
	p = append(p, st.counts...)
	return strings.Join(p, "; ")
}

// inspectExtras reads the catalog. db is the pool or a transaction.
func (s *Store) inspectExtras(ctx context.Context, db queryer) (*extrasState, error) {
	st := &extrasState{}
	var ownerType string
	var ownerNotNull bool
	err := db.QueryRow(ctx, `
SELECT format_type(a.atttypid, a.atttypmod), a.attnotnull
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = 'a2a_tasks' AND a.attname = 'owner' AND NOT a.attisdropped`, s.schema).Scan(&ownerType, &ownerNotNull)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, err
	default:
		st.ownerColumn = ownerType == "text" && ownerNotNull
	}

	defs, err := s.indexDefs(ctx, db, "a2a_tasks")
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(defs, isOwnerIndex) {
		st.ownerIndexes = append(st.ownerIndexes, `(owner, updated_at DESC, id COLLATE "C" DESC)`)
	}
	if !slices.ContainsFunc(defs, isOwnerContextIndex) {
		st.ownerIndexes = append(st.ownerIndexes, `(owner, context_id, updated_at DESC, id COLLATE "C" DESC)`)
	}

	st.counts, err = s.inspectCounts(ctx, db)
	return st, err
}

// inspectCounts checks the counter table's columns and key, the trigger
// functions' bodies and the triggers, and returns what is wrong.
func (s *Store) inspectCounts(ctx context.Context, db queryer) ([]string, error) {
	problems, err := s.inspectCountTables(ctx, db)
	if err != nil || len(problems) > 0 {
		return problems, err
	}
	for _, step := range []func(context.Context, queryer) ([]string, error){s.inspectCountFunctions, s.inspectCountTriggers} {
		more, err := step(ctx, db)
		if err != nil {
			return nil, err
		}
		problems = append(problems, more...)
	}
	return problems, nil
}

// inspectCountTables checks the counter, ledger and watermark tables'
// columns, the counter table's key, the ledgers' xact indexes and the
// watermark table's key (issue 53).
func (s *Store) inspectCountTables(ctx context.Context, db queryer) ([]string, error) {
	var problems []string
	for _, tbl := range []struct {
		name string
		cols []string
	}{
		{"a2a_task_counts", []string{"kind smallint", "name text", "state text", "shard smallint", "n bigint"}},
		{"a2a_task_count_deltas", []string{"shard smallint", "state text", "context_id text", "owner text", "d bigint", "xact xid8"}},
		{"a2a_task_count_moves", []string{"shard smallint", "old_state text", "new_state text", "context_id text", "owner text", "xact xid8"}},
		{"a2a_task_count_folds", []string{"fold bigint", "upto xid8", "running xid8[]"}},
	} {
		var cols []string
		err := db.QueryRow(ctx, `
SELECT coalesce(array_agg(a.attname::text || ' ' || format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum), '{}')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped`, s.schema, tbl.name).Scan(&cols)
		if err != nil {
			return nil, err
		}
		if !slices.Equal(cols, tbl.cols) {
			problems = append(problems, "table "+tbl.name+" "+strings.Join(tbl.cols, ", "))
		}
	}
	if len(problems) > 0 {
		return problems, nil
	}
	for _, key := range []struct {
		table   string
		columns []string
		unique  bool
	}{
		{"a2a_task_counts", []string{"kind", "name", "state", "shard"}, true},
		{"a2a_task_count_deltas", []string{"xact"}, false},
		{"a2a_task_count_moves", []string{"xact"}, false},
		{"a2a_task_count_folds", []string{"fold"}, true},
	} {
		defs, err := s.indexDefs(ctx, db, key.table)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(defs, func(d indexDef) bool {
			return d.usable && (d.unique || !key.unique) && slices.Equal(d.columns, key.columns) && !slices.Contains(d.desc, true)
		}) {
			problems = append(problems, key.table+"'s index ("+strings.Join(key.columns, ", ")+")")
		}
	}
	return problems, nil
}

// inspectCountFunctions checks the function bodies, as written by
// countsInstallSQL for this schema. The schema may be written quoted or
// as quote_ident writes it.
func (s *Store) inspectCountFunctions(ctx context.Context, db queryer) ([]string, error) {
	rows, err := db.Query(ctx, `
SELECT p.proname::text, p.prosrc
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1 AND p.proname LIKE 'a2a\_task\_counts\_%' AND p.pronargs = 0`, s.schema)
	if err != nil {
		return nil, err
	}
	bodies := map[string]string{}
	var name, src string
	if _, err := pgx.ForEachRow(rows, []any{&name, &src}, func() error { bodies[name] = src; return nil }); err != nil {
		return nil, err
	}
	var problems []string
	check := func(name, body string) {
		if src, ok := bodies[name]; !ok || !s.sameBody(src, body) {
			problems = append(problems, "function "+name+" as this release defines it")
		}
	}
	for _, f := range countFunctions {
		check(f.name, f.body)
	}
	for _, f := range countProcs {
		check(f.name, f.body)
	}
	return problems, nil
}

// inspectCountTriggers checks that there is exactly one trigger per
// function, of the right type (and, for UPDATE, firing on at least state,
// context_id, owner), without a WHEN condition but the update trigger's,
// which must be exactly countedChangeSQL (issue 53), firing for ordinary
// sessions: enabled as CREATE TRIGGER enables it ('O', fires unless
// session_replication_role is replica) or ENABLE ALWAYS ('A', fires for
// every session, replica role included, which keeps the counters exact for
// even more writers). Disabled ('D') and ENABLE REPLICA ('R', fires only
// in replica role) triggers do not count ordinary writes; neither does one
// whose WHEN condition can be false when a counted column changes.
func (s *Store) inspectCountTriggers(ctx context.Context, db queryer) ([]string, error) {
	rows, err := db.Query(ctx, `
SELECT p.proname::text, t.tgtype, t.tgenabled IN ('O', 'A'),
       CASE WHEN t.tgqual IS NULL THEN '' ELSE coalesce(substring(pg_get_triggerdef(t.oid) FROM ' WHEN \((.*)\) EXECUTE '), '?') END,
       coalesce(t.tgoldtable::text, ''), coalesce(t.tgnewtable::text, ''),
       ARRAY(SELECT a.attname::text FROM unnest(t.tgattr::int2[]) k(attnum)
             JOIN pg_attribute a ON a.attrelid = t.tgrelid AND a.attnum = k.attnum)
FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_proc p ON p.oid = t.tgfoid
JOIN pg_namespace pn ON pn.oid = p.pronamespace
WHERE n.nspname = $1 AND c.relname = 'a2a_tasks' AND NOT t.tgisinternal AND pn.nspname = $1`, s.schema)
	if err != nil {
		return nil, err
	}
	type trig struct {
		tgtype           int16
		enabled          bool   // fires for ordinary sessions
		when             string // its WHEN condition, deparsed ("": none)
		oldTable, newTab string
		cols             []string
	}
	trigs := map[string][]trig{}
	var fn string
	var tg trig
	if _, err := pgx.ForEachRow(rows, []any{&fn, &tg.tgtype, &tg.enabled, &tg.when, &tg.oldTable, &tg.newTab, &tg.cols}, func() error {
		trigs[fn] = append(trigs[fn], tg)
		return nil
	}); err != nil {
		return nil, err
	}
	var problems []string
	for _, want := range countTriggers {
		got := trigs[want.function]
		ok := len(got) == 1 && got[0].enabled && got[0].when == want.when && got[0].tgtype == want.tgtype &&
			got[0].oldTable == want.oldTable && got[0].newTab == want.newTable
		if ok && len(got[0].cols) > 0 {
			for _, c := range want.columns {
				ok = ok && slices.Contains(got[0].cols, c)
			}
		}
		if !ok {
			problems = append(problems, "trigger "+want.name+" ("+render(want.def, s.qschema)+")")
		}
	}
	return problems, nil
}

// sameBody reports whether src is body written for the store's schema,
// qualified either as quote_ident writes the schema or fully quoted.
func (s *Store) sameBody(src, body string) bool {
	return src == render(body, s.qschema) || src == render(body, pgx.Identifier{s.schema}.Sanitize())
}

// indexDefs lists the indexes of schema.table.
func (s *Store) indexDefs(ctx context.Context, db queryer, table string) ([]indexDef, error) {
	rows, err := db.Query(ctx, `
SELECT ic.relname::text,
       ARRAY(SELECT a.attname::text
             FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
             LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE k.ord <= i.indnkeyatts ORDER BY k.ord),
       ARRAY(SELECT (o.opt & 1) = 1
             FROM unnest(i.indoption::int2[]) WITH ORDINALITY o(opt, ord)
             WHERE o.ord <= i.indnkeyatts ORDER BY o.ord),
       ARRAY(SELECT coalesce(co.collname::text, '')
             FROM unnest(i.indcollation::oid[]) WITH ORDINALITY k(coll, ord)
             LEFT JOIN pg_collation co ON co.oid = k.coll
             WHERE k.ord <= i.indnkeyatts ORDER BY k.ord),
       am.amname = 'btree' AND i.indisvalid AND i.indisready AND i.indpred IS NULL AND i.indexprs IS NULL,
       i.indisunique
FROM pg_index i
JOIN pg_class tc ON tc.oid = i.indrelid
JOIN pg_namespace n ON n.oid = tc.relnamespace
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_am am ON am.oid = ic.relam
WHERE n.nspname = $1 AND tc.relname = $2`, s.schema, table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (indexDef, error) {
		var d indexDef
		err := r.Scan(&d.name, &d.columns, &d.desc, &d.collations, &d.usable, &d.unique)
		return d, err
	})
}

// checkExtras is the startup check (P3) of the owner column, its indexes
// and the counters.
func (s *Store) checkExtras(ctx context.Context) error {
	st, err := s.inspectExtras(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("pgstore: check schema: %w", err)
	}
	if !st.complete() {
		return fmt.Errorf("%w: %s.a2a_tasks lacks %s; run %s, then %s", ErrSchema, s.schema, st.problems(), OwnerCountsMigrationFile, CountTriggersMigrationFile)
	}
	return nil
}

// ensureExtras installs what inspectExtras finds missing, one step per
// transaction (see above). Each step takes the advisory lock and looks
// again, so of several processes starting at once one installs and the
// others find it done.
func (s *Store) ensureExtras(ctx context.Context) error {
	steps := []struct {
		needed func(*extrasState) bool
		before func(pgx.Tx) error // runs first, after the advisory lock
		stmts  func(qs string) []string
	}{
		{func(st *extrasState) bool { return !st.ownerColumn }, func(tx pgx.Tx) error {
			// The backfill's key, which ownerColumnInstallSQL's default
			// then leaves as it is.
			_, err := tx.Exec(ctx, `SELECT set_config('`+upgradeOwnerKeySetting+`', $1, true)`, s.upgradeOwnerKey)
			return err
		}, ownerColumnInstallSQL},
		{func(st *extrasState) bool { return len(st.ownerIndexes) > 0 }, nil, func(qs string) []string {
			var stmts []string
			for _, stmt := range ownerIndexesSQL {
				stmts = append(stmts, render(stmt, qs))
			}
			// The (owner, state) index (C7) with them: the owner column is
			// new (and the table locked or empty).
			return append(stmts, statusIndexes[1].inTx(qs))
		}},
		{func(st *extrasState) bool { return len(st.counts) > 0 }, nil, countsInstallSQL},
	}
	st, err := s.inspectExtras(ctx, s.pool)
	if err != nil || st.complete() {
		return err
	}
	for _, step := range steps {
		if !step.needed(st) {
			continue
		}
		if err := s.inTx(ctx, func(tx pgx.Tx) error {
			if err := advisoryLock(ctx, tx, s.schema); err != nil {
				return err
			}
			now, err := s.inspectExtras(ctx, tx)
			if err != nil || !step.needed(now) {
				return err
			}
			if step.before != nil {
				if err := step.before(tx); err != nil {
					return err
				}
			}
			for _, stmt := range step.stmts(s.qschema) {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// advisoryLock takes ensureSchema's transaction-scoped lock on schema.
func advisoryLock(ctx context.Context, tx pgx.Tx, schema string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('a2astore.pgstore:' || $1, 0))`, schema)
	return err
}

// inTx runs f in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, f func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// quoteSchema asks the server how quote_ident writes the schema name.
func quoteSchema(ctx context.Context, db queryer, schema string) (string, error) {
	var q string
	err := db.QueryRow(ctx, "SELECT quote_ident($1)", schema).Scan(&q)
	return q, err
}
