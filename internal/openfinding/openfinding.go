// Package openfinding gates the tests of known defects that are not
// fixed yet: such a test attacks the defect and fails, so it runs only
// when A2ASTORE_OPEN_FINDINGS=1 (go test ./... stays green); the
// session notes and docs/lab.md list what each one shows.
package openfinding

import (
	"os"
	"testing"
)

// Env is the variable that runs the open findings' tests.
const Env = "A2ASTORE_OPEN_FINDINGS"

// Gate skips tb unless Env is set: tb is the test of an open finding
// and fails until its defect is fixed.
func Gate(tb testing.TB) {
	tb.Helper()
	if os.Getenv(Env) == "" {
		tb.Skipf("open finding (fails until fixed): set %s=1 to run it", Env)
	}
}
