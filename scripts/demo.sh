#!/usr/bin/env bash
# relay's main job on a local default: bring up the local broker and
# registry, run relay on a demo stream of orders, and show the outcome.
# Arguments are passed to relay-demo (e.g. -records 50000).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/stack/up.sh --without-jaeger
echo
echo "building relay..."
mkdir -p bin .cache/logs
go build -o bin/relay ./cmd/relay
go build -o bin/relay-demo ./cmd/relay-demo
exec bin/relay-demo "$@"
