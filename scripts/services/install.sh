#!/usr/bin/env bash
# Installs the servers sluice's tests start (PostgreSQL 15, ClickHouse) and the tools they call
# (curl, openssl) from Debian's packages, once, before the tests run in parallel. Does nothing
# when they are already there.
set -euo pipefail

need=()
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql-15)
if [ ! -x /usr/sbin/clickhouse-server ] && [ ! -x /usr/bin/clickhouse-server ]; then
  need+=(clickhouse-server clickhouse-client)
fi
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
