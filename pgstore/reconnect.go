package pgstore

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A connection whose backend was terminated while it sat idle in the pool
// (pg_terminate_backend, a server restart, a proxy's idle timeout) fails
// its next statement; the pool pings only connections idle for over a
// second. Idempotent reads (Get, List) therefore run once more, on a
// connection that answered a ping, when the first attempt found its
// connection gone. Writes are retried only when pgconn proves nothing
// was sent (SafeToRetry, in retryable): a terminated connection may have
// run the statement.

// Codes of a backend that the server ended: admin_shutdown (terminated,
// or a fast shutdown) and crash_shutdown.
const (
	codeAdminShutdown = "57P01"
	codeCrashShutdown = "57P02"
)

// connLost reports an error that means the connection was gone: the
// server ended its backend, or the socket closed.
func connLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == codeAdminShutdown || pgErr.Code == codeCrashShutdown
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// read runs the idempotent read f on a pooled connection, and once more
// on a live one when the first found its connection gone.
func (s *Store) read(ctx context.Context, f func(*pgxpool.Conn) error) error {
	return readOn(ctx, s.pool, f)
}

// readOn runs the idempotent read f on a connection of pool, and once
// more on a live one when the first found its connection gone.
func readOn(ctx context.Context, pool *pgxpool.Pool, f func(*pgxpool.Conn) error) error {
	err := withConn(ctx, pool, false, f)
	if err == nil || ctx.Err() != nil || !connLost(err) {
		return err
	}
	return withConn(ctx, pool, true, f)
}

// withConn runs f on a connection of pool; with live, on one that answers
// a ping (a connection that fails it is closed, and the pool drops it).
func withConn(ctx context.Context, pool *pgxpool.Pool, live bool, f func(*pgxpool.Conn) error) error {
	for tries := int32(0); ; tries++ {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		if live && tries <= pool.Config().MaxConns && c.Ping(ctx) != nil {
			c.Release()
			continue
		}
		defer c.Release()
		return f(c)
	}
}
