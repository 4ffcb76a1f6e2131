#!/usr/bin/env bash
# ClickHouse's clients, at pinned versions from their registries, for the tests that point them
# at sluice's ClickHouse doors unchanged: clickhouse-connect with pandas (for insert_df) and
# clickhouse-driver (the native protocol), from PyPI into the Python virtualenv the lake tests
# use, and @clickhouse/client (npm) into target/tools/clickhouse-js. Debian's clickhouse-client
# comes with the ClickHouse server (scripts/services/clickhouse.sh).
# The Rust client (the `clickhouse` crate) is a dev-dependency of the end-to-end tests.
# Does nothing when they are already there.
#
#   scripts/services/clients.sh install
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="${SLUICE_PYTHON_VENV:-$root/target/pyreader}"
js="${SLUICE_TOOLS_DIR:-$root/target/tools}/clickhouse-js"
js_client=1.23.1

# Installs PyPI package $1 at version $2 unless that version is there.
pip_pin() {
  if ! "$venv/bin/python" -c "import sys; from importlib.metadata import version; sys.exit(version('$1') != '$2')" 2>/dev/null; then
    echo "installing $1==$2 into $venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check "$1==$2"
  fi
}

pip_pin clickhouse-connect 1.12.0
pip_pin pandas 3.1.1
pip_pin clickhouse-driver 0.2.11
# clickhouse-driver's compression: its checksums, and zstd beside the lz4 clickhouse-connect brings.
pip_pin clickhouse-cityhash 1.0.2.6
pip_pin zstd 1.5.7.2

if [ ! -f "$js/node_modules/@clickhouse/client/package.json" ] ||
  ! grep -q "\"version\": \"$js_client\"" "$js/node_modules/@clickhouse/client/package.json"; then
  if ! command -v npm >/dev/null; then
    echo "installing nodejs and npm (the JavaScript client runs on Node.js)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq nodejs npm >/dev/null
  fi
  echo "installing @clickhouse/client@$js_client into $js (once)" >&2
  mkdir -p "$js"
  npm install --silent --no-audit --no-fund --prefix "$js" "@clickhouse/client@$js_client" >&2
fi
