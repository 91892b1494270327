package pgtrace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore/pgtrace"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSummarize: the operation and the first table, schema-qualified and
// quoted names included; nothing from literals, quoted strings, comments
// or parameters, even when they look like a FROM clause.
func TestSummarize(t *testing.T) {
	for _, c := range []struct{ sql, op, table string }{
		{`SELECT id FROM "public"."a2a_tasks" WHERE id = $1`, "SELECT", "a2a_tasks"},
		{`insert into a2a_cluster_work (task_id) values ($1) returning id`, "INSERT", "a2a_cluster_work"},
		{`UPDATE "s"."a2a_push_configs" SET done = true`, "UPDATE", "a2a_push_configs"},
		{`DELETE FROM public.a2a_task_log WHERE task_id = $1`, "DELETE", "a2a_task_log"},
		{`WITH c AS (SELECT clock_timestamp()) SELECT count(*) FROM (SELECT 1) AS x, t2`, "WITH", ""},
		{`  -- a comment FROM secret_comment
		SELECT 'a FROM secret_literal' FROM kv`, "SELECT", "kv"},
		{`SELECT E'it\'s FROM secret_e' FROM kv`, "SELECT", "kv"},
		{`SELECT 'a\' || ' FROM secret_std ' FROM kv`, "SELECT", "kv"},
		{`SELECT $tag$ FROM secret_dollar $tag$ FROM kv`, "SELECT", "kv"},
		{`SELECT /* FROM /* nested */ secret_block */ 1 FROM "kv"`, "SELECT", "kv"},
		{`SELECT 1 FROM "Mixed Case"`, "SELECT", ""},
		{`BEGIN`, "BEGIN", ""},
		{`'SECRET'`, "", ""},
		{``, "", ""},
		{`SELECT 'unterminated FROM secret`, "SELECT", ""},
	} {
		op, table := pgtrace.Summarize(c.sql)
		if op != c.op || table != c.table {
			t.Errorf("Summarize(%q) = %q, %q; want %q, %q", c.sql, op, table, c.op, c.table)
		}
		if strings.Contains(op+table, "secret") || strings.Contains(op+table, "SECRET") {
			t.Errorf("Summarize(%q) returned a literal: %q %q", c.sql, op, table)
		}
	}
}

// TestSpans (H2): a statement run inside a traced operation is a child
// span named after its operation (its command tag's, for WITH …) and
// table, with its rows; a failed one
// carries its SQLSTATE; a batch is one span with an event per statement;
// a statement outside any span makes none; and no span carries the
// statement's arguments, its literals or PostgreSQL's error message —
// "SECRET" planted in each, and every span grepped for it.
func TestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = pgtrace.New(tp)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	// Outside any span: no span.
	if _, err := pool.Exec(t.Context(), `CREATE TABLE kv (k text PRIMARY KEY, v text)`); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans of statements outside any span", n)
	}

	ctx, parent := tp.Tracer("test").Start(t.Context(), "operation")
	if _, err := pool.Exec(ctx, `INSERT INTO kv VALUES ($1, $2), ($3, $4)`, "k1-SECRET", "v1-SECRET", "k2-SECRET", "v2-SECRET"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `WITH w AS (SELECT $1::text AS k) UPDATE kv SET v = 'w' FROM w WHERE kv.k = w.k`, "k1-SECRET"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM kv WHERE v <> 'lit-SECRET'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("select: %v, %d", err, n)
	}
	_, err = pool.Exec(ctx, `INSERT INTO kv VALUES ($1, 'v')`, "k1-SECRET")
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "23505" || !strings.Contains(pgErr.Detail, "SECRET") {
		t.Fatalf("duplicate insert: %v (want a unique violation whose detail quotes the key)", err)
	}
	var bad int
	err = pool.QueryRow(ctx, `SELECT $1::text::int FROM kv LIMIT 1`, "n-SECRET").Scan(&bad)
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "22P02" || !strings.Contains(pgErr.Message, "SECRET") {
		t.Fatalf("bad cast: %v (want an invalid_text_representation whose message quotes the value)", err)
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE kv SET v = $1 WHERE k = $2`, "v3-SECRET", "k1-SECRET")
	b.Queue(`DELETE FROM kv WHERE k = $1`, "k2-SECRET")
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"kv"}, []string{"k", "v"}, pgx.CopyFromRows([][]any{{"k4-SECRET", "v4-SECRET"}})); err != nil {
		t.Fatal(err)
	}
	parent.End()

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.Name() == "operation" {
			continue
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%s is not a child of the operation's span", s.Name())
		}
		if strings.Contains(fmt.Sprint(s.Name(), s.Attributes(), s.Events(), s.Status(), s.Links()), "SECRET") {
			t.Errorf("span %s carries a planted value: %v %v %v", s.Name(), s.Attributes(), s.Events(), s.Status())
		}
		name := s.Name()
		if s.Status().Code == codes.Error {
			name += " (failed)"
		}
		byName[name] = s
	}
	want := map[string]map[string]string{
		"pg INSERT kv":          {"db.operation.name": "INSERT", "db.collection.name": "kv", "db.response.affected_rows": "2", "db.system.name": "postgresql"},
		"pg SELECT kv":          {"db.operation.name": "SELECT", "db.response.returned_rows": "1"},
		"pg UPDATE kv":          {"db.operation.name": "UPDATE", "db.collection.name": "kv", "db.response.affected_rows": "1"}, // WITH … UPDATE: its tag's operation
		"pg INSERT kv (failed)": {"db.response.status_code": "23505"},
		"pg SELECT kv (failed)": {"db.response.status_code": "22P02"},
		"pg batch":              {"db.operation.batch.size": "2"},
		"pg COPY kv":            {"db.collection.name": "kv", "db.response.affected_rows": "1"},
	}
	for name, attrs := range want {
		s, ok := byName[name]
		if !ok {
			t.Errorf("no span %s among %v", name, keys(byName))
			continue
		}
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.String()
		}
		for k, v := range attrs {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q (all: %v)", name, k, got[k], v, got)
			}
		}
	}
	if s := byName["pg INSERT kv (failed)"]; s != nil && s.Status().Description != "23505" {
		t.Errorf("failed insert's status %+v, want the SQLSTATE alone", s.Status())
	}
	if s := byName["pg batch"]; s != nil {
		if ev := s.Events(); len(ev) != 2 || ev[0].Name != "pg.query" {
			t.Errorf("batch events %v, want one pg.query per statement", ev)
		}
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ExampleNew installs the tracer on a pool: the statements run under a
// context that carries a span become its children.
func ExampleNew() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig("postgres://localhost/a2a?connect_timeout=1")
	if err != nil {
		panic(err)
	}
	tp := sdktrace.NewTracerProvider() // the application's, with its exporter
	cfg.ConnConfig.Tracer = pgtrace.New(tp)
	pool, err := pgxpool.NewWithConfig(ctx, cfg) // connects lazily
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	ctx, span := tp.Tracer("app").Start(ctx, "operation")
	defer span.End()
	_, _ = pool.Exec(ctx, "SELECT 1") // a span "pg SELECT", a child of "operation"
}
