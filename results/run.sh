#!/usr/bin/env bash
# make results: one run of the whole benchmark lab at the current commit,
# recorded under results/runs/<commit>[-quick][-dirty]/, then the page
# regenerated from it (go run ./cmd/benchplot -runs results/runs -o results).
#
#   make results                 # full run: estimated 25-35 min on 2 quiet cores (budget 45)
#   RESULTS_QUICK=1 make results # quick run: 500 s measured with load average 8-12; recorded, marked quick
#
# The full run has not been timed yet: the estimate is the suite at 1e3..1e5
# (count 6 × 100 ms; 556 s at load ~10 for the smaller suite of e87b0fa),
# mem at 1e6 (~3 min), CountWrites at 1 s per cell (~1.5 min), 3 × 30 s of
# loadgen and 3 × (seed + 6 × 15 s) of server rows (~8 min) plus the server
# on a2a-go's InMemory (seed + 2 × 15 s, ~40 s), builds (~1.5 min).
# steps.log times every step, so the first full run shows where the time goes.
#
# Steps (each timed in steps.log, each command in commands.txt):
#   1. go test ./bench: BenchmarkStore and its peers and floors on mem,
#      pebble and pg at n = 1e3, 1e4, 1e5 (full; quick: 1e3, 1e4, fewer
#      samples), then BenchmarkRetain at the same sizes and
#      BenchmarkRetainIsolation at 1e5 (quick: 1e4), then mem at n = 1e6
#      on the issue-2 operations (full only; RESULTS_1E6=mem,pg adds
#      backends at 1e6 if the time allows).
#   2. pebblestore: BenchmarkReplaceFloor, the store's Replace beside bare
#      Pebble's floor in one loop (3 × 20000 of each; quick 1 × 2000).
#      pgstore: BenchmarkCountWrites (counter triggers sharded / hot /
#      none), BenchmarkLifecycle (3 samples; quick 1), then
#      BenchmarkTotalUnderWriters' side-by-side pairs (total=pair,
#      no filter and by state) with 4 and 16 writers at n = 1e5 (quick:
#      1e4), 3 samples of 2 s each (about 2 min; quick one of 300 ms).
#   3. loadgen embedded, traversal-under-churn, per backend (30 s full,
#      8 s quick): L7 checks, 0 violations or the run fails. Then, full
#      only, the collector's share on mem at a million tasks: read-heavy,
#      -initial 1000000, 30 s (gc/mem-read-heavy.json; about 70 s).
#   4. a2astore-server per backend with an echo agent (no updates, no
#      artifact, think time 0), loadgen on loopback: send-only (SendMessage)
#      and list-only (ListTasks) on each transport (15 s full, 4 s quick),
#      the server's CPU from /proc/<pid>/stat before and after each run
#      (and, on pg, the PostgreSQL cluster's); on mem and pg, a CPU profile
#      of the server during most of each JSON-RPC row (its metrics
#      listener's /debug/pprof/profile: <row>.pprof, no added time); then
#      the two JSON-RPC rows again against the server serving from a2a-go's
#      taskstore.InMemory (-a2a-inmemory, files a2a_inmemory-*: about 40 s
#      more in a full run, about 10 s quick), profiled too.
#   5. the generator rewrites every table and chart of the page.
#
# PostgreSQL: the bench and pgstore steps start their own throwaway cluster
# (internal/pgtest); loadgen and the server get one started here, on a Unix
# socket, as the postgres user when run as root. Needs PostgreSQL 15 server
# binaries (/usr/lib/postgresql/15/bin or PGBIN).
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=${RESULTS_QUICK:-0}
NOTE=${RESULTS_NOTE:-}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGPORT=${RESULTS_PGPORT:-15441}
if [ "$QUICK" = 1 ]; then
  MODE=quick
  BENCH_SIZES_RUN=1000,10000; BENCH_COUNT_RUN=3; BENCH_TIME_RUN=40ms
  PG_BENCHTIME=100ms; LOADGEN_FOR=8s; SERVER_FOR=4s; SEED_TASKS=500
  TOTALS_N=1e4; TOTALS_TIME=300ms; TOTALS_COUNT=1
  LIFECYCLE_COUNT=1; FLOOR_OPS=2000x; FLOOR_COUNT=1
  SIZES_1E6=""
  RETAIN_COUNT=1; ISOLATION_SIZE=10000; ISOLATION_SECONDS=4
else
  MODE=full
  BENCH_SIZES_RUN=1000,10000,100000; BENCH_COUNT_RUN=6; BENCH_TIME_RUN=100ms
  PG_BENCHTIME=1s; LOADGEN_FOR=30s; SERVER_FOR=15s; SEED_TASKS=2000
  TOTALS_N=1e5; TOTALS_TIME=2s; TOTALS_COUNT=3
  LIFECYCLE_COUNT=3; FLOOR_OPS=20000x; FLOOR_COUNT=3
  SIZES_1E6=${RESULTS_1E6:-mem}
  RETAIN_COUNT=3; ISOLATION_SIZE=100000; ISOLATION_SECONDS=10
fi
SERVER_WORKERS=${RESULTS_SERVER_WORKERS:-50} # the cross-SDK benchmark's 50 connections
# For working on this script: RESULTS_SKIP_BENCH=1 skips steps 1 and 2,
# RESULTS_OUT=dir records there instead of results/runs/<id> (and the page
# is not regenerated), RESULTS_LOADGEN_FOR / RESULTS_SERVER_FOR shorten the loads.
LOADGEN_FOR=${RESULTS_LOADGEN_FOR:-$LOADGEN_FOR}
SERVER_FOR=${RESULTS_SERVER_FOR:-$SERVER_FOR}
SKIP_BENCH=${RESULTS_SKIP_BENCH:-0}
# RESULTS_BENCH_COUNT / RESULTS_BENCH_TIME override the suite's samples
# (e.g. a shorter full run on a slow machine; commands.txt records them).
BENCH_COUNT_RUN=${RESULTS_BENCH_COUNT:-$BENCH_COUNT_RUN}
BENCH_TIME_RUN=${RESULTS_BENCH_TIME:-$BENCH_TIME_RUN}

commit=$(git rev-parse --short=12 HEAD)
dirty=""
git diff --quiet HEAD -- . ':!results' || dirty=-dirty
id=$commit$dirty
[ "$MODE" = quick ] && id=$id-quick
final=${RESULTS_OUT:-results/runs/$id}
# The run is written to <dir>.partial and renamed when it is complete, so an
# interrupted run never passes for history (the generator ignores *.partial).
out=$final.partial
rm -rf "$out" "$final"
mkdir -p "$out/loadgen" "$out/gc" "$out/server"
log() { echo "results: $*" >&2; }
log "writing $out ($MODE)"

started=$(date -u +%FT%TZ)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$out/commands.txt"
: >"$out/steps.log"
# step NAME CMD...: runs CMD, records it and its start/end time.
step() {
  local name=$1; shift
  printf '%s\n' "$*" >>"$out/commands.txt"
  echo "$(date -u +%FT%TZ) start $name load=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/steps.log"
  "$@"
  echo "$(date -u +%FT%TZ) end   $name load=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/steps.log"
}

work=$(mktemp -d)
chmod 755 "$work"
server_pid=""
pgdata=""
. results/lib.sh # asuser, cputicks, pgticks, pgstart
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if [ -n "$pgdata" ]; then asuser "$PGBIN/pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

step build go build -o "$work/loadgen" ./loadgen
step build-server go build -o "$work/a2astore-server" ./cmd/a2astore-server
if [ "$SKIP_BENCH" != 1 ]; then
step build-bench go test -c -o "$work/bench.test" ./bench
step build-pgstore go test -c -o "$work/pgstore.test" ./pgstore
step build-pebblestore go test -c -o "$work/pebblestore.test" ./pebblestore

# 1. The shared suite. Run from the package directory, as go test does.
bench() { # sizes, pattern, count [benchtime]
  local t=${4:-$BENCH_TIME_RUN}
  printf '  = (cd bench && BENCH_SIZES=%s BENCH_ISOLATION_SECONDS=%s bench.test -test.run '"'^\$'"' -test.bench '"'%s'"' -test.benchmem -test.count %s -test.benchtime %s -test.timeout 120m)\n' \
    "$1" "$ISOLATION_SECONDS" "$2" "$3" "$t" >>"$out/commands.txt"
  (cd bench && BENCH_SIZES=$1 BENCH_ISOLATION_SECONDS=$ISOLATION_SECONDS "$work/bench.test" -test.run '^$' -test.bench "$2" -test.benchmem \
    -test.count "$3" -test.benchtime "$t" -test.timeout 120m) >>"$out/bench.txt"
}
step bench bench "$BENCH_SIZES_RUN" '^Benchmark(Store|TenancyAuthz|MemHeap)$' "$BENCH_COUNT_RUN"
# Retention (#24): batches at every size (a fresh store per run of the
# benchmark function: fills dominate), then the isolation load at one size.
step bench-retain bench "$BENCH_SIZES_RUN" '^BenchmarkRetain$' "$RETAIN_COUNT" 20x
step bench-retain-isolation bench "$ISOLATION_SIZE" '^BenchmarkRetainIsolation$' "$RETAIN_COUNT" 1x
if [ -n "$SIZES_1E6" ]; then
  be=$(echo "$SIZES_1E6" | tr , '|')
  step bench-1e6 bench 1000000 "Store/^backend=($be)\$/^op=(page|page-depth|total|replace|replace-notask)\$" 3
fi

# Pebble's Replace beside its floor in bare Pebble, alternating (#31's
# "Pebble Replace / bare get + delete + 2 sets" row, and the store's own
# keys written by bare Pebble): pebblestore.txt. Before the pg steps,
# whose writers leave the machine loaded for a while after them.
step pebblestore-replace bash -c "cd pebblestore && '$work/pebblestore.test' -test.run '^\$' -test.bench '^BenchmarkReplaceFloor\$' -test.benchtime $FLOOR_OPS -test.count $FLOOR_COUNT -test.timeout 10m >'$(realpath "$out")/pebblestore.txt'"

# 2. pgstore's write benchmarks: counters, then lifecycles (pgstore /
# plain SQL, #31's lifecycle rows: LIFECYCLE_COUNT samples), appended.
pgstep() { # name, pattern, benchtime, count, redirection (> or >>), [env]
  step "$1" bash -c "cd pgstore && ${6:-}'$work/pgstore.test' -test.run '^\$' -test.bench '$2' -test.benchtime $3 -test.count $4 -test.timeout 60m $5'$(realpath "$out")/pgstore.txt'"
}
pgstep pgstore 'CountWrites' "$PG_BENCHTIME" 1 '>'
pgstep pgstore-lifecycle '^BenchmarkLifecycle$' "$PG_BENCHTIME" "$LIFECYCLE_COUNT" '>>'
# A first page with and without its total, side by side in one loop,
# while 4 and 16 goroutines flip task states by SQL (#31's "totals under
# writers"; total=pair), appended.
pgstep pgstore-totals 'TotalUnderWriters/backend=pg/op=first_page/n=[0-9]*/writers=(4|16)/wake=on/filter=[a-z]*/total=pair' "$TOTALS_TIME" "$TOTALS_COUNT" '>>' "LIFECYCLE_N=$TOTALS_N "
fi

# A PostgreSQL cluster for loadgen and the server.
pgdata=$work/pg/data
DSN=$(pgstart "$work/pg" "$PGPORT")
resetdb() {
  PGOPTIONS='-c client_min_messages=warning' asuser "$PGBIN/psql" -q -h "$work/pg" -p "$PGPORT" -U postgres -d postgres \
    -c 'DROP SCHEMA public CASCADE' -c 'CREATE SCHEMA public' >/dev/null
}

# 3. Embedded loadgen per backend.
LG=(-workload traversal-under-churn -duration "$LOADGEN_FOR" -concurrency 8 -seed 42 -quiet)
step loadgen-mem "$work/loadgen" "${LG[@]}" -target mem -json "$out/loadgen/mem.json" >"$out/loadgen/mem.txt"
step loadgen-pebble "$work/loadgen" "${LG[@]}" -target pebble -dir "$work/lg-pebble" -json "$out/loadgen/pebble.json" >"$out/loadgen/pebble.txt"
resetdb
step loadgen-pg "$work/loadgen" "${LG[@]}" -target pg -dsn "$DSN" -json "$out/loadgen/pg.json" >"$out/loadgen/pg.txt"
if [ "$MODE" = full ]; then
  step gc-mem "$work/loadgen" -workload read-heavy -initial 1000000 -duration "$LOADGEN_FOR" -concurrency 8 -seed 42 -quiet \
    -target mem -json "$out/gc/mem-read-heavy.json" >"$out/gc/mem-read-heavy.txt"
fi

# 4. The server with an echo agent, per backend and transport.
hz=$(getconf CLK_TCK)
# A CPU profile covers the row but its first and last second (loadgen's
# connections opening, its last calls draining): whole seconds, at least 1.
PROFILE_SECONDS=$(awk -v d="$SERVER_FOR" 'BEGIN { if (d ~ /ms$/) s = d / 1000; else if (d ~ /m$/) s = d * 60; else s = d + 0; p = int(s) - 2; print (p < 1 ? 1 : p) }')
# profile_start FILE: from 1 s on, a CPU profile of the server into FILE
# (background; profile_end waits for it).
profile_start() {
  printf '  + (sleep 1; curl -sf -o %s http://%s/debug/pprof/profile?seconds=%s) during the next row\n' \
    "${1#"$out"/}" "$maddr" "$PROFILE_SECONDS" >>"$out/commands.txt"
  (sleep 1; curl -sf -o "$1" "http://$maddr/debug/pprof/profile?seconds=$PROFILE_SECONDS") &
  prof_pid=$!
}
# profile_end FILE: a profile that failed is left out (the page says the
# row has none), not the run.
profile_end() {
  if [ -n "$prof_pid" ] && ! wait "$prof_pid"; then log "CPU profile $1 failed (left out)"; rm -f "$1"; fi
  prof_pid=""
}
# serve NAME args…: NAME is the backend, or a2a_inmemory (mem with the
# handler on a2a-go's taskstore.InMemory: the JSON-RPC rows only).
serve() {
  local name=$1; shift
  local backend=$name transports="jsonrpc http grpc"
  if [ "$name" = a2a_inmemory ]; then backend=mem transports=jsonrpc; set -- -a2a-inmemory "$@"; fi
  "$work/a2astore-server" -backend "$backend" "$@" -http 127.0.0.1:0 -grpc 127.0.0.1:0 -metrics 127.0.0.1:0 \
    -status-updates 0 -history-messages 0 -artifact-bytes 0 -think-time 0 2>"$work/server-$name.log" &
  server_pid=$!
  local addrs; addrs=$(awaitserving "$work/server-$name.log" "$server_pid") || { log "server $name did not start"; return 1; }
  local url=http://${addrs% *}
  maddr=${addrs#* }
  printf '%s\n' "a2astore-server -backend $backend $* -http 127.0.0.1:0 -grpc 127.0.0.1:0 -metrics 127.0.0.1:0 -status-updates 0 -history-messages 0 -artifact-bytes 0 -think-time 0" >>"$out/commands.txt"
  # Tasks for ListTasks to page over, created before any measured run.
  step "server-$name-seed" "$work/loadgen" -target "$url" -workload send-only -initial -1 -ops "$SEED_TASKS" -concurrency 8 -seed 7 -quiet >/dev/null
  for transport in $transports; do
    for workload in send-only list-only; do
      local f=$out/server/$name-$transport-$workload
      local profiled=""
      if [ "$transport" = jsonrpc ] && [ "$backend" != pebble ]; then profiled=$f.pprof; profile_start "$profiled"; fi
      local before; before=$(cputicks "$server_pid")
      local dbbefore=""
      if [ "$backend" = pg ]; then dbbefore=$(pgticks "$pgdata"); fi
      step "server-$name-$transport-$workload" "$work/loadgen" -target "$url" -transport "$transport" -workload "$workload" \
        -initial -1 -duration "$SERVER_FOR" -concurrency "$SERVER_WORKERS" -seed 42 -quiet -json "$f.json" >/dev/null
      echo "$before $(cputicks "$server_pid") $hz" >"$f.cpu"
      if [ "$backend" = pg ]; then echo "$dbbefore $(pgticks "$pgdata") $hz" >"$f.dbcpu"; fi
      if [ -n "$profiled" ]; then profile_end "$profiled"; fi
    done
  done
  kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""
}
prof_pid=""
maddr=""
serve mem
serve a2a_inmemory
serve pebble -pebble-dir "$work/srv-pebble"
resetdb
serve pg -pg-dsn "$DSN"

finished=$(date -u +%FT%TZ)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
pgver=$("$PGBIN/postgres" --version 2>/dev/null || echo "")
json() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
cat >"$out/run.json" <<JSON
{
  "commit": "$commit$dirty",
  "mode": "$MODE",
  "started": "$started",
  "finished": "$finished",
  "load_before": "$load_before",
  "load_after": "$load_after",
  "cpus": $(nproc),
  "cpu_model": "$(json "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)")",
  "mem_total": "$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)",
  "kernel": "$(json "$(uname -sr)")",
  "go": "$(json "$(go version)")",
  "postgres": "$(json "$pgver")",
  "note": "$(json "$NOTE")"
}
JSON
mv "$out" "$final"; out=$final
log "run recorded in $out ($(( $(date +%s) - $(date -d "$started" +%s) )) s)"

# 5. The page.
if [ -z "${RESULTS_OUT:-}" ]; then
  step generate go run ./cmd/benchplot -runs results/runs -o results
fi
