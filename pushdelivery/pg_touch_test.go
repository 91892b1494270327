package pushdelivery

import (
	"fmt"
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
	if len(p.mu.dirty) != maxDirty || !p.mu.lastScan.IsZero() {
		t.Fatalf("%d tasks kept, last scan %v; want %d and a scan of every record next", len(p.mu.dirty), p.mu.lastScan, maxDirty)
	}
}
