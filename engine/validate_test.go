package engine

import (
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
)

// TestKnownStatesAreTheProtocolsStates: the one list of states holds every
// state of the A2A protocol's TaskState enum but UNSPECIFIED, each once,
// active states before terminal ones.
func TestKnownStatesAreTheProtocolsStates(t *testing.T) {
	states := KnownStates()
	var want []a2a.TaskState
	for _, name := range a2apb.TaskState_name {
		if name != "TASK_STATE_UNSPECIFIED" {
			want = append(want, a2a.TaskState(name))
		}
	}
	if got := slices.Sorted(slices.Values(states)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("KnownStates = %v, want the protocol's %v", got, want)
	}
	for i, s := range states {
		if !KnownState(s) {
			t.Errorf("KnownState(%s) = false", s)
		}
		if i > 0 && states[i-1].Terminal() && !s.Terminal() {
			t.Errorf("active state %s after terminal %s", s, states[i-1])
		}
	}
	for _, s := range []a2a.TaskState{a2a.TaskStateUnspecified, "TASK_STATE_BOGUS", "working"} {
		if KnownState(s) {
			t.Errorf("KnownState(%q) = true", s)
		}
	}
	states[0] = "changed"
	if KnownStates()[0] == "changed" {
		t.Error("KnownStates returns the package's own slice")
	}
}
