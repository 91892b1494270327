#!/usr/bin/env bash
# Reproduces the committed runs: one loadgen run per embedded backend, same
# workload, seed and length, each writing <backend>.json, <backend>.txt
# (summary table) and <backend>.bench (benchstat format). The pg run starts a
# throwaway PostgreSQL 15 cluster on a Unix socket (as the postgres user when
# run as root).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=results/archive/loadgen
ARGS=(-workload traversal-under-churn -duration 30s -concurrency 8 -seed 42 -quiet -bench)
work=$(mktemp -d); chmod 755 "$work"
PGBIN=/usr/lib/postgresql/15/bin
asuser() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() { asuser "$PGBIN/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/loadgen" ./loadgen

run() { # name, extra args…
  local name=$1; shift
  "$work/loadgen" "${ARGS[@]}" "$@" -json "$out/$name.json" >"$work/$name.out"
  grep -v '^Benchmark\|^goos\|^goarch\|^pkg' "$work/$name.out" >"$out/$name.txt"
  grep '^Benchmark\|^goos\|^goarch\|^pkg' "$work/$name.out" >"$out/$name.bench"
  cat "$out/$name.txt"
}

run mem -target mem
run pebble -target pebble -dir "$work/pebble"
mkdir -p "$work/pg"; [ "$(id -u)" = 0 ] && chown postgres "$work/pg"
asuser "$PGBIN/initdb" -D "$work/pg/data" -A trust -U postgres >/dev/null
asuser "$PGBIN/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w -o "-p 15440 -k $work/pg -c listen_addresses=''" start >/dev/null
run pg -target pg -dsn "host=$work/pg port=15440 user=postgres dbname=postgres"
