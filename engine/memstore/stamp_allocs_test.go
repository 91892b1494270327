package memstore

// A status time filter compares each visited stamp's instant without
// building its zone: no allocation per entry, whatever the offset (time's
// UnmarshalBinary allocates a Location for an offset that is not a whole
// hour).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/a2astore/a2astore/engine"
)

func TestStampDecodeAllocs(t *testing.T) {
	const n = 2000
	ctx := context.Background()
	for _, zone := range []*time.Location{time.UTC, time.FixedZone("IST", 5*3600+30*60)} {
		s := New(Options{})
		ts := time.Date(2025, 1, 1, 0, 0, 0, 0, zone)
		for i := range n {
			tk := &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t%05d", i)), ContextID: "c",
				Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts}}
			if _, err := s.Create(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		after := ts.Add(-time.Hour)
		req := &engine.ListRequest{StatusTimestampAfter: &after, IncludeTotalSize: true, PageSize: 1, Projection: engine.ProjectionLight}
		allocs := testing.AllocsPerRun(5, func() {
			resp, err := s.List(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.TotalSize != n {
				t.Fatalf("List: total %d, want %d", resp.TotalSize, n)
			}
		})
		t.Logf("zone %v: %.0f allocations per List (%.2f per task)", zone, allocs, allocs/n)
		if allocs > n/10 {
			t.Errorf("zone %v: a status-time total allocates %.0f times for %d tasks (per-entry stamp decoding)", zone, allocs, n)
		}
	}
}
