#!/usr/bin/env bash
# Push-notification soak (issue #30): a throwaway PostgreSQL cluster (run as
# the postgres user when root, as the tests run theirs), two
# `a2astore-server -backend pg -cluster -push-allow-private` instances on
# loopback ports, and loadgen against both with its live L7 checks and its
# webhook receiver, which refuses connections for SOAK_PUSH_DOWN every
# SOAK_PUSH_EVERY. Every SOAK_KILL_EVERY one instance (a, then b, …) is
# SIGKILLed and started again on the same ports. Every minute a line:
# time, loadgen's progress line for that minute (loadgen runs with
# -progress-interval 1m: ops/s, errors, violations, push deliveries, how
# far it is behind its -rate schedule, and p50/p99 ms by operation over
# the minute, from each operation's send), the rows of a2a_tasks,
# a2a_task_log and a2a_push_configs, the servers' RSS and open sockets,
# and the push queue depth they report. The final table counts response times from each
# operation's scheduled start: a soak that cannot offer SOAK_RATE shows
# its lag there (see its schedule: line and the minute lines).
#
# The verdict is loadgen's: exit 0 when no live-traversal violation, no
# internal error, no push order violation, malformed delivery or loss
# (a terminal event not delivered within SOAK_GRACE after the run); 1
# otherwise; 2 when the soak could not run.
#
# Environment (defaults in brackets): SOAK_DURATION [30m] (Go duration
# syntax, s/m/h), SOAK_KILL_EVERY [10m], SOAK_PUSH_DOWN [60s],
# SOAK_PUSH_EVERY [5m], SOAK_GRACE [5m] (longer than the server's retry
# backoff after a down window), SOAK_RATE [50] (loadgen operations/s),
# SOAK_WORKLOAD [traversal-under-churn], SOAK_PORT [18080] (first of the
# loopback ports: HTTP a/b = PORT, PORT+1; gRPC +10, +11; metrics +20,
# +21; receiver +30; loadgen metrics +31), SOAK_OUT (logs; default a new
# temporary directory), PGBIN (default the newest /usr/lib/postgresql/*/bin),
# LOADGEN_ARGS (more loadgen flags), SERVER_ARGS (more server flags).
#
# The hostile mix (SOAK_HOSTILE=1; SPEC N4, issue #51): the servers run
# with -policy owner, the loadgen above is owner "healthy", and three
# more loadgens (owner "hostile", SOAK_HOSTILE_RATE [5] operations/s each,
# send-only) create tasks whose webhook hangs (accepts, never answers),
# refuses connections, or answers after SOAK_SLOW [5] seconds (below the
# servers' 10 s client timeout). The verdict and the per-minute line are
# the healthy loadgen's; its final push line gives the healthy owner's
# delivery lag, p50/p99 (terminal event after the task was seen
# terminal), to compare with a run without SOAK_HOSTILE. Needs python3
# (the hanging and slow receivers).
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK_DURATION=${SOAK_DURATION:-30m}
SOAK_KILL_EVERY=${SOAK_KILL_EVERY:-10m}
SOAK_PUSH_DOWN=${SOAK_PUSH_DOWN:-60s}
SOAK_PUSH_EVERY=${SOAK_PUSH_EVERY:-5m}
SOAK_GRACE=${SOAK_GRACE:-5m}
SOAK_RATE=${SOAK_RATE:-50}
SOAK_WORKLOAD=${SOAK_WORKLOAD:-traversal-under-churn}
SOAK_PORT=${SOAK_PORT:-18080}
SOAK_HOSTILE=${SOAK_HOSTILE:-}
SOAK_HOSTILE_RATE=${SOAK_HOSTILE_RATE:-5}
SOAK_SLOW=${SOAK_SLOW:-5}
out=${SOAK_OUT:-$(mktemp -d)}
mkdir -p "$out"
chmod 755 "$out"

log() { echo "push-soak: $*" >&2; }

# secs D: a Go duration of one unit (90s, 10m, 1h) in seconds.
secs() {
  case $1 in
    *h) echo $(( ${1%h} * 3600 )) ;;
    *m) echo $(( ${1%m} * 60 )) ;;
    *s) echo $(( ${1%s} )) ;;
    *) echo "$1" ;;
  esac
}
duration=$(secs "$SOAK_DURATION")
kill_every=$(secs "$SOAK_KILL_EVERY")

declare -A pid http grpc metrics
http[a]=$SOAK_PORT; http[b]=$((SOAK_PORT + 1))
grpc[a]=$((SOAK_PORT + 10)); grpc[b]=$((SOAK_PORT + 11))
metrics[a]=$((SOAK_PORT + 20)); metrics[b]=$((SOAK_PORT + 21))
receiver=127.0.0.1:$((SOAK_PORT + 30))
lgmetrics=127.0.0.1:$((SOAK_PORT + 31))
lgpid=""
hostile_pids=()
pgdata=""
# The hostile receivers (SOAK_HOSTILE): hanging, refusing (nothing
# listens there), slow.
hang_addr=127.0.0.1:$((SOAK_PORT + 40))
refuse_addr=127.0.0.1:$((SOAK_PORT + 41))
slow_addr=127.0.0.1:$((SOAK_PORT + 42))
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
PGPORT=${PGPORT:-15451} # names the socket only: PostgreSQL listens on no TCP address

asuser() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  [ -n "$lgpid" ] && kill "$lgpid" 2>/dev/null || true
  for p in "${hostile_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for n in a b; do [ -n "${pid[$n]:-}" ] && kill "${pid[$n]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$pgdata" ]; then asuser "$PGBIN/pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

log "building a2astore-server and loadgen into $out"
go build -o "$out/a2astore-server" ./cmd/a2astore-server
go build -o "$out/loadgen" ./loadgen

[ -x "$PGBIN/initdb" ] || { log "no PostgreSQL binaries in /usr/lib/postgresql/*/bin (set PGBIN)"; exit 2; }
mkdir -p "$out/pg"
[ "$(id -u)" = 0 ] && chown postgres "$out/pg"
pgdata=$out/pg/data
log "starting PostgreSQL ($PGBIN)"
asuser "$PGBIN/initdb" -D "$pgdata" -A trust -U postgres --no-sync >"$out/initdb.log" 2>&1
asuser "$PGBIN/pg_ctl" -D "$pgdata" -l "$out/pg/log" -w \
  -o "-p $PGPORT -k $out/pg -c listen_addresses='' -c max_connections=200" start >/dev/null
asuser "$PGBIN/createdb" -h "$out/pg" -p "$PGPORT" -U postgres soak
dsn="host=$out/pg port=$PGPORT user=postgres dbname=soak"

# start N: starts instance N (a or b) on its ports and waits until it
# serves its agent card.
policy=none
[ -n "$SOAK_HOSTILE" ] && policy=owner
start() {
  local n=$1
  # shellcheck disable=SC2086 # SERVER_ARGS is a list of flags
  "$out/a2astore-server" -backend pg -pg-dsn "$dsn" -cluster -cluster-instance "soak-$n" \
    -http "127.0.0.1:${http[$n]}" -grpc "127.0.0.1:${grpc[$n]}" -metrics "127.0.0.1:${metrics[$n]}" \
    -policy "$policy" -push-allow-private ${SERVER_ARGS:-} >>"$out/server-$n.log" 2>&1 &
  pid[$n]=$!
  for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "http://127.0.0.1:${http[$n]}/.well-known/agent-card.json" 2>/dev/null && return 0
    kill -0 "${pid[$n]}" 2>/dev/null || break
    sleep 0.1
  done
  log "instance $n did not start:"; tail -20 "$out/server-$n.log" >&2
  exit 2
}

# rows TABLE: its row count, "-" when it does not exist.
rows() {
  asuser "$PGBIN/psql" -h "$out/pg" -p "$PGPORT" -U postgres -d soak -tAc "SELECT count(*) FROM $1" 2>/dev/null || echo -
}

# rss N: instance N's resident set in MiB.
rss() { local n=$1; ps -o rss= -p "${pid[$n]}" 2>/dev/null | awk '{printf "%.0f", $1/1024}' || echo -; }

# socks N: instance N's open sockets (its listeners, database
# connections, webhook connections, clients' connections).
socks() { local n=$1; find "/proc/${pid[$n]}/fd" -lname 'socket:*' 2>/dev/null | wc -l; }

# depth: the push queue depth instance a reports (or b's when a is down).
# The value is printed once: a pipeline whose curl failed after awk had
# printed (it split the minute line in two) counts as no answer.
depth() {
  local v
  for n in a b; do
    v=$(curl -fsS "http://127.0.0.1:${metrics[$n]}/metrics" 2>/dev/null |
      awk '/^a2astore_push_queue_depth[ {]/ {v=$NF; found=1} END {if (found) print v}' || true) # reads it all: no SIGPIPE
    [ -n "$v" ] && { echo "$v"; return 0; }
  done
  echo -
}

status() {
  local lg
  lg=$(grep -E '^ *[0-9.]+s ' "$out/loadgen.log" 2>/dev/null | tail -1 | sed -E 's/^ +//' || true)
  local mem=""
  for n in a b; do mem+=" rss_$n=$(rss "$n")MiB socks_$n=$(socks "$n")"; done
  echo "$(date -u +%H:%M:%S) loadgen[${lg:--}] tasks=$(rows a2a_tasks) log=$(rows a2a_task_log) push_configs=$(rows a2a_push_configs) depth=$(depth)$mem"
}

# receiver MODE ADDR: a webhook on ADDR that hangs (accepts, reads,
# never answers) or answers 204 after SOAK_SLOW seconds (slow).
receiver() {
  python3 - "$1" "$2" "$SOAK_SLOW" <<'PY' >>"$out/hostile-$1.log" 2>&1 &
import sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
mode, addr, slow = sys.argv[1], sys.argv[2], float(sys.argv[3])
host, port = addr.rsplit(":", 1)
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if mode == "hang":
            threading.Event().wait()
        time.sleep(slow)
        self.send_response(204)
        self.end_headers()
    def log_message(self, *a):
        pass
ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer((host, int(port)), H).serve_forever()
PY
  hostile_pids+=($!)
}

start a
start b
log "instances: http://127.0.0.1:${http[a]} http://127.0.0.1:${http[b]}; logs in $out"

healthy_args=()
if [ -n "$SOAK_HOSTILE" ]; then
  command -v python3 >/dev/null || { log "SOAK_HOSTILE needs python3 (the hanging and slow receivers)"; exit 2; }
  receiver hang "$hang_addr"
  receiver slow "$slow_addr"
  healthy_args=(-caller healthy)
  for url in "http://$hang_addr/" "http://$refuse_addr/" "http://$slow_addr/"; do
    "$out/loadgen" -target "http://127.0.0.1:${http[a]},http://127.0.0.1:${http[b]}" \
      -workload send-only -rate "$SOAK_HOSTILE_RATE" -duration "$SOAK_DURATION" -caller hostile \
      -push-url "$url" >>"$out/hostile-loadgen.txt" 2>>"$out/hostile-loadgen.log" &
    hostile_pids+=($!)
  done
  log "hostile mix: owner hostile's webhooks hang ($hang_addr), refuse ($refuse_addr) and answer after ${SOAK_SLOW}s ($slow_addr); owner healthy's are the checking receiver"
fi

# shellcheck disable=SC2086 # LOADGEN_ARGS is a list of flags
"$out/loadgen" -target "http://127.0.0.1:${http[a]},http://127.0.0.1:${http[b]}" "${healthy_args[@]}" \
  -workload "$SOAK_WORKLOAD" -rate "$SOAK_RATE" -duration "$SOAK_DURATION" \
  -push-receiver "$receiver" -push-down "$SOAK_PUSH_DOWN" -push-every "$SOAK_PUSH_EVERY" -push-grace "$SOAK_GRACE" \
  -metrics-addr "$lgmetrics" -json "$out/loadgen.json" -progress-interval 1m ${LOADGEN_ARGS:-} \
  >"$out/loadgen.txt" 2>"$out/loadgen.log" &
lgpid=$!

began=$(date +%s)
next_kill=$((began + kill_every))
victim=a
while kill -0 "$lgpid" 2>/dev/null; do
  for _ in $(seq 1 60); do
    kill -0 "$lgpid" 2>/dev/null || break
    now=$(date +%s)
    if [ "$now" -ge "$next_kill" ] && [ "$now" -lt $((began + duration)) ]; then
      log "$(date -u +%H:%M:%S) SIGKILL instance $victim (pid ${pid[$victim]}), restarting it"
      kill -9 "${pid[$victim]}" 2>/dev/null || true
      wait "${pid[$victim]}" 2>/dev/null || true
      start "$victim"
      next_kill=$((now + kill_every))
      victim=$([ "$victim" = a ] && echo b || echo a)
    fi
    sleep 1
  done
  status
done
set +e
wait "$lgpid"
rc=$?
lgpid=""
set -e
status
cat "$out/loadgen.txt"
log "loadgen exit $rc; outputs in $out"
exit $rc
