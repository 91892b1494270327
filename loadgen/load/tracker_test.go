package load

import (
	"fmt"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

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

// untouchedSince reads the tasks a chunk at a time and returns what one
// pass would: the tasks of the context (or all) created and quiet at the
// start, not deleted, with no write begun since, across chunk bounds.
func TestUntouchedSinceInChunks(t *testing.T) {
	defer func(n int) { untouchedChunk = n }(untouchedChunk)
	untouchedChunk = 3
	tr := newTracker()
	for i := range 10 {
		tr.added(a2a.TaskID(fmt.Sprintf("t%d", i)), fmt.Sprintf("c%d", i%2))
	}
	tr.begin("t1", "c1") // in flight at the start
	tr.begin("t4", "c0")
	tr.end("t4", false, true) // deleted before the start
	start := tr.now()
	tr.begin("t6", "c0") // written since the start
	tr.end("t6", false, false)
	tr.added("t10", "c0") // created since the start
	for _, tc := range []struct {
		ctx  string
		want string
	}{
		{"", "t0 t2 t3 t5 t7 t8 t9"},
		{"c0", "t0 t2 t8"},
		{"c1", "t3 t5 t7 t9"},
		{"c9", ""},
	} {
		var got []string
		for _, id := range tr.untouchedSince(start, tc.ctx) {
			got = append(got, string(id))
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("untouchedSince(%q) = %q, want %q", tc.ctx, g, tc.want)
		}
	}
}
