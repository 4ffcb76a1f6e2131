#!/usr/bin/env bash
# A throwaway ClickHouse server (Debian's 18.16) on 127.0.0.1 for sluice's tests and labs.
#
#   scripts/services/clickhouse.sh start DIR HTTP_PORT TCP_PORT [SHARD_TCP_PORTS]
#                                                                 start it in DIR; prints its URL.
#                                                                 SHARD_TCP_PORTS ("9001,9002"):
#                                                                 the native ports of a cluster
#                                                                 `sluice_shards`, one shard each
#   scripts/services/clickhouse.sh stop DIR                       stop it
#   scripts/services/clickhouse.sh freeze DIR                     stop its process (SIGSTOP):
#                                                                 its port takes connections,
#                                                                 nothing answers
#   scripts/services/clickhouse.sh thaw DIR                       let it run again (SIGCONT)
#
# Installs Debian's clickhouse-server when missing. A minimal config of our own: loopback only,
# everything under DIR, user `default` without a password.
set -euo pipefail

usage="usage: clickhouse.sh start DIR HTTP_PORT TCP_PORT [SHARD_TCP_PORTS] | stop DIR | freeze DIR | thaw DIR"
action=${1:?$usage}
dir=${2:?$usage}

install() {
  if [ ! -x /usr/sbin/clickhouse-server ] && [ ! -x /usr/bin/clickhouse-server ]; then
    echo "installing clickhouse-server" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq clickhouse-server clickhouse-client >/dev/null
  fi
}

# `<remote_servers>` with one cluster, `sluice_shards`: a shard per port of $1 ("9001,9002"),
# one replica each, on 127.0.0.1. Nothing when $1 is empty.
remote_servers() {
  [ -n "$1" ] || return 0
  echo "  <remote_servers><sluice_shards>"
  local port
  for port in ${1//,/ }; do
    echo "    <shard><replica><host>127.0.0.1</host><port>$port</port></replica></shard>"
  done
  echo "  </sluice_shards></remote_servers>"
}

server() {
  if [ -x /usr/sbin/clickhouse-server ]; then echo /usr/sbin/clickhouse-server; else echo /usr/bin/clickhouse-server; fi
}

case "$action" in
  start)
    http=${3:?usage: clickhouse.sh start DIR HTTP_PORT TCP_PORT}
    tcp=${4:?usage: clickhouse.sh start DIR HTTP_PORT TCP_PORT}
    shards=${5:-}
    install
    mkdir -p "$dir/data" "$dir/tmp" "$dir/log"
    cat >"$dir/users.xml" <<XML
<yandex>
  <profiles><default></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default></default></quotas>
</yandex>
XML
    cat >"$dir/config.xml" <<XML
<yandex>
  <logger>
    <level>warning</level>
    <log>$dir/log/server.log</log>
    <errorlog>$dir/log/error.log</errorlog>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$http</http_port>
  <tcp_port>$tcp</tcp_port>
  <path>$dir/data/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
$(remote_servers "$shards")
</yandex>
XML
    nohup "$(server)" --config-file="$dir/config.xml" >"$dir/log/stdout.log" 2>&1 &
    echo $! >"$dir/server.pid"
    for _ in $(seq 1 200); do
      if curl -sf "http://127.0.0.1:$http/ping" >/dev/null 2>&1; then
        echo "http://127.0.0.1:$http"
        exit 0
      fi
      if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
        cat "$dir/log/stdout.log" "$dir/log/error.log" >&2 2>/dev/null || true
        exit 1
      fi
      sleep 0.1
    done
    echo "clickhouse did not answer /ping within 20 s" >&2
    exit 1
    ;;
  stop)
    if [ -f "$dir/server.pid" ]; then
      pid=$(cat "$dir/server.pid")
      kill -CONT "$pid" 2>/dev/null || true
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/server.pid"
    fi
    ;;
  freeze)
    kill -STOP "$(cat "$dir/server.pid")"
    ;;
  thaw)
    kill -CONT "$(cat "$dir/server.pid")"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
