package pushdelivery

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestPGTouchBounded: Touch keeps at most maxDirty tasks (events of many
// tasks between two claims cannot grow it without bound); past that the
// next reopen is of every record.
func TestPGTouchBounded(t *testing.T) {
	p := &PG{}
	p.mu.dirty = map[a2a.TaskID]struct{}{}
	p.mu.lastScan = time.Now()
	for i := range maxDirty + 10 {
		p.Touch(a2a.TaskID(fmt.Sprint("t", i)))
	}
	if len(p.mu.dirty) != maxDirty || !p.mu.full {
		t.Fatalf("%d tasks kept, full %v; want %d and a reopen of every record next", len(p.mu.dirty), p.mu.full, maxDirty)
	}
}

// TestPGTouchIgnoresImpossibleIDs: Touch keeps no ID that no task can
// have: a touched ID PostgreSQL cannot take as text would fail every
// reopen of the touched tasks (seen by a reviewer: every Claim failed
// until the next rescan).
func TestPGTouchIgnoresImpossibleIDs(t *testing.T) {
	p := &PG{}
	p.mu.dirty = map[a2a.TaskID]struct{}{}
	for _, id := range []string{"", "bad\x00id", "bad\xffid", strings.Repeat("x", 1025)} {
		p.Touch(a2a.TaskID(id))
	}
	if len(p.mu.dirty) != 0 {
		t.Fatalf("kept %q", slices.Collect(maps.Keys(p.mu.dirty)))
	}
}
