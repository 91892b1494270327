package load

import "testing"

// Ending a write that never began is loadgen's own bug: it panics rather
// than update another task's state.
func TestTrackerEndWithoutBegin(t *testing.T) {
	tr := newTracker()
	tr.added("a", "c")
	defer func() {
		if recover() == nil {
			t.Fatal("end of a write that never began did not panic")
		}
		if id, _, _ := tr.pick(0); id != "a" || tr.live() != 1 {
			t.Fatalf("tracker changed: pick %q, live %d", id, tr.live())
		}
	}()
	tr.end("b", true, false)
}
