#!/bin/bash
# Quiet-machine measurements for #31/#30 (run with nothing else on the machine).
set -u
cd /work/main
out=${OUT:-/work/main/results/raw/2026-12-02c}
mkdir -p "$out"
ld() { cut -d' ' -f1-3 /proc/loadavg; }
log=$out/steps.txt
run() { local name=$1; shift; echo "$(date -u +%FT%TZ) start $name load=$(ld): $*" >>"$log"; "$@" >"$out/$name.txt" 2>&1; echo "$(date -u +%FT%TZ) end   $name rc=$? load=$(ld)" >>"$log"; }
go build -o /tmp/q-loadgen ./loadgen
go test -c -o /tmp/q-pgstore.test ./pgstore
go test -c -o /tmp/q-push.test ./pushdelivery
echo "$(date -u +%FT%TZ) built, load=$(ld)" >>"$log"
run bench-compare make bench-compare BASE=e180619
run pg-firstpage bash -c "cd pgstore && BENCH_SIZES=100000 /tmp/q-pgstore.test -test.run '^\$' -test.bench 'FirstPage' -test.benchtime 2s -test.count 3 -test.timeout 60m"
run pg-countbacklog bash -c "cd pgstore && LIFECYCLE_N=100000 /tmp/q-pgstore.test -test.run '^\$' -test.bench 'CountBacklog' -test.count 1 -test.timeout 60m"
run pg-lifecycle bash -c "cd pgstore && /tmp/q-pgstore.test -test.run '^\$' -test.bench 'Lifecycle' -test.benchtime 4000x -test.count 3 -test.timeout 60m"
run mem-gc-1e6 env GODEBUG=gctrace=1 /tmp/q-loadgen -target mem -initial 1000000 -workload read-heavy -duration 30s
run push-latency bash -c "cd pushdelivery && /tmp/q-push.test -test.run '^\$' -test.bench 'CommitToWebhook' -test.benchtime 200x -test.count 3 -test.timeout 30m"
run push-deliveries bash -c "cd pushdelivery && /tmp/q-push.test -test.run '^\$' -test.bench 'BackendDeliveries' -test.benchtime 20x -test.count 3 -test.timeout 30m"
run push-backlog bash -c "cd pushdelivery && A2ASTORE_PUSH_BACKLOG=1 /tmp/q-push.test -test.run 'TestBacklogRecovery' -test.v -test.timeout 30m"
echo "$(date -u +%FT%TZ) done load=$(ld)" >>"$log"
