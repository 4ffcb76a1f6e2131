#!/usr/bin/env bash
# The test command from the README: every test of the workspace, unit and end-to-end.
# End-to-end tests start real sluice servers on 127.0.0.1:0, and real PostgreSQL and ClickHouse
# servers from scripts/services/, themselves; this installs those servers, and the Python Delta
# reader the lake tests compare against, first if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/services/install.sh
export SLUICE_PYTHON="${SLUICE_PYTHON:-$PWD/target/pyreader/bin/python}"

if cargo nextest --version >/dev/null 2>&1; then
  exec cargo nextest run --workspace --no-fail-fast "$@"
else
  echo "cargo-nextest not found; using cargo test" >&2
  exec cargo test --workspace --no-fail-fast "$@"
fi
