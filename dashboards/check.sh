#!/usr/bin/env bash
# make dashboards-check: runs a2astore-server, loadgen (remote against the
# server, and embedded on Pebble and PostgreSQL) and a real Prometheus on
# loopback for a short while, then asserts that every panel query of
# dashboards/a2astore.json returns data (TestPanelsReturnData).
#
# Installs Debian's prometheus (and postgresql-15, for the pool panels) when
# missing; needs root for that and to run the throwaway PostgreSQL cluster as
# the postgres user. Takes about a minute and a half; .ci/run runs it, so a
# change to a metric or to where it is served cannot break the dashboards
# silently.
#
# The server runs with -policy owner and the remote loadgen with -callers 4,
# as a deployment that authorizes callers would, and with -retain 1h so the
# retention panels have series.
#
# Ports (loopback): override with the variables below.
set -euo pipefail
cd "$(dirname "$0")/.."

SERVER_HTTP=${SERVER_HTTP:-127.0.0.1:18080}
SERVER_GRPC=${SERVER_GRPC:-127.0.0.1:19090}
SERVER_METRICS=${SERVER_METRICS:-127.0.0.1:19464}
CLUSTER_HTTP=${CLUSTER_HTTP:-127.0.0.1:18081}
CLUSTER_GRPC=${CLUSTER_GRPC:-127.0.0.1:19091}
CLUSTER_METRICS=${CLUSTER_METRICS:-127.0.0.1:19465}
LG_CLUSTER=${LG_CLUSTER:-127.0.0.1:19104}
LG_REMOTE=${LG_REMOTE:-127.0.0.1:19101}
LG_PEBBLE=${LG_PEBBLE:-127.0.0.1:19102}
LG_PG=${LG_PG:-127.0.0.1:19103}
LG_HOOK=${LG_HOOK:-127.0.0.1:19106} # the remote loadgen's webhook receiver
PROM=${PROM:-127.0.0.1:19190}
PGPORT=${PGPORT:-15439}
RUN_FOR=${RUN_FOR:-45s}   # loadgen duration; queries run while they are live
WARMUP=${WARMUP:-25}      # seconds of load before querying

log() { echo "dashboards-check: $*" >&2; }

if ! command -v prometheus >/dev/null; then
  log "installing prometheus (Debian package)"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus
fi
PGBIN=/usr/lib/postgresql/15/bin
if [ ! -x "$PGBIN/initdb" ]; then
  log "installing postgresql-15"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-15
fi

work=$(mktemp -d)
chmod 755 "$work"
pids=()
pgdata=""
asuser() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${standbydata:-}" ]; then asuser "$PGBIN/pg_ctl" -D "$standbydata" -m immediate stop >/dev/null 2>&1 || true; fi
  if [ -n "$pgdata" ]; then asuser "$PGBIN/pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

log "building"
go build -o "$work/a2astore-server" ./cmd/a2astore-server
go build -o "$work/loadgen" ./loadgen

log "starting PostgreSQL on port $PGPORT"
mkdir -p "$work/pg"
[ "$(id -u)" = 0 ] && chown postgres "$work/pg"
pgdata=$work/pg/data
asuser "$PGBIN/initdb" -D "$pgdata" -A trust -U postgres >"$work/initdb.log" 2>&1
asuser "$PGBIN/pg_ctl" -D "$pgdata" -l "$work/pg/log" -w \
  -o "-p $PGPORT -k $work/pg -c listen_addresses=''" start >/dev/null
DSN="host=$work/pg port=$PGPORT user=postgres dbname=postgres"
# A hot standby of it (pg_basebackup -R) for the embedded pg loadgen's
# reads (-pg-replica), so the standby panels have series.
STANDBY_PORT=$((PGPORT + 1))
standby=$work/pg/standby
asuser "$PGBIN/pg_basebackup" -D "$standby" -R -X stream -c fast -h "$work/pg" -p "$PGPORT" -U postgres
asuser "$PGBIN/pg_ctl" -D "$standby" -l "$work/pg/standby.log" -w \
  -o "-p $STANDBY_PORT -k $work/pg -c listen_addresses='' -c hot_standby_feedback=on" start >/dev/null
standbydata=$standby
STANDBY_DSN="host=$work/pg port=$STANDBY_PORT user=postgres dbname=postgres"
# The -cluster server has a database of its own: the embedded pg loadgen
# checks exact totals over its own.
asuser "$PGBIN/createdb" -h "$work/pg" -p "$PGPORT" -U postgres cluster
CLUSTER_DSN="host=$work/pg port=$PGPORT user=postgres dbname=cluster"
# Cluster mode reads through the standby too (its loadgen checks L7 live).
CLUSTER_STANDBY_DSN="host=$work/pg port=$STANDBY_PORT user=postgres dbname=cluster"

cat >"$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: a2astore-server
    static_configs: [{targets: ["$SERVER_METRICS", "$CLUSTER_METRICS"]}]
  - job_name: loadgen
    static_configs: [{targets: ["$LG_REMOTE", "$LG_PEBBLE", "$LG_PG", "$LG_CLUSTER"]}]
YML
log "starting Prometheus at $PROM"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prom" \
  --web.listen-address="$PROM" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)

log "starting a2astore-server (pebble) at $SERVER_HTTP"
"$work/a2astore-server" -backend pebble -pebble-dir "$work/server-pebble" -http "$SERVER_HTTP" -grpc "$SERVER_GRPC" \
  -metrics "$SERVER_METRICS" -policy owner -retain 1h -push-allow-private >"$work/server.log" 2>&1 &
pids+=($!)

log "starting a2astore-server (pg, -cluster) at $CLUSTER_HTTP"
"$work/a2astore-server" -backend pg -pg-dsn "$CLUSTER_DSN" -pg-replica "$CLUSTER_STANDBY_DSN" -cluster -cluster-instance check -http "$CLUSTER_HTTP" -grpc "$CLUSTER_GRPC" \
  -metrics "$CLUSTER_METRICS" >"$work/server-cluster.log" 2>&1 &
pids+=($!)

for i in $(seq 1 100); do
  curl -sf "http://$SERVER_HTTP/.well-known/agent-card.json" >/dev/null && \
    curl -sf "http://$CLUSTER_METRICS/metrics" >/dev/null && \
    curl -sf "http://$SERVER_METRICS/metrics" >/dev/null && \
    curl -sf "http://$PROM/-/ready" >/dev/null && break
  [ "$i" = 100 ] && { log "server or Prometheus did not start"; cat "$work/server.log" "$work/server-cluster.log" "$work/prometheus.log" >&2; exit 1; }
  sleep 0.2
done

log "running loadgen for $RUN_FOR: remote (grpc), embedded pebble, embedded pg, remote on the -cluster server"
# Its tasks carry push configs to its own receiver, down 5 s in every 15 s
# (so the failure panels have data); -push-grace covers the retries' backoff.
"$work/loadgen" -quiet -target "http://$SERVER_HTTP" -transport grpc -callers 4 -duration "$RUN_FOR" -concurrency 4 \
  -push-receiver "$LG_HOOK" -push-down 5s -push-every 15s -push-grace 90s \
  -metrics-addr "$LG_REMOTE" >"$work/lg-remote.txt" 2>&1 &
lg_remote=$!
"$work/loadgen" -quiet -target pebble -dir "$work/pebble" -workload write-heavy -duration "$RUN_FOR" -concurrency 4 \
  -metrics-addr "$LG_PEBBLE" >"$work/lg-pebble.txt" 2>&1 &
lg_pebble=$!
"$work/loadgen" -quiet -target pg -dsn "$DSN" -pg-replica "$STANDBY_DSN" -workload read-heavy -duration "$RUN_FOR" -concurrency 4 \
  -initial 1000 -metrics-addr "$LG_PG" >"$work/lg-pg.txt" 2>&1 &
lg_pg=$!
"$work/loadgen" -quiet -target "http://$CLUSTER_HTTP" -transport jsonrpc -duration "$RUN_FOR" -concurrency 2 \
  -metrics-addr "$LG_CLUSTER" >"$work/lg-cluster.txt" 2>&1 &
lg_cluster=$!
pids+=("$lg_remote" "$lg_pebble" "$lg_pg" "$lg_cluster")

sleep "$WARMUP"
log "querying every panel"
status=0
A2ASTORE_PROMETHEUS_URL="http://$PROM" A2ASTORE_RATE_INTERVAL=15s \
  go test -count=1 -run '^TestPanelsReturnData$' -v ./dashboards/ | grep -E '^(\s+dashboards_test|--- |ok|FAIL|PASS)' || status=1

for p in "$lg_remote" "$lg_pebble" "$lg_pg" "$lg_cluster"; do
  if ! wait "$p"; then log "a loadgen run failed"; status=1; fi
done
for f in lg-remote lg-pebble lg-pg lg-cluster; do
  log "$f:"; cat "$work/$f.txt" >&2
done
if [ "$status" = 0 ]; then log "PASS: every panel query returned data"; else log "FAIL"; fi
exit "$status"
