package pgtrace

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span attributes (OpenTelemetry's database conventions where they have
// one).
var (
	attrSystem     = attribute.String("db.system.name", "postgresql")
	attrOperation  = attribute.Key("db.operation.name")
	attrCollection = attribute.Key("db.collection.name")
	attrReturned   = attribute.Key("db.response.returned_rows")
	attrAffected   = attribute.Key("db.response.affected_rows")
	attrStatusCode = attribute.Key("db.response.status_code")
	attrBatchSize  = attribute.Key("db.operation.batch.size")
)

// Tracer is a pgx tracer (pgx.QueryTracer, pgx.BatchTracer,
// pgx.CopyFromTracer, pgx.ConnectTracer) making a span per statement run
// inside a traced operation. It is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
	// summaries caches statements' summaries by SQL text (at most
	// maxSummaries; past that they are computed each time).
	summaries sync.Map // string → *summary
	cached    atomic.Int32
}

var (
	_ pgx.QueryTracer    = (*Tracer)(nil)
	_ pgx.BatchTracer    = (*Tracer)(nil)
	_ pgx.CopyFromTracer = (*Tracer)(nil)
	_ pgx.ConnectTracer  = (*Tracer)(nil)
)

// New returns a Tracer whose spans tp's tracer makes.
func New(tp trace.TracerProvider) *Tracer {
	return &Tracer{tracer: tp.Tracer("github.com/a2astore/a2astore/pgstore/pgtrace")}
}

// spanKey keys the statement a Trace…Start started a span for, which
// its Trace…End ends: a statement outside a traced operation has none,
// and its end must not end the caller's span.
type spanKey struct{}

// statement is a statement's span and summary (nil: not a query).
type statement struct {
	span trace.Span
	sum  *summary
}

// start starts a client span named name, a child of ctx's span, when ctx
// has one.
func (t *Tracer) start(ctx context.Context, name string, sum *summary, attrs ...attribute.KeyValue) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attrs...)
	}
	return context.WithValue(ctx, spanKey{}, &statement{span, sum})
}

// end ends the span start put in ctx, if any, with the statement's rows
// and its failure's class. When the command tag names another operation
// than the statement's first keyword (WITH … INSERT), the span takes the
// tag's: the server's word for what ran.
func end(ctx context.Context, tag pgconn.CommandTag, err error) {
	st, ok := ctx.Value(spanKey{}).(*statement)
	if !ok {
		return
	}
	span := st.span
	if span.IsRecording() {
		if op := verb(tag); st.sum != nil && op != "" && op != st.sum.op {
			name := "pg " + op
			if st.sum.table != "" {
				name += " " + st.sum.table
			}
			span.SetName(name)
			span.SetAttributes(attrOperation.String(op))
		}
		if err == nil {
			span.SetAttributes(rows(tag))
		} else {
			class := errorClass(err)
			span.SetAttributes(attrStatusCode.String(class))
			span.SetStatus(codes.Error, class)
		}
	}
	span.End()
}

// verb is the first word of tag ("" when empty).
func verb(tag pgconn.CommandTag) string {
	s := tag.String()
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

// rows is the attribute of tag's row count.
func rows(tag pgconn.CommandTag) attribute.KeyValue {
	if tag.Select() {
		return attrReturned.Int64(tag.RowsAffected())
	}
	return attrAffected.Int64(tag.RowsAffected())
}

// errorClass is err's SQLSTATE, or "canceled", "deadline_exceeded" or
// "error": never its message, which may quote values.
func errorClass(err error) string {
	var pg *pgconn.PgError
	switch {
	case errors.As(err, &pg):
		return pg.Code
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return "error"
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	s := t.summary(data.SQL)
	return t.start(ctx, s.name, s, s.attrs...)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.CommandTag, data.Err)
}

// TraceBatchStart implements pgx.BatchTracer: one span for the batch.
func (t *Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	n := 0
	if data.Batch != nil {
		n = data.Batch.Len()
	}
	return t.start(ctx, "pg batch", nil, attrSystem, attrBatchSize.Int(n))
}

// TraceBatchQuery implements pgx.BatchTracer: an event per statement on
// the batch's span.
func (t *Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	st, ok := ctx.Value(spanKey{}).(*statement)
	if !ok || !st.span.IsRecording() {
		return
	}
	span := st.span
	s := t.summary(data.SQL)
	attrs := append(s.attrs[1:len(s.attrs):len(s.attrs)], rows(data.CommandTag)) // without db.system.name
	if data.Err != nil {
		attrs = append(attrs[:len(attrs)-1], attrStatusCode.String(errorClass(data.Err)))
	}
	span.AddEvent("pg.query", trace.WithAttributes(attrs...))
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *Tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(ctx, pgconn.CommandTag{}, data.Err)
}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (t *Tracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	name, attrs := "pg COPY", []attribute.KeyValue{attrSystem, attrOperation.String("COPY")}
	if n := len(data.TableName); n > 0 && plainName(data.TableName[n-1]) {
		name += " " + data.TableName[n-1]
		attrs = append(attrs, attrCollection.String(data.TableName[n-1]))
	}
	return t.start(ctx, name, nil, attrs...)
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (t *Tracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromEndData) {
	end(ctx, data.CommandTag, data.Err)
}

// TraceConnectStart implements pgx.ConnectTracer. The span names nothing
// of the configuration (it holds the password).
func (t *Tracer) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return t.start(ctx, "pg connect", nil, attrSystem)
}

// TraceConnectEnd implements pgx.ConnectTracer.
func (t *Tracer) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	end(ctx, pgconn.CommandTag{}, data.Err)
}

// maxSummaries bounds the statements whose summaries are cached.
const maxSummaries = 1024

// summary is a statement's span name and attributes.
type summary struct {
	name      string
	op, table string               // Summarize's
	attrs     []attribute.KeyValue // db.system.name first
}

// summary returns sql's summary, cached.
func (t *Tracer) summary(sql string) *summary {
	if s, ok := t.summaries.Load(sql); ok {
		return s.(*summary)
	}
	op, table := Summarize(sql)
	s := &summary{name: "pg", op: op, table: table, attrs: []attribute.KeyValue{attrSystem}}
	if op != "" {
		s.name += " " + op
		s.attrs = append(s.attrs, attrOperation.String(op))
	}
	if table != "" {
		s.name += " " + table
		s.attrs = append(s.attrs, attrCollection.String(table))
	}
	if t.cached.Load() < maxSummaries {
		if _, loaded := t.summaries.LoadOrStore(sql, s); !loaded {
			t.cached.Add(1)
		}
	}
	return s
}

// Summarize returns what a span says of a statement: its operation (the
// first keyword, upper-cased: SELECT, INSERT, WITH, ...) and the first
// table it names (the last part of the name after its first FROM, INTO,
// UPDATE or TABLE keyword that is followed by a name), "" when there is
// none. Both are words of the statement outside its string literals,
// quoted strings and comments, and only plain identifiers are returned,
// so no literal the statement holds can come out (strings read as
// standard_conforming_strings, PostgreSQL's default, has them).
func Summarize(sql string) (op, table string) {
	lx := lexer{s: sql}
	first := lx.next()
	if first.kind != word {
		return "", ""
	}
	op = strings.ToUpper(first.text)
	for tok := first; tok.kind != eof; {
		if tok.kind == word && isTableKeyword(tok.text) {
			tok = lx.next()
			if name, ok := lx.qualifiedName(&tok); ok {
				return op, name
			}
			continue
		}
		tok = lx.next()
	}
	return op, ""
}

// isTableKeyword reports whether a table name may follow w.
func isTableKeyword(w string) bool {
	for _, k := range [...]string{"FROM", "INTO", "UPDATE", "TABLE"} {
		if strings.EqualFold(w, k) {
			return true
		}
	}
	return false
}

// plainName reports whether s is an identifier that needs no quoting
// (letters, digits, _ and $, not starting with a digit or $), at most
// PostgreSQL's 63 bytes.
func plainName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '$'):
		default:
			return false
		}
	}
	return true
}

// Token kinds of the lexer.
const (
	eof = iota
	word
	quoted // a double-quoted identifier
	dot
	other // a literal, a parameter, an operator, punctuation
)

type token struct {
	kind int
	text string // word and quoted (unquoted, "" doubled undone)
}

// lexer splits SQL into the tokens Summarize needs, skipping whitespace,
// comments, string literals (standard, with E before them, and dollar-quoted)
// and numbers.
type lexer struct {
	s string
	i int
}

// qualifiedName reads a name (parts separated by dots) starting at tok
// and returns its last part when it is plain; tok is left at the token
// after the name.
func (lx *lexer) qualifiedName(tok *token) (string, bool) {
	last, ok := "", false
	for tok.kind == word || tok.kind == quoted {
		last, ok = tok.text, true
		*tok = lx.next()
		if tok.kind != dot {
			break
		}
		*tok = lx.next()
	}
	return last, ok && plainName(last)
}

func (lx *lexer) next() token {
	s := lx.s
	for lx.i < len(s) {
		c := s[lx.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			lx.i++
		case c == '-' && strings.HasPrefix(s[lx.i:], "--"):
			if j := strings.IndexByte(s[lx.i:], '\n'); j >= 0 {
				lx.i += j + 1
			} else {
				lx.i = len(s)
			}
		case c == '/' && strings.HasPrefix(s[lx.i:], "/*"):
			lx.skipBlockComment()
		case c == '\'':
			lx.skipQuoted('\'', false)
			return token{kind: other}
		case c == '"':
			start := lx.i + 1
			lx.skipQuoted('"', false)
			end := max(start, lx.i-1)
			return token{kind: quoted, text: strings.ReplaceAll(s[start:end], `""`, `"`)}
		case c == '$':
			lx.skipDollar()
			return token{kind: other}
		case c == '.':
			lx.i++
			return token{kind: dot}
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80:
			start := lx.i
			for lx.i < len(s) && isWordByte(s[lx.i]) {
				lx.i++
			}
			if lx.i < len(s) && s[lx.i] == '\'' { // E'…', B'…', X'…', N'…': a literal
				lx.skipQuoted('\'', strings.EqualFold(s[start:lx.i], "E"))
				return token{kind: other}
			}
			return token{kind: word, text: s[start:lx.i]}
		case '0' <= c && c <= '9':
			for lx.i < len(s) && (isWordByte(s[lx.i]) || s[lx.i] == '.') {
				lx.i++
			}
			return token{kind: other}
		default:
			lx.i++
			return token{kind: other}
		}
	}
	return token{kind: eof}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= 0x80
}

// skipQuoted skips a string quoted by q from lx.i (at the opening quote),
// a doubled quote being part of it; with escapes (an escape string,
// E'...') a character after a backslash too. Other strings are read as
// standard_conforming_strings (on by default since PostgreSQL 9.1) has
// them: a backslash is a character.
func (lx *lexer) skipQuoted(q byte, escapes bool) {
	s := lx.s
	lx.i++
	for lx.i < len(s) {
		switch s[lx.i] {
		case '\\':
			if escapes {
				lx.i += 2
				continue
			}
		case q:
			if lx.i+1 < len(s) && s[lx.i+1] == q {
				lx.i += 2
				continue
			}
			lx.i++
			return
		}
		lx.i++
	}
	lx.i = len(s)
}

// skipBlockComment skips a /* */ comment, nested ones included.
func (lx *lexer) skipBlockComment() {
	s, depth := lx.s, 0
	for lx.i < len(s) {
		switch {
		case strings.HasPrefix(s[lx.i:], "/*"):
			depth++
			lx.i += 2
		case strings.HasPrefix(s[lx.i:], "*/"):
			depth--
			lx.i += 2
			if depth == 0 {
				return
			}
		default:
			lx.i++
		}
	}
}

// skipDollar skips a parameter ($1) or a dollar-quoted string
// ($tag$…$tag$) from lx.i (at the '$').
func (lx *lexer) skipDollar() {
	s := lx.s
	j := lx.i + 1
	for j < len(s) && isTagByte(s[j], j == lx.i+1) {
		j++
	}
	if j < len(s) && s[j] == '$' { // a dollar quote's opening tag
		tag := s[lx.i : j+1]
		if k := strings.Index(s[j+1:], tag); k >= 0 {
			lx.i = j + 1 + k + len(tag)
		} else {
			lx.i = len(s)
		}
		return
	}
	lx.i++ // a parameter: $ and its digits
	for lx.i < len(s) && '0' <= s[lx.i] && s[lx.i] <= '9' {
		lx.i++
	}
}

// isTagByte reports whether c may be in a dollar quote's tag (first: at
// its start, where a digit may not be).
func isTagByte(c byte, first bool) bool {
	if '0' <= c && c <= '9' {
		return !first
	}
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}
