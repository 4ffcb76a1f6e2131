#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server on 127.0.0.1 for sluice's tests and labs.
#
#   scripts/services/postgres.sh start DIR PORT   start a cluster in DIR; prints its URL
#   scripts/services/postgres.sh stop DIR         stop it (the folder is left for the caller)
#   scripts/services/postgres.sh freeze DIR       stop its processes (SIGSTOP): connections open
#                                                 and the port takes new ones, nothing answers
#   scripts/services/postgres.sh thaw DIR         let them run again (SIGCONT)
#
# Installs Debian's postgresql-15 when missing. initdb and postgres refuse to run as root, so
# they run as the postgres user; the socket lives in DIR so clusters never collide.
set -euo pipefail

bin=/usr/lib/postgresql/15/bin
usage="usage: postgres.sh start DIR PORT | stop DIR | freeze DIR | thaw DIR"
action=${1:?$usage}
dir=${2:?$usage}

# Sends signal $1 to the server and its backends: the server first when stopping (no new
# backend is forked meanwhile), last when continuing.
signal_all() {
  local pid
  pid=$(head -1 "$dir/data/postmaster.pid")
  if [ "$1" = STOP ]; then kill -STOP "$pid"; fi
  pkill "-$1" -P "$pid" || true
  if [ "$1" = CONT ]; then kill -CONT "$pid"; fi
}

install() {
  if [ ! -x "$bin/initdb" ]; then
    echo "installing postgresql-15" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq postgresql-15 >/dev/null
  fi
}

case "$action" in
  start)
    port=${3:?usage: postgres.sh start DIR PORT}
    install
    mkdir -p "$dir"
    chown postgres:postgres "$dir"
    chmod 700 "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      runuser -u postgres -- "$bin/initdb" -D "$dir/data" -U postgres --auth=trust \
        --encoding=UTF8 --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir" -w -t 30 start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    if [ -f "$dir/data/postmaster.pid" ]; then
      signal_all CONT
      runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    ;;
  freeze)
    signal_all STOP
    ;;
  thaw)
    signal_all CONT
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
