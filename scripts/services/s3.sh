#!/usr/bin/env bash
# A throwaway S3-compatible server on 127.0.0.1 for sluice's object-store lake tests: s3s-fs
# (the s3s project's S3 server over a folder), built from crates.io into target/tools once.
#
#   scripts/services/s3.sh install               build it if missing; prints the binary's path
#   scripts/services/s3.sh start DIR PORT        serve DIR/data on PORT; prints its URL
#   scripts/services/s3.sh stop DIR              stop it
#   scripts/services/s3.sh freeze DIR            stop its process (SIGSTOP): its port takes
#                                                connections, nothing answers
#   scripts/services/s3.sh thaw DIR              let it run again (SIGCONT)
#
# Credentials: access key `sluice`, secret `sluice-secret`. A bucket is a folder of DIR/data.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
tools="${SLUICE_TOOLS_DIR:-$root/target/tools}"
bin="$tools/bin/s3s-fs"
usage="usage: s3.sh install | start DIR PORT | stop DIR | freeze DIR | thaw DIR"
action=${1:?$usage}

install() {
  if [ ! -x "$bin" ]; then
    echo "building s3s-fs into $tools (once)" >&2
    CARGO_TARGET_DIR="$tools/build" cargo install --quiet --locked --root "$tools" \
      --features binary s3s-fs@0.14.1 >&2
  fi
}

case "$action" in
  install)
    install
    echo "$bin"
    ;;
  start)
    dir=${2:?usage: s3.sh start DIR PORT}
    port=${3:?usage: s3.sh start DIR PORT}
    install
    mkdir -p "$dir/data"
    nohup "$bin" --host 127.0.0.1 --port "$port" --access-key sluice --secret-key sluice-secret \
      "$dir/data" >"$dir/server.log" 2>&1 &
    echo $! >"$dir/server.pid"
    for _ in $(seq 1 100); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "http://127.0.0.1:$port"
        exit 0
      fi
      if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
        cat "$dir/server.log" >&2
        exit 1
      fi
      sleep 0.1
    done
    echo "s3s-fs did not start on port $port" >&2
    cat "$dir/server.log" >&2
    exit 1
    ;;
  stop)
    dir=${2:?usage: s3.sh stop DIR}
    if [ -f "$dir/server.pid" ]; then
      kill -CONT "$(cat "$dir/server.pid")" 2>/dev/null || true
      kill "$(cat "$dir/server.pid")" 2>/dev/null || true
      rm -f "$dir/server.pid"
    fi
    ;;
  freeze | thaw)
    dir=${2:?$usage}
    if [ "$action" = freeze ]; then signal=STOP; else signal=CONT; fi
    kill "-$signal" "$(cat "$dir/server.pid")"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
