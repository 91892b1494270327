package storemetrics_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/a2astore/a2astore/engine"
	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/storemetrics"
)

func TestSeries(t *testing.T) {
	ctx := t.Context()
	m := storemetrics.New(memstore.New(memstore.Options{}), storemetrics.Options{Backend: "mem"})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)

	for i := range 30 {
		if _, err := m.Create(ctx, &a2a.Task{ID: a2a.TaskID(fmt.Sprint("t", i)), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Create(ctx, &a2a.Task{ID: "t0", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); !errors.Is(err, engine.ErrAlreadyExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := m.Get(ctx, "missing"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatal(err)
	}
	// The caller still receives the backend's figures in the response.
	resp, err := m.List(ctx, &engine.ListRequest{PageSize: 10, IncludeTotalSize: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stats.Examined != 11 {
		t.Errorf("caller's ListResponse.Stats.Examined = %d, want 11", resp.Stats.Examined)
	}
	if _, err := m.List(ctx, &engine.ListRequest{PageSize: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.List(ctx, &engine.ListRequest{PageToken: "0"}); !errors.Is(err, engine.ErrInvalidPageToken) {
		t.Fatal(err)
	}

	if n := testutil.CollectAndCount(m, "a2astore_store_operation_duration_seconds"); n != 5 {
		t.Errorf("%d latency series, want 5 (create ok/already_exists, get not_found, list ok/invalid_argument)", n)
	}
	// Two successful pages: 10 + 5 tasks, 11 + 6 entries examined.
	if err := testutil.CollectAndCompare(m, stringsReader(`
# HELP a2astore_store_list_totals_total Successful List calls that computed TotalSize (total=computed) or skipped it (total=skipped).
# TYPE a2astore_store_list_totals_total counter
a2astore_store_list_totals_total{backend="mem",total="computed"} 1
a2astore_store_list_totals_total{backend="mem",total="skipped"} 1
`), "a2astore_store_list_totals_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "a2astore_store_list_page_tasks":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 15 {
				t.Errorf("page tasks: count %d sum %v, want 2, 15", h.GetSampleCount(), h.GetSampleSum())
			}
		case "a2astore_store_list_examined_entries":
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() != 17 {
				t.Errorf("examined: count %d sum %v, want 2, 17", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

func TestOutcome(t *testing.T) {
	for err, want := range map[error]string{
		nil:                                      "ok",
		engine.ErrInvalidPageToken:               "invalid_argument",
		fmt.Errorf("x: %w", engine.ErrNotFound):  "not_found",
		engine.ErrRevisionConflict:               "revision_conflict",
		engine.ErrNotCancelable:                  "not_cancelable",
		engine.ErrAlreadyExists:                  "already_exists",
		fmt.Errorf("pg: %w", engine.ErrInternal): "internal",
		errors.New("anything else"):              "internal",
	} {
		if got := storemetrics.Outcome(err); got != want {
			t.Errorf("Outcome(%v) = %q, want %q", err, got, want)
		}
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func TestPoolCollector(t *testing.T) {
	c := storemetrics.NewPoolCollector("pg", func() storemetrics.PoolStats {
		return storemetrics.PoolStats{MaxConns: 8, TotalConns: 3, IdleConns: 1, AcquiredConns: 2, AcquireCount: 40, EmptyAcquireCount: 5, CanceledAcquireCount: 1, AcquireDuration: 1500 * time.Millisecond}
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP a2astore_pool_acquire_seconds_total Total time spent acquiring connections.
# TYPE a2astore_pool_acquire_seconds_total counter
a2astore_pool_acquire_seconds_total{backend="pg"} 1.5
# HELP a2astore_pool_acquires_total Successful connection acquires.
# TYPE a2astore_pool_acquires_total counter
a2astore_pool_acquires_total{backend="pg"} 40
# HELP a2astore_pool_canceled_acquires_total Acquires abandoned because their context ended.
# TYPE a2astore_pool_canceled_acquires_total counter
a2astore_pool_canceled_acquires_total{backend="pg"} 1
# HELP a2astore_pool_connections Open pool connections by state.
# TYPE a2astore_pool_connections gauge
a2astore_pool_connections{backend="pg",state="acquired"} 2
a2astore_pool_connections{backend="pg",state="idle"} 1
# HELP a2astore_pool_empty_acquires_total Acquires that waited because the pool had no idle connection.
# TYPE a2astore_pool_empty_acquires_total counter
a2astore_pool_empty_acquires_total{backend="pg"} 5
# HELP a2astore_pool_max_connections Configured maximum number of pool connections.
# TYPE a2astore_pool_max_connections gauge
a2astore_pool_max_connections{backend="pg"} 8
`))
	if err != nil {
		t.Error(err)
	}
}

// TestOwners: the decorator forwards CreateOwned, owner filters, the
// recorded owner and TaskOwners to a store that records owners, counting
// CreateOwned as a create; over one that does not, CreateOwned with an
// owner and owner-filtered lists fail with engine.ErrOwnersUnsupported
// without reaching it, and CreateOwned without owner is Create.
func TestOwners(t *testing.T) {
	ctx := t.Context()
	task := func(id string) *a2a.Task {
		return &a2a.Task{ID: a2a.TaskID(id), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	}
	mem := memstore.New(memstore.Options{})
	m := storemetrics.New(mem, storemetrics.Options{Backend: "mem"})
	if rec, err := m.CreateOwned(ctx, task("a"), "alice"); err != nil || rec.Owner != "alice" {
		t.Fatalf("CreateOwned: %+v, %v", rec, err)
	}
	if _, err := m.CreateOwned(ctx, task("b"), "bob"); err != nil {
		t.Fatal(err)
	}
	if rec, err := m.Get(ctx, "a"); err != nil || rec.Owner != "alice" {
		t.Fatalf("Get: %+v, %v", rec, err)
	}
	resp, err := m.List(ctx, &engine.ListRequest{Owner: "alice", IncludeTotalSize: true})
	if err != nil || len(resp.Tasks) != 1 || resp.TotalSize != 1 || len(resp.TaskOwners) != 1 || resp.TaskOwners[0] != "alice" {
		t.Fatalf("owner-filtered List: %+v, %v", resp, err)
	}
	if n := observations(t, m, "create", "ok"); n != 2 {
		t.Errorf("%d creates observed, want 2", n)
	}

	plain := storemetrics.New(struct{ engine.Store }{mem}, storemetrics.Options{Backend: "plain"})
	if _, err := plain.CreateOwned(ctx, task("c"), "carol"); !errors.Is(err, engine.ErrOwnersUnsupported) {
		t.Fatalf("CreateOwned over a store without owners: %v", err)
	}
	if n := observations(t, plain, "create", "internal"); n != 1 {
		t.Errorf("%d failed creates observed, want 1", n)
	}
	if _, err := mem.Get(ctx, "c"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the task was stored without its owner: %v", err)
	}
	if rec, err := plain.CreateOwned(ctx, task("d"), ""); err != nil || rec.Owner != "" {
		t.Fatalf("CreateOwned without owner: %+v, %v", rec, err)
	}
	if resp, err := plain.List(ctx, &engine.ListRequest{Owner: "alice"}); resp != nil || !errors.Is(err, engine.ErrOwnersUnsupported) {
		t.Fatalf("owner-filtered List over a store without owners: %v, %v", resp, err)
	}
	if _, err := plain.List(ctx, &engine.ListRequest{}); err != nil {
		t.Fatalf("List over a store without owners: %v", err)
	}
}

// observations is the number of observations of one latency series.
func observations(t *testing.T, m *storemetrics.Store, op, outcome string) uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "a2astore_store_operation_duration_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["operation"] == op && labels["outcome"] == outcome {
				return mt.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

func TestReplicaCollector(t *testing.T) {
	c := storemetrics.NewReplicaCollector("pg", func() storemetrics.ReplicaStats {
		return storemetrics.ReplicaStats{PrimaryReads: 7, PrimaryRetries: 1, Nudges: 2, Fallbacks: map[string]int64{"paused": 3},
			Standbys:    []storemetrics.StandbyStats{{Name: "standby-1", Reads: 20, Healthy: true, Lag: 2 * time.Second, LagBytes: 4096}},
			WaitBuckets: []float64{0, 0.001}, WaitCounts: []int64{15, 4, 1}, WaitSum: 80 * time.Millisecond}
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP a2astore_replica_catchup_wait_seconds Time a standby read waited for the standby to replay up to the read's start (0: none).
# TYPE a2astore_replica_catchup_wait_seconds histogram
a2astore_replica_catchup_wait_seconds_bucket{backend="pg",le="0"} 15
a2astore_replica_catchup_wait_seconds_bucket{backend="pg",le="0.001"} 19
a2astore_replica_catchup_wait_seconds_bucket{backend="pg",le="+Inf"} 20
a2astore_replica_catchup_wait_seconds_sum{backend="pg"} 0.08
a2astore_replica_catchup_wait_seconds_count{backend="pg"} 20
# HELP a2astore_replica_fallbacks_total Reads run on the primary although standbys are configured, by reason.
# TYPE a2astore_replica_fallbacks_total counter
a2astore_replica_fallbacks_total{backend="pg",reason="paused"} 3
# HELP a2astore_replica_healthy 1 when the health monitor last found the standby able to serve.
# TYPE a2astore_replica_healthy gauge
a2astore_replica_healthy{backend="pg",standby="standby-1"} 1
# HELP a2astore_replica_lag_bytes WAL bytes the primary has that the standby has not replayed.
# TYPE a2astore_replica_lag_bytes gauge
a2astore_replica_lag_bytes{backend="pg",standby="standby-1"} 4096
# HELP a2astore_replica_lag_seconds How long the primary has been ahead of the standby's replay position.
# TYPE a2astore_replica_lag_seconds gauge
a2astore_replica_lag_seconds{backend="pg",standby="standby-1"} 2
# HELP a2astore_replica_nudges_total WAL flushes that standby reads waiting for replay asked of the primary.
# TYPE a2astore_replica_nudges_total counter
a2astore_replica_nudges_total{backend="pg"} 2
# HELP a2astore_replica_primary_retries_total Primary reads taken again because a commit already in the WAL was not yet visible there.
# TYPE a2astore_replica_primary_retries_total counter
a2astore_replica_primary_retries_total{backend="pg"} 1
# HELP a2astore_replica_reads_total Get and List calls by where they ran: the primary or a standby.
# TYPE a2astore_replica_reads_total counter
a2astore_replica_reads_total{backend="pg",target="primary"} 7
a2astore_replica_reads_total{backend="pg",target="standby-1"} 20
`))
	if err != nil {
		t.Error(err)
	}
}
