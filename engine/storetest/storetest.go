package storetest

import (
	"testing"

	"github.com/a2astore/a2astore/engine"
)

// Harness describes a backend to the conformance suite.
type Harness struct {
	// Open returns a new, empty store. When ClockInjection is true the store
	// must read time only from clock; otherwise clock is nil and the store
	// uses its own (for example the database's).
	Open func(t testing.TB, clock engine.Clock) engine.Store
	// ClockInjection reports whether the backend takes a custom clock; the
	// clauses that drive time (S4, S5) run only when it does.
	ClockInjection bool
	// BinaryIDs reports whether task and context IDs may hold any bytes (NUL
	// and invalid UTF-8 included). When false the suite checks such IDs are
	// rejected with ErrInvalidArgument (S8).
	BinaryIDs bool
}

// Checker is implemented by stores that can verify their own invariants
// (index count == task count, …). Run calls it at cleanup of every test.
type Checker interface {
	CheckInvariants() error
}

// Run runs every S, T and L clause against the harness's backend.
func Run(t *testing.T, h Harness) {
	t.Helper()
	panic("storetest: not yet implemented")
}
