#!/usr/bin/env bash
# make tck: the official A2A TCK (a2aproject/a2a-tck, A2A 1.0; prepared in
# ../shared/tck beside the repository) against a2astore-server -agent tck on
# every backend: mem, pebble and pg (a throwaway PostgreSQL cluster, run as
# the postgres user when root, as the tests run theirs), and a -cluster
# pair of servers on one PostgreSQL database (the TCK talks to one of
# them, so work runs on either). The runs go at once.
# Each run reads the server's agent card and tests every transport it
# declares (JSON-RPC, HTTP+JSON, gRPC).
#
# Fails when any MUST-level test fails on any backend, except the TCK's own
# known defects listed in interop/tck/known-defects.txt (each named in
# ../shared/tck/README.md) and a test that fails beside the other runs but
# passes when run again alone (reported as flaky). Prints each run's tables
# (MUST / SHOULD / MAY, transports, modules, failures) and its `tck:` line,
# then a summary line per backend, last.
#
# Environment: TCK_DIR (default ../shared/tck), TCK_WORK (the TCK's work
# dir; prepared with TCK_DIR/setup.sh when missing, which needs root for
# Debian packages), TCK_BACKENDS (default "mem pebble pg cluster"),
# TCK_OUT (where logs and results go; default a new temporary directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

TCK_DIR=${TCK_DIR:-$repo/../shared/tck}
TCK_WORK=${TCK_WORK:-${TMPDIR:-/tmp}/a2a-tck-work}
TCK_BACKENDS=${TCK_BACKENDS:-mem pebble pg cluster}
export TCK_WORK

log() { echo "tck-check: $*" >&2; }

[ -x "$TCK_DIR/run.sh" ] || { log "no TCK at $TCK_DIR (set TCK_DIR)"; exit 2; }
if [ ! -x "$TCK_WORK/venv/bin/python" ]; then
  log "preparing the TCK in $TCK_WORK"
  "$TCK_DIR/setup.sh" "$TCK_WORK" >&2
fi

out=${TCK_OUT:-$(mktemp -d)}
mkdir -p "$out"
chmod 755 "$out"
pids=()
pgdata=""
PGBIN=""
asuser() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$pgdata" ]; then asuser "$PGBIN/pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

log "building a2astore-server"
go build -o "$out/a2astore-server" ./cmd/a2astore-server

needs_pg=0
case " $TCK_BACKENDS " in *" pg "*|*" cluster "*) needs_pg=1 ;; esac
if [ "$needs_pg" = 1 ]; then
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$PGBIN/initdb" ] || { log "no PostgreSQL binaries in /usr/lib/postgresql/*/bin"; exit 2; }
  mkdir -p "$out/pg"
  [ "$(id -u)" = 0 ] && chown postgres "$out/pg"
  pgdata=$out/pg/data
  PGPORT=${PGPORT:-15441} # names the socket only: PostgreSQL listens on no TCP address
  log "starting PostgreSQL ($PGBIN)"
  asuser "$PGBIN/initdb" -D "$pgdata" -A trust -U postgres --no-sync >"$out/initdb.log" 2>&1
  asuser "$PGBIN/pg_ctl" -D "$pgdata" -l "$out/pg/log" -w \
    -o "-p $PGPORT -k $out/pg -c listen_addresses='' -c fsync=off -c synchronous_commit=off" start >/dev/null
  for db in tck cluster; do asuser "$PGBIN/createdb" -h "$out/pg" -p "$PGPORT" -U postgres "$db"; done
  dsn() { echo "host=$out/pg port=$PGPORT user=postgres dbname=$1"; }
fi

# start NAME ARGS...: starts a server on free loopback ports and sets $url
# to its HTTP base once it serves. Push notifications are on (the default)
# and may go to loopback: the TCK's webhook receiver listens there.
start() {
  local name=$1; shift
  "$out/a2astore-server" -agent tck -http 127.0.0.1:0 -grpc 127.0.0.1:0 -metrics "" -push-allow-private "$@" >"$out/server-$name.log" 2>&1 &
  pids+=($!)
  url=""
  for _ in $(seq 1 200); do
    url=$(grep -o 'msg=serving .* http=[^ ]*' "$out/server-$name.log" | grep -o 'http=[^ ]*' | cut -d= -f2 || true)
    [ -n "$url" ] && break
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$url" ] || { log "server $name did not start"; cat "$out/server-$name.log" >&2; exit 1; }
  url="http://$url"
}

# Every backend's servers start first, then the TCK runs against all of
# them at once: a run spends most of its time waiting on streams that stay
# open until the TCK's timeouts (a subscription to a task waiting for
# input has nothing more to send), not on the machine's cores.
declare -A urls runs
for backend in $TCK_BACKENDS; do
  case $backend in
    mem) start mem -backend mem ;;
    pebble) start pebble -backend pebble -pebble-dir "$out/pebble" ;;
    pg) start pg -backend pg -pg-dsn "$(dsn tck)" ;;
    cluster)
      # Two instances on one database; the TCK talks to the second, so
      # work may run on either.
      start cluster-a -backend pg -pg-dsn "$(dsn cluster)" -cluster -cluster-instance tck-a
      start cluster-b -backend pg -pg-dsn "$(dsn cluster)" -cluster -cluster-instance tck-b ;;
    *) log "unknown backend $backend"; exit 2 ;;
  esac
  urls[$backend]=$url
done
started=$(date +%s)
for backend in $TCK_BACKENDS; do
  log "running the TCK against $backend at ${urls[$backend]}"
  TCK_OUT="$out/tck-$backend" "$TCK_DIR/run.sh" "${urls[$backend]}" >"$out/tck-$backend.txt" 2>&1 &
  runs[$backend]=$!
done
# must_failures RESULTS: prints the MUST-level failures of a run's
# results.json but the known defects (one node ID a line), and the known
# defects it hit on stderr; exits 1 when the results are missing or empty.
must_failures() {
  "$TCK_WORK/venv/bin/python" - "$1" interop/tck/known-defects.txt <<'PY'
import json, sys
results, known = sys.argv[1], sys.argv[2]
defects = {l.split("#")[0].strip() for l in open(known)} - {""}
try:
    tests = json.load(open(results))["tests"]
except (OSError, ValueError, KeyError) as e:
    print(f"tck-check: no results: {e}", file=sys.stderr)
    sys.exit(1)
for t in tests:
    if t["outcome"] in ("failed", "error"):
        if t["nodeid"] in defects:
            print(f"tck-check: known TCK defect, not counted: {t['nodeid']}", file=sys.stderr)
        elif t["level"] == "must":
            print(t["nodeid"])
sys.exit(0 if tests else 1)
PY
}

# selection NODEID...: a pytest -k expression selecting the given tests:
# each by its name with its parameters (test_x[grpc]), which -k matches
# as a keyword; a name with characters -k does not take falls back to its
# words (module, class, name, parameter), which may select more.
selection() {
  "$TCK_WORK/venv/bin/python" - "$@" <<'PY'
import re, sys
terms = []
for nodeid in sys.argv[1:]:
    name = nodeid.split("::")[-1]
    if re.fullmatch(r"[\w:+\-.\[\]/]+", name):
        terms.append("(" + name + ")")
        continue
    words = re.split(r"::|\[|\]|/|\.py", nodeid)
    words = [w for w in words[-3:] if re.fullmatch(r"\w+", w)]
    terms.append("(" + " and ".join(words) + ")")
print(" or ".join(terms))
PY
}

# verdicts NODEIDS RESULTS: for each test in the file NODEIDS, a line
# "flaky (failed, then passed alone): ID" when RESULTS (a second run) has
# it passed, else "MUST-level failure: ID (then OUTCOME alone)".
verdicts() {
  "$TCK_WORK/venv/bin/python" - "$1" "$2" <<'PY'
import json, sys
ids = [l.strip() for l in open(sys.argv[1]) if l.strip()]
try:
    outcome = {t["nodeid"]: t["outcome"] for t in json.load(open(sys.argv[2]))["tests"]}
except (OSError, ValueError, KeyError):
    outcome = {}
for n in ids:
    o = outcome.get(n, "not run")
    print(f"flaky (failed, then passed alone): {n}" if o == "passed" else f"MUST-level failure: {n} (then {o} alone)")
PY
}

# Every run ends first. Then a MUST-level failure is run once more, alone
# against the same server: the four runs share two cores, and a test that
# fails only under that load is reported as flaky (in the summary, last)
# without failing the check. A test that fails again fails it.
for backend in $TCK_BACKENDS; do wait "${runs[$backend]}" || true; done
failed=0
summary=()
for backend in $TCK_BACKENDS; do
  echo "== backend=$backend ($(( $(date +%s) - started )) s since the runs started, load $(cut -d' ' -f1-3 /proc/loadavg))"
  sed -n '/^== a2a-tck results/,$p' "$out/tck-$backend.txt"
  if ! must_failures "$out/tck-$backend/results.json" >"$out/tck-$backend.must"; then
    failed=1
    summary+=("$backend: no results (log: $out/tck-$backend.txt)")
    continue
  fi
  if [ ! -s "$out/tck-$backend.must" ]; then
    summary+=("$backend: no MUST-level failure")
    continue
  fi
  mapfile -t bad <"$out/tck-$backend.must"
  log "$backend: ${#bad[@]} MUST-level failure(s); running them once more, alone"
  rm -rf "$out/tck-$backend-again" # run.sh leaves an older results.json in place
  TCK_OUT="$out/tck-$backend-again" "$TCK_DIR/run.sh" "${urls[$backend]}" -k "$(selection "${bad[@]}")" \
    >"$out/tck-$backend-again.txt" 2>&1 || true
  lines=()
  mapfile -t lines < <(verdicts "$out/tck-$backend.must" "$out/tck-$backend-again/results.json")
  if [ "${#lines[@]}" -ne "${#bad[@]}" ]; then
    failed=1
    summary+=("$backend: ${#bad[@]} MUST-level failure(s), no verdict on them (see $out/tck-$backend.must)")
  fi
  for line in "${lines[@]}"; do
    summary+=("$backend: $line")
    case $line in flaky*) ;; *) failed=1 ;; esac
  done
done
log "outputs in $out (server logs: $out/server-*.log)"
for line in "${summary[@]}"; do log "$line"; done
exit $failed
