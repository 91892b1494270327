package pushdelivery

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestDepthGauges: queue depth and the oldest due age come from the depth
// function, asked once per scrape.
func TestDepthGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	calls := 0
	NewMetrics(reg, func() (int, time.Duration) {
		calls++
		return 7, 90 * time.Second
	})
	want := `
# HELP a2astore_push_oldest_due_seconds Age of the oldest due push delivery.
# TYPE a2astore_push_oldest_due_seconds gauge
a2astore_push_oldest_due_seconds 90
# HELP a2astore_push_queue_depth Push configurations with events still to deliver.
# TYPE a2astore_push_queue_depth gauge
a2astore_push_queue_depth 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "a2astore_push_queue_depth", "a2astore_push_oldest_due_seconds"); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("depth called %d times for one scrape", calls)
	}
}

// TestNilMetrics: a nil *Metrics records nothing and does not panic.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.attempt(Reason5xx, OutcomeFailed, 0)
	m.lostLease()
}
