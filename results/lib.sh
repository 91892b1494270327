# Shell helpers shared by the lab's scripts (results/run.sh,
# results/capacity-check.sh). Source it; it defines functions only.

# asuser CMD...: runs CMD as the postgres user when run as root
# (PostgreSQL refuses to run as root).
asuser() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# cputicks PID: the process's CPU so far, utime + stime, in clock ticks.
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# pgticks PGDATA: CPU of the whole PostgreSQL cluster in clock ticks: the
# postmaster's own and its reaped children's (utime + stime + cutime +
# cstime), plus its live children.
pgticks() {
  local pm; pm=$(head -1 "$1/postmaster.pid")
  local t; t=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$pm/stat")
  for c in $(cat /proc/"$pm"/task/*/children 2>/dev/null); do
    t=$(( t + $(awk '{print $14 + $15}' "/proc/$c/stat" 2>/dev/null || echo 0) ))
  done
  echo "$t"
}

# pgstart DIR PORT: a throwaway PostgreSQL cluster in DIR/data, on a Unix
# socket in DIR only; prints its DSN. Needs $PGBIN.
pgstart() {
  mkdir -p "$1"
  if [ "$(id -u)" = 0 ]; then chown postgres "$1"; fi
  asuser "$PGBIN/initdb" -D "$1/data" -A trust -U postgres >"$1/initdb.log" 2>&1
  asuser "$PGBIN/pg_ctl" -D "$1/data" -l "$1/log" -w -o "-p $2 -k $1 -c listen_addresses=''" start >/dev/null
  echo "host=$1 port=$2 user=postgres dbname=postgres"
}

# awaitserving LOG PID [SECONDS]: waits up to SECONDS (default 30) for
# a2astore-server PID to log that it serves, then prints its HTTP address
# and its metrics listener's (host:port each, one line); fails with the
# log if it exits or does not.
awaitserving() {
  local addr=""
  for _ in $(seq $((${3:-30} * 10))); do
    # (the log may not exist yet: the shell opens it in the child)
    addr=$(sed -n 's/.*msg=serving.* http=\([0-9.:]*\).*/\1/p' "$1" 2>/dev/null || true)
    [ -n "$addr" ] && break
    kill -0 "$2" 2>/dev/null || { cat "$1" >&2; return 1; }
    sleep 0.1
  done
  [ -n "$addr" ] || { echo "a2astore-server did not start" >&2; cat "$1" >&2; return 1; }
  echo "$addr $(sed -n 's/.*msg=serving.* metrics=http:\/\/\([0-9.:]*\)\/metrics.*/\1/p' "$1")"
}
