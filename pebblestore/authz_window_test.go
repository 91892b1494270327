package pebblestore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz/authztest"
)

// TestAuthzWriteWindow: the dispatcher's Cancel, AppendHistory and Delete
// act only on the version they checked (A9), on Pebble, whose conditional
// writes compare the revision under the task's write lock.
func TestAuthzWriteWindow(t *testing.T) {
	authztest.RunWriteWindow(t, func(tb testing.TB) engine.Store {
		return openTest(tb, vfs.NewMem(), "db", nil)
	})
}
