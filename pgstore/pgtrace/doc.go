// Package pgtrace makes an OpenTelemetry span of each PostgreSQL statement
// that pgx runs inside a traced operation (SPEC H2): set a Tracer as the
// connections' tracer (pgstore.Options.Tracer, or pgx.ConnConfig.Tracer
// for a pool of your own).
//
// A statement makes a span only when its context already carries a span
// (a store operation's, an A2A call's, a push delivery's): the polls,
// claims and roll-ups of background services, which run outside any
// request, make none, so tracing them does not flood a trace backend with
// one-statement traces.
//
// A span is named "pg <OPERATION> <table>" and carries the operation (the
// command tag's, such as SELECT for a WITH … INSERT … SELECT; the
// statement's first keyword when it failed), the first table it names,
// the rows of its command tag and, on failure, the SQLSTATE. It never carries the
// statement's text, its arguments or an error's message: arguments hold
// task content, tokens and credentials, and PostgreSQL's messages quote
// values ("Key (id)=(...) already exists"). Batches are one span with an
// event per statement; COPY FROM is a span naming its table; a connection
// opened inside a traced operation is a "pg connect" span (no host, user
// or database: the configuration holds the password).
package pgtrace
