// Package dashboards builds the Grafana dashboard for a2astore (the server's
// store metrics, the PostgreSQL pool, Pebble's LSM, and loadgen's own view)
// from the panel table in dashboards.go (Rows), so every query is Go data
// that tests can parse and check against the metric registries.
//
// The committed a2astore.json is the output of `go run ./dashboards/gen`;
// TestDashboardUpToDate fails when it drifts from the table. We generate
// plain Grafana JSON (schema 39) from this small table rather than through
// grafana-foundation-sdk: the SDK would add a large module for what is a
// list of titles and PromQL expressions, and the table keeps every query in
// one reviewable place.
package dashboards
