#!/usr/bin/env bash
# A throwaway Azure Blob Storage server on 127.0.0.1 for sluice's object-store lake tests:
# Azurite (Microsoft's Azure Storage emulator), installed from the npm registry into
# target/tools/azurite once. Its conditional writes are atomic (one Node.js thread checks
# `If-None-Match: *` and records the blob in one step), so two writers racing for one Delta
# log entry get one success and one conflict, as on Azure.
#
#   scripts/services/azurite.sh install                  install it if missing
#   scripts/services/azurite.sh start DIR PORT CONTAINER serve DIR on PORT with an empty
#                                                        CONTAINER; prints the blob URL
#   scripts/services/azurite.sh stop DIR                 stop it
#
# Account: Azurite's well-known development account (`devstoreaccount1` and its published key),
# which object_store uses with `azure_storage_use_emulator = true`; the blob URL goes in
# AZURITE_BLOB_STORAGE_URL.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
tools="${SLUICE_TOOLS_DIR:-$root/target/tools}/azurite"
bin="$tools/node_modules/.bin/azurite-blob"
version=3.35.0
account=devstoreaccount1
key='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
action=${1:?usage: azurite.sh install | start DIR PORT CONTAINER | stop DIR}

install() {
  if [ ! -x "$bin" ]; then
    if ! command -v npm >/dev/null; then
      echo "installing nodejs and npm (Azurite runs on Node.js)" >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null
      apt-get install -y -qq nodejs npm >/dev/null
    fi
    echo "installing azurite@$version into $tools (once)" >&2
    mkdir -p "$tools"
    npm install --silent --no-audit --no-fund --prefix "$tools" "azurite@$version" >&2
  fi
}

# Creates a container: a Shared Key request (the key's HMAC-SHA256 of the request's canonical
# form), as the Azure SDKs sign it.
create_container() {
  local url=$1 container=$2
  local date version=2021-08-06 sts signature
  date=$(LC_ALL=C TZ=GMT date '+%a, %d %b %Y %H:%M:%S GMT')
  sts=$(printf 'PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:%s\nx-ms-version:%s\n/%s/%s/%s\nrestype:container' \
    "$date" "$version" "$account" "$account" "$container")
  signature=$(printf '%s' "$sts" |
    openssl dgst -sha256 -mac HMAC -macopt "hexkey:$(printf '%s' "$key" | base64 -d | od -An -vtx1 | tr -d ' \n')" -binary |
    base64 -w0)
  curl -fsS -X PUT -H "x-ms-date: $date" -H "x-ms-version: $version" -H 'Content-Length: 0' \
    -H "Authorization: SharedKey $account:$signature" "$url/$account/$container?restype=container" \
    >/dev/null
}

case "$action" in
  install)
    install
    ;;
  start)
    dir=${2:?usage: azurite.sh start DIR PORT CONTAINER}
    port=${3:?usage: azurite.sh start DIR PORT CONTAINER}
    container=${4:?usage: azurite.sh start DIR PORT CONTAINER}
    install
    mkdir -p "$dir/data"
    nohup "$bin" --blobHost 127.0.0.1 --blobPort "$port" --location "$dir/data" \
      --skipApiVersionCheck --disableProductStyleUrl --disableTelemetry --silent >"$dir/server.log" 2>&1 &
    echo $! >"$dir/server.pid"
    url="http://127.0.0.1:$port"
    for _ in $(seq 1 200); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        if ! create_container "$url" "$container"; then
          echo "cannot create container $container on $url" >&2
          kill "$(cat "$dir/server.pid")" 2>/dev/null || true
          rm -f "$dir/server.pid"
          exit 1
        fi
        echo "$url"
        exit 0
      fi
      if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
        cat "$dir/server.log" >&2
        exit 1
      fi
      sleep 0.1
    done
    echo "azurite did not start on port $port" >&2
    cat "$dir/server.log" >&2
    exit 1
    ;;
  stop)
    dir=${2:?usage: azurite.sh stop DIR}
    if [ -f "$dir/server.pid" ]; then
      kill "$(cat "$dir/server.pid")" 2>/dev/null || true
      rm -f "$dir/server.pid"
    fi
    ;;
  *)
    echo "usage: azurite.sh install | start DIR PORT CONTAINER | stop DIR" >&2
    exit 2
    ;;
esac
