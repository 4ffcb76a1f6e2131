#!/usr/bin/env bash
# A throwaway S3 server on 127.0.0.1 whose conditional writes are atomic, for the fleet test,
# where several sluice processes commit to one Delta table: moto's server mode, from PyPI, in
# the Python virtualenv the lake tests read with (target/pyreader).
#
# s3s-fs (scripts/services/s3.sh) answers a second `PUT` with `If-None-Match: *` with 412, but
# checks and writes in two steps: of eight such PUTs racing for one key, several get 200, and
# a Delta commit could overwrite another writer's. moto does too, less often; run by
# moto_serialized.py, which hands it one request at a time, one gets 200 and the others 412,
# as on AWS S3.
#
#   scripts/services/moto.sh install                 install it if missing
#   scripts/services/moto.sh start DIR PORT BUCKET   serve on PORT with an empty BUCKET;
#                                                    prints its URL
#   scripts/services/moto.sh stop DIR                stop it
#
# Any access key and secret are accepted. Objects live in the server's memory.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${SLUICE_PYTHON_VENV:-$root/target/pyreader}"
version=5.2.5
usage="usage: moto.sh install | start DIR PORT BUCKET | stop DIR"
action=${1:?$usage}

install() {
  if ! "$venv/bin/python" -c "import sys; from importlib.metadata import version; sys.exit(version('moto') != '$version')" 2>/dev/null; then
    if [ ! -x "$venv/bin/python" ]; then
      echo "no Python virtualenv at $venv: run scripts/services/install.sh" >&2
      exit 1
    fi
    echo "installing moto[server]==$version into $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "moto[server]==$version" >&2
  fi
}

case "$action" in
  install)
    install
    ;;
  start)
    dir=${2:?$usage}
    port=${3:?$usage}
    bucket=${4:?$usage}
    install
    mkdir -p "$dir"
    nohup "$venv/bin/python" "$root/scripts/services/moto_serialized.py" 127.0.0.1 "$port" \
      >"$dir/server.log" 2>&1 &
    echo $! >"$dir/server.pid"
    url="http://127.0.0.1:$port"
    for _ in $(seq 1 300); do
      if curl -sf -o /dev/null -X PUT "$url/$bucket" 2>/dev/null; then
        echo "$url"
        exit 0
      fi
      if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
        cat "$dir/server.log" >&2
        exit 1
      fi
      sleep 0.1
    done
    echo "moto did not start on port $port" >&2
    cat "$dir/server.log" >&2
    exit 1
    ;;
  stop)
    dir=${2:?$usage}
    if [ -f "$dir/server.pid" ]; then
      kill "$(cat "$dir/server.pid")" 2>/dev/null || true
      rm -f "$dir/server.pid"
    fi
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
