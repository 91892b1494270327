package authztest_test

import (
	"testing"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/authz/authztest"
	"github.com/a2astore/a2astore/engine/memstore"
)

// A backend attacks the dispatcher's check-then-write window over itself
// from its own _test.go file, as func TestWriteWindow(t *testing.T).
// (This example only compiles: RunWriteWindow needs the test's t.)
func ExampleRunWriteWindow() {
	writeWindow := func(t *testing.T) {
		authztest.RunWriteWindow(t, func(t testing.TB) engine.Store {
			s := memstore.New(memstore.Options{})
			t.Cleanup(func() { s.Close() })
			return s
		})
	}
	_ = writeWindow
}
