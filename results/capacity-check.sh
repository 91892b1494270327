#!/usr/bin/env bash
# make capacity-check (#55): the capacity model (docs/capacity.md) checked
# against running deployments. For each deployment below, the model's
# prediction is written first (go run ./cmd/capacity -predict), then the
# deployment is run and measured:
#
#   1. loadgen bulk-loads the store (embedded, taskgen's realistic tasks,
#      1,000 contexts with one owner each: the scale run's shape); on mem
#      the server fills its own store (-mem-initial: the same tasks, an
#      owner per context; CHECK_SHAPE does not apply);
#   2. a2astore-server serves it with the echo agent of the model's served
#      rows (-status-updates 0 -history-messages 0 -artifact-bytes 0), and
#      -finish-abandoned=false: the loaded tasks in working states are a
#      data set, not work a previous run of this server left (it would fail
#      each of them before serving: still at it after 30 s at 1e6);
#      the script waits until the server (and PostgreSQL) are idle, so the
#      load's own flushes, compactions and autovacuum are not measured;
#   3. two paced loadgens (open loop) call SendMessage and ListTasks over
#      JSON-RPC at the deployment's rates for CHECK_FOR seconds; the
#      server's CPU (and the PostgreSQL cluster's) from /proc over that
#      window, divided by its wall time, is the measured cores;
#   4. the store's disk as an operator sees it right after: `du` of the
#      Pebble directory, pg_total_relation_size of a2a_tasks; on mem the
#      server's live heap (a collection, then the Go heap gauge), checked
#      against the model's live heap; VmRSS recorded for every backend.
#
# CHECK_CALIBRATE=1 (make capacity-calibrate) predicts nothing: its runs,
# each calling one method (the other asked at 0 a second), are what the
# model's CPU a call comes from.
#
# CHECK_PROFILE=1 also takes a CPU profile of the server over the window
# (<deployment>.pprof; its CPU counts in the window's).
#
# Output: results/raw/capacity-check-<commit>/ (summary.txt, which
# cmd/capacity reads; each deployment's prediction, loadgen reports and
# server log; steps.log with the load average at every step). Needs a
# quiet machine; about 8 minutes. PostgreSQL 15 server binaries (PGBIN).
set -euo pipefail
cd "$(dirname "$0")/.."
. results/lib.sh

FOR=${CHECK_FOR:-60}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PGPORT=${CHECK_PGPORT:-15451}
# backend tasks SendMessage/s ListTasks/s
DEPLOYMENTS=${CHECK_DEPLOYMENTS:-"pebble 1000000 50 200;pg 200000 20 100"}
# loadgen's task shape flags for the load (default: taskgen's realistic
# mix), e.g. "-history -1 -artifacts -1" for light tasks.
SHAPE=${CHECK_SHAPE:-}

commit=$(git rev-parse --short=12 HEAD)
[ -z "$(git status --porcelain)" ] || commit=$commit-dirty
out=results/raw/capacity-check-$commit${CHECK_SUFFIX:+-$CHECK_SUFFIX}
rm -rf "$out"; mkdir -p "$out"
work=$(mktemp -d); chmod 755 "$work"
server_pid=""; pgdata=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if [ -n "$pgdata" ]; then asuser "$PGBIN/pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
note() { echo "$(date -u +%FT%TZ) load=$(cut -d' ' -f1-3 /proc/loadavg) $*" | tee -a "$out/steps.log" >&2; }

note "building"
go build -o "$work/loadgen" ./loadgen
go build -o "$work/a2astore-server" ./cmd/a2astore-server
go build -o "$work/capacity" ./cmd/capacity
hz=$(getconf CLK_TCK)

# ticks: CPU of the server and, on pg, of the PostgreSQL cluster, in ticks.
ticks() {
  local t; t=$(cputicks "$server_pid")
  if [ -n "$pgdata" ]; then t="$t $(pgticks "$pgdata")"; else t="$t 0"; fi
  echo "$t"
}

# settle: waits until the server (and PostgreSQL) used under 2 % of a core
# over 5 s, at most 3 minutes; logs how long it took.
settle() {
  local start=$SECONDS a b
  while [ $((SECONDS - start)) -lt 180 ]; do
    a=$(ticks); sleep 5; b=$(ticks)
    read -r s0 d0 <<<"$a"; read -r s1 d1 <<<"$b"
    if [ $(( (s1 - s0 + d1 - d0) * 100 )) -lt $(( 2 * 5 * hz )) ]; then
      note "settled after $((SECONDS - start)) s"; return 0
    fi
  done
  note "not idle after 180 s: measuring anyway"
}

: >"$out/summary.txt"
IFS=';' read -ra deployments <<<"$DEPLOYMENTS"
for d in "${deployments[@]}"; do
  read -r backend tasks sends lists <<<"$d"
  name=$backend-$tasks-$sends-$lists
  # The tasks at the end of the window: the store's and one per SendMessage.
  final=$(( tasks + sends * FOR ))
  if [ -z "${CHECK_CALIBRATE:-}" ]; then
    "$work/capacity" -predict -backend "$backend" -tasks "$final" -sends "$sends" -lists "$lists" | tee "$out/$name.predict"
    note "$name: predicted before the run (above)"
  fi

  store=(); lgstore=()
  case $backend in
  mem) store=(-mem-initial "$tasks") ;; # the server fills its own store
  pebble) store=(-pebble-dir "$work/pebble"); lgstore=(-target pebble -dir "$work/pebble") ;;
  pg)
    pgdata=$work/pg/data
    dsn=$(pgstart "$work/pg" "$PGPORT")
    store=(-pg-dsn "$dsn"); lgstore=(-target pg -dsn "$dsn") ;;
  esac
  if [ "$backend" != mem ]; then
    note "$name: bulk load"
    # shellcheck disable=SC2086 # SHAPE is flags
    "$work/loadgen" "${lgstore[@]}" -initial "$tasks" -callers 1000 -contexts 1000 $SHAPE -workload list-only -ops 1 -seed 1 -quiet >"$out/$name-load.txt"
  fi

  "$work/a2astore-server" -backend "$backend" "${store[@]}" -http 127.0.0.1:0 -grpc 127.0.0.1:0 -metrics 127.0.0.1:0 \
    -status-updates 0 -history-messages 0 -artifact-bytes 0 -think-time 0 -finish-abandoned=false 2>"$out/$name-server.log" &
  server_pid=$!
  # A memory server fills its store before it serves (about 50,000 tasks a second).
  addrs=$(awaitserving "$out/$name-server.log" "$server_pid" $((30 + tasks / 10000)))
  url=http://${addrs% *}
  note "$name: serving at $url; waiting for idle"
  settle

  note "$name: $sends SendMessage/s and $lists ListTasks/s for $FOR s"
  prof=""
  if [ -n "${CHECK_PROFILE:-}" ]; then # a CPU profile of the server over the window but its first and last 2 s
    (sleep 2; curl -sf -o "$out/$name.pprof" "http://${addrs#* }/debug/pprof/profile?seconds=$((FOR - 4))") &
    prof=$!
  fi
  before=$(ticks); t0=$(date +%s.%N)
  # A method asked at 0 calls a second is not called (a calibration run
  # measures one method alone): its report says 0 calls.
  pids=()
  for m in send:send-only:"$sends":42 list:list-only:"$lists":43; do
    IFS=: read -r what workload rate seed <<<"$m"
    if awk -v r="$rate" 'BEGIN { exit !(r + 0 == 0) }'; then echo '{"total":{"count":0}}' >"$out/$name-$what.json"; continue; fi
    "$work/loadgen" -target "$url" -workload "$workload" -initial -1 -rate "$rate" -duration "${FOR}s" -concurrency 16 -seed "$seed" -quiet -json "$out/$name-$what.json" >"$out/$name-$what.txt" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  after=$(ticks); t1=$(date +%s.%N)
  if [ -n "$prof" ]; then wait "$prof" || note "$name: no CPU profile"; fi
  note "$name: window ended"

  case $backend in
  mem) disk=0 ;;
  pebble) disk=$(du -sb "$work/pebble" | cut -f1) ;;
  pg) disk=$(asuser "$PGBIN/psql" -h "$work/pg" -p "$PGPORT" -U postgres -d postgres -Atc "SELECT pg_total_relation_size('a2a_tasks')") ;;
  esac
  rss=$(awk '/VmRSS/ {print $2 * 1024}' "/proc/$server_pid/status")
  # The live heap: a heap profile with gc=1 collects first, then the Go
  # collector's gauge reads what is left (the model's heap is live heap).
  curl -sf -o /dev/null "http://${addrs#* }/debug/pprof/heap?gc=1"
  heap=$(curl -sf "http://${addrs#* }/metrics" | awk '/^go_memstats_heap_alloc_bytes / {printf "%.0f", $2}')
  shape=$(echo "${SHAPE:-realistic}" | tr " " _)
  [ "$backend" != mem ] || shape=realistic # -mem-initial's tasks
  read -r s0 d0 <<<"$before"; read -r s1 d1 <<<"$after"
  printf 'run name=%s shape=%s backend=%s tasks=%s sends=%s lists=%s seconds=%s wall=%s sent=%s listed=%s server-cpu=%s db-cpu=%s disk-bytes=%s rss-bytes=%s heap-bytes=%s load=%s\n' \
    "$name" "$shape" "$backend" "$tasks" "$sends" "$lists" "$FOR" "$(echo "$t1 - $t0" | bc)" \
    "$(jq .total.count "$out/$name-send.json")" "$(jq .total.count "$out/$name-list.json")" \
    "$(echo "scale=3; ($s1 - $s0) / $hz" | bc)" "$(echo "scale=3; ($d1 - $d0) / $hz" | bc)" \
    "$disk" "$rss" "$heap" "$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)" | tee -a "$out/summary.txt"

  kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""
  if [ -n "$pgdata" ]; then asuser "$PGBIN/pg_ctl" -D "$pgdata" -m fast stop >/dev/null; pgdata=""; fi
  rm -rf "$work/pebble" "$work/pg"
done
note "done: $out"
