package pgstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Write retries: at most maxAttempts tries, waiting a random time up to
// retryBase·2^attempt between them.
const (
	maxAttempts = 5
	retryBase   = 2 * time.Millisecond
)

// retryable reports a serialization failure or deadlock (the transaction
// may succeed if run again), or a failure before anything was sent
// (pgconn.SafeToRetry: the write provably did not run).
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == codeSerializationFailure || pgErr.Code == codeDeadlockDetected
	}
	return pgconn.SafeToRetry(err)
}

// retry runs a write until it succeeds, fails with anything but a
// serialization failure or deadlock, runs out of attempts, or ctx ends.
// f must be a whole transaction or single statement: a retried attempt
// starts from scratch.
func retry(ctx context.Context, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || !retryable(err) || attempt+1 == maxAttempts {
			return err
		}
		t := time.NewTimer(rand.N(retryBase << attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
