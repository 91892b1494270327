package pgstore_test

import (
	"context"
	"testing"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz/authztest"
	"github.com/a2astore/a2astore/internal/pgtest"
	"github.com/a2astore/a2astore/pgstore"
)

// TestAuthzWriteWindow: the dispatcher's Cancel, AppendHistory and Delete
// act only on the version they checked (A9), on PostgreSQL, whose
// conditional writes compare the revision in the writing statement.
func TestAuthzWriteWindow(t *testing.T) {
	dsn := pgtest.DSN(t)
	authztest.RunWriteWindow(t, func(tb testing.TB) engine.Store {
		s, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Schema: pgtest.Schema(tb, dsn)})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	})
}
