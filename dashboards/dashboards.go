package dashboards

import (
	"encoding/json"
	"strings"
)

// Target is one query of a panel.
type Target struct {
	Expr   string // PromQL; may use $backend and $__rate_interval
	Legend string
}

// Panel is one time-series panel.
type Panel struct {
	Title       string
	Description string
	Unit        string // Grafana unit id: s, ops, short, bytes, percentunit
	Targets     []Target
}

// Row groups panels under a heading.
type Row struct {
	Title  string
	Panels []Panel
}

const sel = `{backend=~"$backend"}`

// q selects a gauge or counter by the backend variable.
func q(name string) string { return name + sel }

// quantiles returns p50, p99 and p99.9 of a classic histogram by the labels.
func quantiles(metric, by, legendBy string) []Target {
	var t []Target
	for _, p := range [][2]string{{"0.5", "p50"}, {"0.99", "p99"}, {"0.999", "p99.9"}} {
		t = append(t, Target{
			Expr:   `histogram_quantile(` + p[0] + `, sum by (le` + by + `) (rate(` + metric + `_bucket` + sel + `[$__rate_interval])))`,
			Legend: legendBy + p[1],
		})
	}
	return t
}

// Rows is the dashboard, top to bottom.
var Rows = []Row{
	{Title: "Store operations (server or embedded store, storemetrics)", Panels: []Panel{
		{Title: "Operation latency quantiles", Description: "p50 / p99 / p99.9 per operation, from the a2astore_store_operation_duration_seconds histogram.", Unit: "s",
			Targets: quantiles("a2astore_store_operation_duration_seconds", ", operation", "{{operation}} ")},
		{Title: "Throughput by operation and outcome", Unit: "ops",
			Targets: []Target{{Expr: `sum by (operation, outcome) (rate(a2astore_store_operation_duration_seconds_count` + sel + `[$__rate_interval]))`, Legend: "{{operation}} {{outcome}}"}}},
		{Title: "Error ratio by operation", Description: "Share of calls whose outcome is not ok.", Unit: "percentunit",
			Targets: []Target{{Expr: `sum by (operation) (rate(a2astore_store_operation_duration_seconds_count{backend=~"$backend", outcome!="ok"}[$__rate_interval])) / sum by (operation) (rate(a2astore_store_operation_duration_seconds_count` + sel + `[$__rate_interval]))`, Legend: "{{operation}}"}}},
	}},
	{Title: "List cost", Panels: []Panel{
		{Title: "Entries examined per page", Description: "Index entries or rows a List page read (engine.ListStats): p50, p99 and the mean.", Unit: "short",
			Targets: append(quantiles("a2astore_store_list_examined_entries", "", ""),
				Target{Expr: `sum(rate(a2astore_store_list_examined_entries_sum` + sel + `[$__rate_interval])) / sum(rate(a2astore_store_list_examined_entries_count` + sel + `[$__rate_interval]))`, Legend: "mean"})},
		{Title: "Tasks returned per page", Unit: "short",
			Targets: []Target{{Expr: `sum(rate(a2astore_store_list_page_tasks_sum` + sel + `[$__rate_interval])) / sum(rate(a2astore_store_list_page_tasks_count` + sel + `[$__rate_interval]))`, Legend: "mean"}}},
		{Title: "Totals computed / skipped", Description: "List calls that counted TotalSize vs skipped it, and the entries inspected for counting.", Unit: "ops",
			Targets: []Target{
				{Expr: `sum by (total) (rate(a2astore_store_list_totals_total` + sel + `[$__rate_interval]))`, Legend: "{{total}}"},
				{Expr: `sum(rate(a2astore_store_list_counted_entries_total` + sel + `[$__rate_interval]))`, Legend: "entries counted/s"},
			}},
	}},
	{Title: "Retention (engine/retention, a2astore-server -retain)", Panels: []Panel{
		{Title: "Tasks removed and batches", Description: "Expired tasks removed per second, and retention batches (RemoveExpired calls) per second.", Unit: "ops",
			Targets: []Target{
				{Expr: `sum(rate(a2astore_retention_removed_tasks_total[$__rate_interval]))`, Legend: "tasks removed/s"},
				{Expr: `sum(rate(a2astore_retention_batches_total[$__rate_interval]))`, Legend: "batches/s"},
			}},
		{Title: "Since the last sweep, and the oldest terminal task kept", Description: "Seconds since the last completed sweep began (should stay under the sweep interval plus a sweep), and the age of the oldest terminal task left (under -retain after a sweep; above it while a sweep works through a backlog: retention is behind).", Unit: "s",
			Targets: []Target{
				{Expr: `time() - max by (instance) (a2astore_retention_last_sweep_timestamp_seconds)`, Legend: "{{instance}} since last sweep"},
				{Expr: `max by (instance) (a2astore_retention_oldest_terminal_age_seconds)`, Legend: "{{instance}} oldest terminal task age"},
			}},
		{Title: "Sweeps by result", Description: "ok, skipped (another server holds the PostgreSQL lock), error, canceled.", Unit: "ops",
			Targets: []Target{{Expr: `sum by (result) (rate(a2astore_retention_sweeps_total[$__rate_interval]))`, Legend: "{{result}}"}}},
	}},
	{Title: "PostgreSQL pool (pgxpool)", Panels: []Panel{
		{Title: "Pool saturation", Description: "Acquired connections over the configured maximum.", Unit: "percentunit",
			Targets: []Target{{Expr: `sum by (backend) (a2astore_pool_connections{backend=~"$backend", state="acquired"}) / sum by (backend) (a2astore_pool_max_connections` + sel + `)`, Legend: "{{backend}} acquired / max"}}},
		{Title: "Connections by state", Unit: "short",
			Targets: []Target{
				{Expr: `sum by (state) (a2astore_pool_connections` + sel + `)`, Legend: "{{state}}"},
				{Expr: `sum(a2astore_pool_max_connections` + sel + `)`, Legend: "max"},
			}},
		{Title: "Acquires that waited, and mean acquire time", Unit: "short",
			Targets: []Target{
				{Expr: `sum(rate(a2astore_pool_empty_acquires_total` + sel + `[$__rate_interval]))`, Legend: "waited acquires/s"},
				{Expr: `sum(rate(a2astore_pool_canceled_acquires_total` + sel + `[$__rate_interval]))`, Legend: "canceled acquires/s"},
				{Expr: `sum(rate(a2astore_pool_acquire_seconds_total` + sel + `[$__rate_interval])) / sum(rate(a2astore_pool_acquires_total` + sel + `[$__rate_interval]))`, Legend: "mean acquire seconds"},
			}},
	}},
	{Title: "PostgreSQL standbys (pgstore, -pg-replica)", Panels: []Panel{
		{Title: "Reads by target", Description: "Get and List calls by where they ran: the primary (every read without standbys) or each standby. The primary's share is what standbys take off it.", Unit: "ops",
			Targets: []Target{{Expr: `sum by (target) (rate(a2astore_replica_reads_total` + sel + `[$__rate_interval]))`, Legend: "{{target}}"}}},
		{Title: "Fallbacks to the primary by reason", Description: "Reads that ran on the primary although standbys are configured: disconnected, paused, lagging, not_standby, timeline (health monitor; timeline: on another timeline than the primary, after a failover), catchup_timeout (did not replay up to the read's start in time), error (failed on the standby). Primary retries: reads on the primary taken again while a commit already in the WAL was not yet visible there. Nudges: WAL flushes asked of the primary by standby reads that waited over pgstore.Options.ReplicaNudgeAfter (10 ms by default) for replay.", Unit: "ops",
			Targets: []Target{
				{Expr: `sum by (reason) (rate(a2astore_replica_fallbacks_total` + sel + `[$__rate_interval]))`, Legend: "{{reason}}"},
				{Expr: `sum(rate(a2astore_replica_primary_retries_total` + sel + `[$__rate_interval]))`, Legend: "primary retries"},
				{Expr: `sum(rate(a2astore_replica_nudges_total` + sel + `[$__rate_interval]))`, Legend: "WAL flush nudges"},
			}},
		{Title: "Replay lag per standby", Description: "How long the primary has been ahead of each standby's replay position (seconds), and whether the health monitor lets it serve (1) or not (0).", Unit: "s",
			Targets: []Target{
				{Expr: `max by (standby) (a2astore_replica_lag_seconds` + sel + `)`, Legend: "{{standby}} lag"},
				{Expr: `min by (standby) (a2astore_replica_healthy` + sel + `)`, Legend: "{{standby}} healthy"},
			}},
		{Title: "Catch-up wait of standby reads", Description: "How long a standby read waited for the standby to replay up to the read's start (0 for most: already there).", Unit: "s",
			Targets: quantiles("a2astore_replica_catchup_wait_seconds", "", "")},
	}},
	{Title: "Cluster mode (a2astore-server -cluster, pgcluster)", Panels: []Panel{
		{Title: "Work queue depth and executions", Description: "Open work items of the cluster by state (the same on every instance), and executions each instance holds a lease for.", Unit: "short",
			Targets: []Target{
				{Expr: `max by (state) (a2astore_cluster_work_items` + sel + `)`, Legend: "{{state}}"},
				{Expr: `sum by (instance) (a2astore_cluster_executions_running` + sel + `)`, Legend: "running on {{instance}}"},
			}},
		{Title: "Lease takeovers, retries and give-ups", Description: "Takeovers: work of a dead instance returned to the queue after its lease expired. Give-ups: tasks finished as FAILED after their last attempt.", Unit: "ops",
			Targets: []Target{
				{Expr: `sum(rate(a2astore_cluster_takeovers_total` + sel + `[$__rate_interval]))`, Legend: "takeovers/s"},
				{Expr: `sum(rate(a2astore_cluster_retries_total` + sel + `[$__rate_interval]))`, Legend: "retries/s"},
				{Expr: `sum(rate(a2astore_cluster_gave_up_total` + sel + `[$__rate_interval]))`, Legend: "give-ups/s"},
				{Expr: `sum(rate(a2astore_cluster_claims_total` + sel + `[$__rate_interval]))`, Legend: "claims/s"},
			}},
		{Title: "Event delivery latency", Description: "From an event's commit (with its task revision, K7) to its delivery to a subscriber on any instance (woken by LISTEN/NOTIFY).", Unit: "s",
			Targets: quantiles("a2astore_cluster_event_delivery_seconds", "", "")},
		{Title: "Notifications, reconnects and remote cancels", Unit: "ops",
			Targets: []Target{
				{Expr: `sum(rate(a2astore_cluster_notifications_total` + sel + `[$__rate_interval]))`, Legend: "notifications/s"},
				{Expr: `sum(increase(a2astore_cluster_listener_reconnects_total` + sel + `[$__rate_interval]))`, Legend: "listener reconnects"},
				{Expr: `sum(increase(a2astore_cluster_cancels_observed_total` + sel + `[$__rate_interval]))`, Legend: "cancels found by heartbeat"},
				{Expr: `sum(increase(a2astore_cluster_answered_items_total` + sel + `[$__rate_interval]))`, Legend: "answered items not re-run"},
				{Expr: `sum(increase(a2astore_cluster_followup_waits_total` + sel + `[$__rate_interval]))`, Legend: "follow-ups that waited"},
				{Expr: `sum(rate(a2astore_cluster_canceled_executions_total` + sel + `[$__rate_interval]))`, Legend: "executions canceled/s"},
				{Expr: `sum(rate(a2astore_cluster_events_delivered_total` + sel + `[$__rate_interval]))`, Legend: "events delivered/s"},
				{Expr: `sum(rate(a2astore_cluster_cleaned_rows_total` + sel + `[$__rate_interval]))`, Legend: "rows cleaned/s"},
			}},
	}},
	{Title: "Push notifications (pushdelivery, a2astore-server -push)", Panels: []Panel{
		{Title: "Push deliveries by outcome, and attempts", Description: "POSTs to webhooks by outcome: delivered (2xx), failed (retried with backoff), dropped (still failing past -push-deadline: the event is passed over).", Unit: "ops",
			Targets: []Target{
				{Expr: `sum by (outcome) (rate(a2astore_push_deliveries_total[$__rate_interval]))`, Legend: "{{outcome}}"},
				{Expr: `sum(rate(a2astore_push_attempts_total[$__rate_interval]))`, Legend: "attempts/s"},
			}},
		{Title: "Push failures by reason, and lost leases", Description: "Failed attempts by reason (status_4xx, status_5xx, timeout, refused, blocked by the SSRF policy, …). Lost leases: a delivery whose lease expired before its commit; another worker sends it again (a duplicate, never a loss).", Unit: "ops",
			Targets: []Target{
				{Expr: `sum by (reason) (rate(a2astore_push_failures_total[$__rate_interval]))`, Legend: "{{reason}}"},
				{Expr: `sum(increase(a2astore_push_lease_lost_total[$__rate_interval]))`, Legend: "leases lost"},
			}},
		{Title: "Push queue depth", Description: "Push configurations with events still to deliver (cluster mode: the whole cluster's, the same on every instance).", Unit: "short",
			Targets: []Target{{Expr: `max by (instance) (a2astore_push_queue_depth)`, Legend: "{{instance}}"}}},
		{Title: "Oldest due push delivery", Description: "Age of the oldest delivery that is due: grows while webhooks are down or the workers fall behind.", Unit: "s",
			Targets: []Target{{Expr: `max by (instance) (a2astore_push_oldest_due_seconds)`, Legend: "{{instance}}"}}},
		{Title: "Push delivery latency", Description: "From an event's commit to its webhook's 2xx: p50 and p99 (retries included).", Unit: "s",
			Targets: []Target{
				{Expr: `histogram_quantile(0.5, sum by (le) (rate(a2astore_push_delivery_latency_seconds_bucket[$__rate_interval])))`, Legend: "p50"},
				{Expr: `histogram_quantile(0.99, sum by (le) (rate(a2astore_push_delivery_latency_seconds_bucket[$__rate_interval])))`, Legend: "p99"},
			}},
	}},
	{Title: "Pebble LSM (storemetrics.LSMCollector)", Panels: []Panel{
		{Title: "Read amplification", Unit: "short",
			Targets: []Target{{Expr: q("a2astore_lsm_read_amplification"), Legend: "{{job}} read amp"}}},
		{Title: "Compactions and flushes", Unit: "ops",
			Targets: []Target{
				{Expr: `rate(a2astore_lsm_compactions_total` + sel + `[$__rate_interval])`, Legend: "{{job}} compactions/s"},
				{Expr: `rate(a2astore_lsm_flushes_total` + sel + `[$__rate_interval])`, Legend: "{{job}} flushes/s"},
			}},
		{Title: "Compaction debt, disk, memtables and WAL", Unit: "bytes",
			Targets: []Target{
				{Expr: q("a2astore_lsm_compaction_debt_bytes"), Legend: "{{job}} compaction debt"},
				{Expr: q("a2astore_lsm_disk_bytes"), Legend: "{{job}} disk"},
				{Expr: q("a2astore_lsm_memtable_bytes"), Legend: "{{job}} memtables"},
				{Expr: q("a2astore_lsm_wal_bytes"), Legend: "{{job}} WAL"},
			}},
		{Title: "Block cache hit ratio", Unit: "percentunit",
			Targets: []Target{{Expr: `rate(a2astore_lsm_block_cache_hits_total` + sel + `[$__rate_interval]) / (rate(a2astore_lsm_block_cache_hits_total` + sel + `[$__rate_interval]) + rate(a2astore_lsm_block_cache_misses_total` + sel + `[$__rate_interval]))`, Legend: "{{job}}"}}},
	}},
	{Title: "loadgen (client view)", Panels: []Panel{
		{Title: "loadgen throughput by operation and outcome", Unit: "ops",
			Targets: []Target{{Expr: `sum by (target, op, outcome) (rate(a2astore_loadgen_operation_duration_seconds_count[$__rate_interval]))`, Legend: "{{target}} {{op}} {{outcome}}"}}},
		{Title: "loadgen latency p99 by operation", Unit: "s",
			Targets: []Target{{Expr: `histogram_quantile(0.99, sum by (le, target, op) (rate(a2astore_loadgen_operation_duration_seconds_bucket[$__rate_interval])))`, Legend: "{{target}} {{op}}"}}},
		{Title: "Live-traversal violations and traversals", Description: "Any violation is a broken L7 guarantee: the run fails.", Unit: "short",
			Targets: []Target{
				{Expr: `sum by (target, kind) (a2astore_loadgen_violations_total)`, Legend: "{{target}} violations {{kind}}"},
				{Expr: `sum by (target, result) (rate(a2astore_loadgen_traversals_total[$__rate_interval]))`, Legend: "{{target}} traversals/s {{result}}"},
			}},
		{Title: "loadgen push receiver", Description: "Deliveries loadgen's webhook (-push-receiver) got, by outcome: ok, duplicate (allowed: at least once), order (a revision after a higher one of its task) and malformed fail the run.", Unit: "ops",
			Targets: []Target{{Expr: `sum by (outcome) (rate(a2astore_loadgen_push_deliveries_total[$__rate_interval]))`, Legend: "{{outcome}}"}}},
		{Title: "loadgen in flight and live tasks", Unit: "short",
			Targets: []Target{
				{Expr: `sum by (target) (a2astore_loadgen_in_flight_operations)`, Legend: "{{target}} in flight"},
				{Expr: `sum by (target) (a2astore_loadgen_live_tasks)`, Legend: "{{target}} live tasks"},
				{Expr: `histogram_quantile(0.5, sum by (le, target) (rate(a2astore_loadgen_traversal_pages_bucket[$__rate_interval])))`, Legend: "{{target}} pages per traversal p50"},
			}},
	}},
	{Title: "Processes", Panels: []Panel{
		{Title: "Resident memory and goroutines", Unit: "short",
			Targets: []Target{
				{Expr: `process_resident_memory_bytes{job=~"a2astore-server|loadgen"}`, Legend: "{{job}} {{instance}} RSS bytes"},
				{Expr: `go_goroutines{job=~"a2astore-server|loadgen"}`, Legend: "{{job}} {{instance}} goroutines"},
			}},
	}},
}

// Expand replaces the dashboard variables with values Prometheus accepts
// ($__rate_interval → rateInterval, $backend → .*), for parsing and for
// querying Prometheus directly.
func Expand(expr, rateInterval string) string {
	return strings.NewReplacer("$__rate_interval", rateInterval, "$backend", ".*").Replace(expr)
}

// Build returns the dashboard JSON.
func Build() ([]byte, error) {
	ds := map[string]any{"type": "prometheus", "uid": "${datasource}"}
	var panels []any
	id, y := 1, 0
	for _, row := range Rows {
		panels = append(panels, map[string]any{
			"type": "row", "id": id, "title": row.Title, "collapsed": false,
			"gridPos": map[string]int{"h": 1, "w": 24, "x": 0, "y": y},
		})
		id++
		y++
		for i, p := range row.Panels {
			var targets []any
			for j, t := range p.Targets {
				targets = append(targets, map[string]any{
					"datasource": ds, "expr": t.Expr, "legendFormat": t.Legend,
					"refId": string(rune('A' + j)), "range": true,
				})
			}
			w := 24 / len(row.Panels)
			if w < 8 {
				w = 8
			}
			panels = append(panels, map[string]any{
				"type": "timeseries", "id": id, "title": p.Title, "description": p.Description,
				"datasource": ds, "targets": targets,
				"gridPos":     map[string]int{"h": 8, "w": w, "x": (i * w) % 24, "y": y + (i*w)/24*8},
				"fieldConfig": map[string]any{"defaults": map[string]any{"unit": p.Unit}, "overrides": []any{}},
				"options": map[string]any{"legend": map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true},
					"tooltip": map[string]any{"mode": "multi", "sort": "desc"}},
			})
			id++
		}
		y += ((len(row.Panels)*(24/len(row.Panels)) + 23) / 24) * 8
	}
	dash := map[string]any{
		"title": "a2astore", "uid": "a2astore-main", "schemaVersion": 39, "version": 1,
		"tags": []string{"a2astore"}, "timezone": "browser", "refresh": "10s",
		"time":        map[string]string{"from": "now-30m", "to": "now"},
		"description": "a2astore task store: store operations, list cost, retention, PostgreSQL pool, Pebble LSM, loadgen. Generated by go run ./dashboards/gen.",
		"templating": map[string]any{"list": []any{
			map[string]any{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
			map[string]any{"name": "backend", "type": "query", "label": "Backend", "datasource": ds,
				"query":      map[string]any{"query": "label_values(a2astore_store_operation_duration_seconds_count, backend)", "refId": "backend"},
				"includeAll": true, "multi": true, "allValue": ".*", "refresh": 2,
				"current": map[string]any{"text": "All", "value": "$__all"}},
		}},
		"panels": panels,
	}
	b, err := json.MarshalIndent(dash, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
