#!/usr/bin/env bash
# Scratch: the mem server's JSON-RPC rows of results/run.sh, repeated.
set -euo pipefail
cd /work/main
W=/tmp/srv/bin; mkdir -p $W
go build -o $W/loadgen ./loadgen
go build -o $W/a2astore-server ./cmd/a2astore-server
# Run at a0c19fe, 2026-12-03 06:22 UTC.
out=$1; mkdir -p $out
hz=$(getconf CLK_TCK)
for i in 1 2 3; do
  $W/a2astore-server -backend mem -http 127.0.0.1:0 -grpc 127.0.0.1:0 -metrics 127.0.0.1:0 \
    -status-updates 0 -history-messages 0 -artifact-bytes 0 -think-time 0 2>$out/server-$i.log &
  pid=$!
  addr=""; for _ in $(seq 300); do addr=$(sed -n 's/.*msg=serving.* http=\([0-9.:]*\).*/\1/p' $out/server-$i.log 2>/dev/null || true); [ -n "$addr" ] && break; sleep 0.1; done
  maddr=$(sed -n 's/.*msg=serving.* metrics=http:\/\/\([0-9.:]*\)\/metrics.*/\1/p' $out/server-$i.log)
  url=http://$addr
  $W/loadgen -target $url -workload send-only -initial -1 -ops 2000 -concurrency 8 -seed 7 -quiet >/dev/null
  for wl in send-only list-only; do
    f=$out/$i-mem-jsonrpc-$wl
    (sleep 1; curl -sf -o $f.pprof "http://$maddr/debug/pprof/profile?seconds=13") & pp=$!
    echo "$(date -u +%T) start $i $wl load=$(cut -d' ' -f1-3 /proc/loadavg)" >> $out/steps.txt
    b=$(awk '{print $14 + $15}' /proc/$pid/stat)
    $W/loadgen -target $url -transport jsonrpc -workload $wl -initial -1 -duration 15s -concurrency 50 -seed 42 -quiet -json $f.json >/dev/null
    echo "$b $(awk '{print $14 + $15}' /proc/$pid/stat) $hz" > $f.cpu
    echo "$(date -u +%T) end   $i $wl load=$(cut -d' ' -f1-3 /proc/loadavg)" >> $out/steps.txt
    wait $pp
  done
  kill -TERM $pid; wait $pid || true
done
