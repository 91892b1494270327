package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/a2astore/a2astore/engine/memstore"
	"github.com/a2astore/a2astore/engine/retention"
	"github.com/a2astore/a2astore/engine/storemetrics"
	"github.com/a2astore/a2astore/loadgen/load"
	"github.com/a2astore/a2astore/pushdelivery"
)

// TestDashboardUpToDate: the committed JSON is what the table generates.
func TestDashboardUpToDate(t *testing.T) {
	want, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("a2astore.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("a2astore.json is stale: run go run ./dashboards/gen")
	}
	var v map[string]any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("a2astore.json: %v", err)
	}
}

// families gathers reg and returns each series name (histograms as
// _bucket/_sum/_count) with the label names it carries.
func families(t *testing.T, reg *prometheus.Registry, into map[string]map[string]bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names := []string{mf.GetName()}
		if mf.GetType().String() == "HISTOGRAM" {
			names = []string{mf.GetName() + "_bucket", mf.GetName() + "_sum", mf.GetName() + "_count"}
		}
		for _, n := range names {
			if into[n] == nil {
				into[n] = map[string]bool{}
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					into[n][l.GetName()] = true
				}
			}
			if strings.HasSuffix(n, "_bucket") {
				into[n]["le"] = true
			}
		}
	}
}

// registries returns every series the server and loadgen register, after
// some load so that labelled series exist: the server's registry as
// cmd/a2astore-server builds it (storemetrics over the store, Go and process
// collectors, the LSM and pool collectors of its pebble and pg backends),
// and loadgen's over an embedded Pebble store (its own metrics, the store's
// and the LSM collector).
func registries(t *testing.T) map[string]map[string]bool {
	t.Helper()
	names := map[string]map[string]bool{}

	// Server.
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = store.Close() })
	metered := storemetrics.New(store, storemetrics.Options{Backend: "mem"})
	retain, err := retention.New(metered, retention.Options{Age: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	server := prometheus.NewRegistry()
	// What -cluster adds.
	cluster := storemetrics.NewClusterCollector("pg", func() storemetrics.ClusterStats { return storemetrics.ClusterStats{} })
	cluster.ObserveDelivery(time.Millisecond)
	server.MustRegister(retain.Metrics()) // what -retain adds
	server.MustRegister(metered, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		// What cmd/a2astore-server adds for -backend pebble and -backend pg.
		storemetrics.NewLSMCollector("pebble", func() storemetrics.LSMStats { return storemetrics.LSMStats{} }),
		storemetrics.NewPoolCollector("pg", func() storemetrics.PoolStats { return storemetrics.PoolStats{MaxConns: 4} }),
		// What -pg-replica adds.
		storemetrics.NewReplicaCollector("pg", func() storemetrics.ReplicaStats {
			return storemetrics.ReplicaStats{Fallbacks: map[string]int64{"paused": 0}, Standbys: []storemetrics.StandbyStats{{Name: "standby-1"}}}
		}),
		cluster)
	// What -push adds (every outcome and reason registered at zero).
	pushdelivery.NewMetrics(server, func() (int, time.Duration) { return 0, 0 })
	res, err := load.Run(t.Context(), load.Config{Store: metered, Workload: "list-deep", Ops: 300, Initial: 200, Seed: 1, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	families(t, server, names)

	// loadgen over Pebble.
	loadgen := prometheus.NewRegistry()
	loadgen.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	res, err = load.Run(t.Context(), load.Config{Target: "pebble", Dir: t.TempDir(), PebbleNoSync: true, Workload: "list-deep", Ops: 300, Initial: 200, Seed: 1, Registry: loadgen})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	families(t, loadgen, names)

	return names
}

// scrapeLabels are attached by Prometheus, not by the registries.
var scrapeLabels = []string{"job", "instance", "__name__"}

// TestQueriesParseAndNameRealMetrics: every panel query parses with the
// PromQL parser, and every metric and label it selects is registered by the
// server or loadgen.
func TestQueriesParseAndNameRealMetrics(t *testing.T) {
	promql := parser.NewParser(parser.Options{})
	names := registries(t)
	n := 0
	for _, row := range Rows {
		for _, p := range row.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				n++
				expr, err := promql.ParseExpr(Expand(tg.Expr, "1m"))
				if err != nil {
					t.Errorf("panel %q: %q: %v", p.Title, tg.Expr, err)
					continue
				}
				selectors := 0
				parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
					vs, ok := node.(*parser.VectorSelector)
					if !ok {
						return nil
					}
					selectors++
					labelsOf, ok := names[vs.Name]
					if !ok {
						t.Errorf("panel %q: metric %q is in no registry of server or loadgen", p.Title, vs.Name)
						return nil
					}
					for _, m := range vs.LabelMatchers {
						if m.Name == model.MetricNameLabel || slices.Contains(scrapeLabels, m.Name) {
							continue
						}
						if !labelsOf[m.Name] {
							t.Errorf("panel %q: metric %s has no label %q", p.Title, vs.Name, m.Name)
						}
					}
					return nil
				})
				if selectors == 0 {
					t.Errorf("panel %q: %q selects no metric", p.Title, tg.Expr)
				}
			}
		}
	}
	t.Logf("%d queries checked against %d series names", n, len(names))
}

// TestPanelsReturnData runs every panel query against a live Prometheus
// (A2ASTORE_PROMETHEUS_URL, set by dashboards/check.sh, which runs a
// server, loadgen and Prometheus) and requires a non-empty result.
func TestPanelsReturnData(t *testing.T) {
	base := os.Getenv("A2ASTORE_PROMETHEUS_URL")
	if base == "" {
		t.Skip("A2ASTORE_PROMETHEUS_URL not set: run make dashboards-check")
	}
	window := os.Getenv("A2ASTORE_RATE_INTERVAL")
	if window == "" {
		window = "20s"
	}
	for _, row := range Rows {
		for _, p := range row.Panels {
			for _, tg := range p.Targets {
				expr := Expand(tg.Expr, window)
				n, err := instantQuery(base, expr)
				switch {
				case err != nil:
					t.Errorf("panel %q: %s: %v", p.Title, expr, err)
				case n == 0:
					t.Errorf("panel %q: no data for %s", p.Title, expr)
				default:
					t.Logf("ok %3d series  %s / %s", n, p.Title, tg.Legend)
				}
			}
		}
	}
}

func instantQuery(base, expr string) (int, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("%s: %s", body.Status, body.Error)
	}
	return len(body.Data.Result), nil
}
