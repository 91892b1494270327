package pgstore

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

// TestStateLists: the SQL state lists name every known state (terminal
// ones only in the list Cancel refuses), each as its stored text.
func TestStateLists(t *testing.T) {
	for _, st := range engine.KnownStates() {
		lit := "'" + string(st) + "'"
		if !strings.Contains(knownStatesSQL, lit) {
			t.Errorf("%s missing from %s", lit, knownStatesSQL)
		}
		if strings.Contains(terminalStatesSQL, lit) != st.Terminal() {
			t.Errorf("%s: in %s is %v, terminal %v", lit, terminalStatesSQL, !st.Terminal(), st.Terminal())
		}
	}
	if got := sqlState(a2a.TaskState("it's")); got != "'it''s'" {
		t.Errorf("sqlState quotes as %s", got)
	}
}
