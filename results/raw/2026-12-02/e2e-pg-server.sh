#!/usr/bin/env bash
# Issue 20 end to end: loadgen send-only against a2astore-server -backend pg
# with status updates, before the ledger (9342d80^) and at HEAD, alternated.
set -euo pipefail
w=/tmp/e2e; rm -rf $w; mkdir -p $w/pg; chown postgres $w/pg
cd /work/main
go build -o $w/loadgen ./loadgen
go build -o $w/server-head ./cmd/a2astore-server
git worktree add -f $w/before 9342d80^ >/dev/null 2>&1
(cd $w/before && go build -o $w/server-before ./cmd/a2astore-server)
git worktree remove --force $w/before
PGBIN=/usr/lib/postgresql/15/bin
runuser -u postgres -- $PGBIN/initdb -D $w/pg/data -A trust -U postgres >/dev/null
runuser -u postgres -- $PGBIN/pg_ctl -D $w/pg/data -l $w/pg/log -w -o "-p 55499 -k $w/pg -c listen_addresses=''" start >/dev/null
trap 'runuser -u postgres -- $PGBIN/pg_ctl -D $w/pg/data -m immediate stop >/dev/null 2>&1 || true' EXIT
DSN="host=$w/pg port=55499 user=postgres dbname=postgres"
for round in 1 2; do
  for v in before head; do
    runuser -u postgres -- $PGBIN/psql -q -h $w/pg -p 55499 -U postgres -d postgres -c 'DROP SCHEMA public CASCADE' -c 'CREATE SCHEMA public' >/dev/null 2>&1
    $w/server-$v -backend pg -pg-dsn "$DSN" -http 127.0.0.1:0 -grpc 127.0.0.1:0 -metrics "" -status-updates 3 -history-messages 0 -artifact-bytes 0 -think-time 0 2>$w/server-$v.log &
    pid=$!
    addr=""
    for i in $(seq 1 200); do addr=$(sed -n 's/.*msg=serving.* http=\([0-9.:]*\).*/\1/p' $w/server-$v.log); [ -n "$addr" ] && break; sleep 0.1; done
    [ -n "$addr" ] || { cat $w/server-$v.log; exit 1; }
    $w/loadgen -target "http://$addr" -workload send-only -initial -1 -ops 2000 -concurrency 8 -seed 7 -quiet >/dev/null
    l0=$(cut -d' ' -f1 /proc/loadavg)
    $w/loadgen -target "http://$addr" -transport jsonrpc -workload send-only -initial -1 -duration 20s -concurrency 16 -seed 42 -quiet -json $w/$v-$round.json >/dev/null
    l1=$(cut -d' ' -f1 /proc/loadavg)
    kill -TERM $pid; wait $pid || true
    echo "$v round $round load $l0 -> $l1: $(python3 -c "import json,sys; d=json.load(open('$w/$v-$round.json')); print({k:v for k,v in d.items() if not isinstance(v,(dict,list))})")"
  done
done
