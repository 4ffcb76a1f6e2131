#!/usr/bin/env bash
# The test command from the README: every test of the workspace, unit and end-to-end.
# End-to-end tests start real sluice servers on 127.0.0.1:0, and real PostgreSQL and ClickHouse
# servers from scripts/services/, themselves; this installs those servers first if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/services/install.sh

if cargo nextest --version >/dev/null 2>&1; then
  exec cargo nextest run --workspace --no-fail-fast "$@"
else
  echo "cargo-nextest not found; using cargo test" >&2
  exec cargo test --workspace --no-fail-fast "$@"
fi
