#!/usr/bin/env bash
# make results-scale (#55): how the cost of a page, a total and a write
# grows with the store, 1e3 → 1e7 tasks, on every backend: bench's
# BenchmarkScale (bench/scale_test.go), one process per backend and size
# (the fixture of one size is loaded once, through the store's bulk path,
# and freed with the process), recorded under results/runs-scale/<id>/
# (bench.txt, steps.log, commands.txt, run.json) and copied to
# results/raw/scale-<commit>.txt; then cmd/benchplot rewrites the page's
# section "How the cost grows" from the newest recorded run.
#
# Budget: 60 minutes on 2 quiet cores for the default sizes (most of it
# the loads at 1e7: each prints its progress and rate on stderr, and
# steps.log times every backend and size). Not in `make results` nor CI;
# CI runs the same script as a smoke (SCALE_SMOKE=1: n = 1e4, one
# iteration of each benchmark, into a temporary directory, nothing
# recorded).
#
# Environment:
#   SCALE_SIZES    comma-separated sizes (default 1000,10000,100000,1000000,10000000)
#   SCALE_BACKENDS comma-separated backends (default mem,pebble,pg)
#   SCALE_SIZES_MEM, SCALE_SIZES_PEBBLE, SCALE_SIZES_PG
#                  one backend's sizes, when they differ (default SCALE_SIZES)
#   SCALE_GOMEMLIMIT  the benchmark process's GOMEMLIMIT (default 20GiB: mem
#                  at 1e7 holds about 11 GB live, and the collector's default
#                  target of twice that would not fit in the machine's 24 GiB)
#   SCALE_TIME     -benchtime per benchmark (default 500ms)
#   SCALE_COUNT    -count (default 1; each count loads the fixture again)
#   SCALE_NOTE     a note recorded in run.json
#   SCALE_OUT      record there instead of results/runs-scale/<id> (the page
#                  and results/raw are left alone)
#   SCALE_SMOKE=1  CI's smoke: SCALE_SIZES=10000, SCALE_TIME=1x, SCALE_OUT a
#                  temporary directory; fails unless every backend reported
#                  every operation
#
# PostgreSQL: the benchmarks start their own throwaway cluster
# (internal/pgtest; PostgreSQL 15 server binaries). Disk: the pebble and pg
# fixtures of 1e7 tasks take about 17 GB each, one at a time.
set -euo pipefail
cd "$(dirname "$0")/.."

SMOKE=${SCALE_SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
  SIZES=${SCALE_SIZES:-10000}; TIME=${SCALE_TIME:-1x}
else
  SIZES=${SCALE_SIZES:-1000,10000,100000,1000000,10000000}; TIME=${SCALE_TIME:-500ms}
fi
BACKENDS=${SCALE_BACKENDS:-mem,pebble,pg}
COUNT=${SCALE_COUNT:-1}
MEMLIMIT=${SCALE_GOMEMLIMIT:-20GiB}
# sizes_of BACKEND: its sizes, space-separated.
sizes_of() {
  local v="SCALE_SIZES_${1^^}"
  local s=${!v:-$SIZES}
  echo "${s//,/ }"
}
NOTE=${SCALE_NOTE:-}

log() { echo "results-scale: $*" >&2; }
commit=$(git rev-parse --short=12 HEAD)
dirty=""
git diff --quiet HEAD -- . ':!results' || dirty=-dirty
id=$commit$dirty
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$SMOKE" = 1 ]; then
  final=${SCALE_OUT:-$work/run}
else
  final=${SCALE_OUT:-results/runs-scale/$id}
fi
# Written to <dir>.partial and renamed when complete: an interrupted run
# never passes for a recorded one (the generator ignores *.partial).
out=$final.partial
rm -rf "$out" "$final"
mkdir -p "$out"
log "writing $out (sizes $SIZES, backends $BACKENDS, benchtime $TIME)"

started=$(date -u +%FT%TZ)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$out/commands.txt"
: >"$out/steps.log"
step() { # NAME CMD...: runs CMD, records it and its start/end time.
  local name=$1; shift
  printf '%s\n' "$*" >>"$out/commands.txt"
  echo "$(date -u +%FT%TZ) start $name load=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/steps.log"
  "$@"
  echo "$(date -u +%FT%TZ) end   $name load=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/steps.log"
}

step build go test -c -o "$work/bench.test" ./bench
bench() { # backend, n: BenchmarkScale for one backend at one size, appended.
  printf '  = (cd bench && GOMEMLIMIT=%s BENCH_SIZES=%s bench.test -test.run '"'^\$'"' -test.bench '"'^BenchmarkScale\$/^backend=%s\$'"' -test.benchmem -test.count %s -test.benchtime %s -test.timeout 120m)\n' \
    "$MEMLIMIT" "$2" "$1" "$COUNT" "$TIME" >>"$out/commands.txt"
  (cd bench && GOMEMLIMIT=$MEMLIMIT BENCH_SIZES=$2 "$work/bench.test" -test.run '^$' -test.bench "^BenchmarkScale\$/^backend=$1\$" -test.benchmem \
    -test.count "$COUNT" -test.benchtime "$TIME" -test.timeout 120m) >>"$out/bench.txt"
}
# Size by size, every backend at one size before the next (a run cut
# short still has a curve's beginning on every backend).
all_sizes=$(for be in ${BACKENDS//,/ }; do sizes_of "$be" | tr ' ' '\n'; done | sort -n -u)
for n in $all_sizes; do
  for be in ${BACKENDS//,/ }; do
    if [[ " $(sizes_of "$be") " == *" $n "* ]]; then step "scale-$be-$n" bench "$be" "$n"; fi
  done
done

# Every backend and size reported every operation (the smoke's check; a
# full run that lost one fails too rather than pass for complete).
for be in ${BACKENDS//,/ }; do
  for n in $(sizes_of "$be"); do
    for op in footprint page page-filtered page-depth page-total replace create; do
      grep -q "^BenchmarkScale/backend=$be/op=$op/n=$n/" "$out/bench.txt" ||
        grep -q "^BenchmarkScale/backend=$be/op=$op/n=$n-" "$out/bench.txt" ||
        { log "no op=$op at n=$n on $be"; exit 1; }
    done
  done
done

finished=$(date -u +%FT%TZ)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
json() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
cat >"$out/run.json" <<JSON
{
  "commit": "$commit$dirty",
  "mode": "scale",
  "started": "$started",
  "finished": "$finished",
  "load_before": "$load_before",
  "load_after": "$load_after",
  "cpus": $(nproc),
  "cpu_model": "$(json "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)")",
  "mem_total": "$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)",
  "kernel": "$(json "$(uname -sr)")",
  "go": "$(json "$(go version)")",
  "postgres": "$(json "$( (/usr/lib/postgresql/15/bin/postgres --version || true) 2>/dev/null)")",
  "note": "$(json "$NOTE")"
}
JSON
mv "$out" "$final"; out=$final
log "run recorded in $out ($(( $(date +%s) - $(date -d "$started" +%s) )) s)"
if [ "$SMOKE" = 1 ] || [ -n "${SCALE_OUT:-}" ]; then exit 0; fi

mkdir -p results/raw
cp "$out/bench.txt" "results/raw/scale-$id.txt"
step generate go run ./cmd/benchplot -runs results/runs -o results
