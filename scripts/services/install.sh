#!/usr/bin/env bash
# Installs the servers sluice's tests start (PostgreSQL 15, ClickHouse, and HAProxy, the load
# balancer of the fleet test) and the tools they call (curl, openssl, and Chromium, the headless
# browser the console's test opens its pages in) from Debian's packages, once, before the tests
# run in parallel. Does nothing when they are already there.
set -euo pipefail

need=()
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql-15)
if [ ! -x /usr/sbin/clickhouse-server ] && [ ! -x /usr/bin/clickhouse-server ]; then
  need+=(clickhouse-server clickhouse-client)
fi
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
command -v chromium >/dev/null || need+=(chromium)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# The independent Delta reader the lake tests check sluice's tables with: the Python `deltalake`
# package (delta-rs) and pyarrow, in a virtualenv under target/ (tests find it through
# SLUICE_PYTHON, which scripts/test.sh sets).
venv="${SLUICE_PYTHON_VENV:-target/pyreader}"
if ! "$venv/bin/python" -c 'import deltalake, pyarrow' 2>/dev/null; then
  echo "installing the Python deltalake reader into $venv" >&2
  if ! python3 -m venv "$venv" 2>/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq python3-venv python3-pip >/dev/null
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check 'deltalake==1.6.6' 'pyarrow==26.0.1'
fi

# The S3 server whose conditional writes are atomic, which the fleet test's three sluice
# processes commit to one Delta table on (moto's server, from PyPI into the same virtualenv,
# handed one request at a time; see scripts/services/moto.sh).
SLUICE_PYTHON_VENV="$venv" "$(dirname "$0")/moto.sh" install

# The S3-compatible server the object-store lake test writes to (s3s-fs, built from crates.io
# into target/tools once; see scripts/services/s3.sh).
"$(dirname "$0")/s3.sh" install >/dev/null

# The Azure Blob Storage emulator the other object-store lake test writes to (Azurite, from the
# npm registry into target/tools once; see scripts/services/azurite.sh).
"$(dirname "$0")/azurite.sh" install

# ClickHouse's official Python and JavaScript clients, which the ClickHouse door's tests drive
# unchanged (see scripts/services/clients.sh).
"$(dirname "$0")/clients.sh" install
