#!/usr/bin/env bash
# Brings up the local stack (Kafka, Apicurio Registry, Jaeger) and prints
# the endpoints. Idempotent: when all are already running it only checks them.
#
# usage: up.sh [--without-jaeger]
#   --without-jaeger: Kafka and the registry only (make demo, which shows
#   no traces: Jaeger's first build takes minutes); make up and make test
#   start all three.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

here="$STACK_SCRIPT_DIR"

# Installs one after the other: two Maven runs sharing ~/.m2 can trip over
# each other, and both are instant no-ops once installed.
"$here/kafka.sh" install
"$here/registry.sh" install

# `start` only launches the JVM, so both boot in parallel. Jaeger's first
# build (minutes; a no-op once built) runs meanwhile, niced so that the JVMs
# come first; then wait for all three concurrently and report every failure,
# not just the first.
with_jaeger=1
[[ "${1:-}" == --without-jaeger ]] && with_jaeger=0
"$here/kafka.sh" start
"$here/registry.sh" start
jaeger_up=
if ((with_jaeger)); then
  { "$here/jaeger.sh" install && "$here/jaeger.sh" start && "$here/jaeger.sh" wait; } &
  jaeger_up=$!
fi
"$here/kafka.sh" wait &
kafka_wait=$!
"$here/registry.sh" wait &
registry_wait=$!
failed=0
wait "$kafka_wait" || failed=1
wait "$registry_wait" || failed=1
[[ -z "$jaeger_up" ]] || wait "$jaeger_up" || failed=1
((failed == 0)) || die "stack did not come up (see errors above)"

cat <<EOF

Local stack is up:
  Kafka bootstrap    127.0.0.1:$RELAY_STACK_KAFKA_PORT
  Schema registry    http://127.0.0.1:$RELAY_STACK_REGISTRY_PORT/apis/ccompat/v7
EOF
if ((with_jaeger)); then
  cat <<EOF
  OTLP (traces)      127.0.0.1:$RELAY_STACK_JAEGER_OTLP_GRPC_PORT (gRPC), http://127.0.0.1:$RELAY_STACK_JAEGER_OTLP_HTTP_PORT (HTTP)
  Jaeger query API   http://127.0.0.1:$RELAY_STACK_JAEGER_QUERY_PORT/api/traces
EOF
fi
cat <<EOF
  Logs               $STACK_LOG_DIR/{kafka.log,kafka.out,registry.log,jaeger.log}
  Stop               $here/down.sh   (add --purge to also delete Kafka data)
EOF
