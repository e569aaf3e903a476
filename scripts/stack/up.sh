#!/usr/bin/env bash
# Brings up the local stack (Kafka + Apicurio Registry) and prints the
# endpoints. Idempotent: when both are already running it only checks them.
#
# usage: up.sh
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

here="$STACK_SCRIPT_DIR"

# Installs one after the other: two Maven runs sharing ~/.m2 can trip over
# each other, and both are instant no-ops once installed.
"$here/kafka.sh" install
"$here/registry.sh" install

# `start` only launches the JVM, so both boot in parallel; then wait for both
# concurrently and report every failure, not just the first.
"$here/kafka.sh" start
"$here/registry.sh" start
"$here/kafka.sh" wait &
kafka_wait=$!
"$here/registry.sh" wait &
registry_wait=$!
failed=0
wait "$kafka_wait" || failed=1
wait "$registry_wait" || failed=1
((failed == 0)) || die "stack did not come up (see errors above)"

cat <<EOF

Local stack is up:
  Kafka bootstrap    127.0.0.1:$RELAY_STACK_KAFKA_PORT
  Schema registry    http://127.0.0.1:$RELAY_STACK_REGISTRY_PORT/apis/ccompat/v7
  Logs               $STACK_LOG_DIR/{kafka.log,kafka.out,registry.log}
  Stop               $here/down.sh   (add --purge to also delete Kafka data)
EOF
