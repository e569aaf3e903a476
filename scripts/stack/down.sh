#!/usr/bin/env bash
# Stops the local stack, and the three-node cluster of cluster.sh when it
# runs. With --purge also deletes the data and config of the Kafka broker
# and of the cluster, the logs and the pid files (fresh clusters next time);
# the downloaded jars, the Apicurio install and the Jaeger binary (bin/) are
# kept so the next up.sh needs no download or build. The registry and Jaeger
# keep their data in memory only, so stopping them already wipes it.
#
# usage: down.sh [--purge]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

purge=false
case "${1:-}" in
  "") ;;
  --purge) purge=true ;;
  *)
    echo "usage: ${0##*/} [--purge]" >&2
    exit 2
    ;;
esac

here="$STACK_SCRIPT_DIR"

# Stop all at once: a clean Kafka shutdown takes a few seconds.
"$here/kafka.sh" stop &
kafka_stop=$!
"$here/cluster.sh" stop &
cluster_stop=$!
"$here/registry.sh" stop &
registry_stop=$!
"$here/jaeger.sh" stop &
jaeger_stop=$!
failed=0
wait "$kafka_stop" || failed=1
wait "$cluster_stop" || failed=1
wait "$registry_stop" || failed=1
wait "$jaeger_stop" || failed=1
((failed == 0)) || die "could not stop the stack (see errors above)"

if "$purge"; then
  log "purging Kafka and cluster data, config, logs and pid files under $RELAY_STACK_DIR"
  rm -rf "$RELAY_STACK_DIR/kafka/data" "$RELAY_STACK_DIR/kafka/config" \
    "$RELAY_STACK_DIR/cluster" "$STACK_LOG_DIR" "$STACK_RUN_DIR"
fi
