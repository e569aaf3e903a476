#!/usr/bin/env bash
# make test-matrix: relay's core integration tests (exactly once across
# kills and a rebalance, the zombie fence, a clean shutdown, every failure
# class with kills, the three payload formats) against other Kafka
# versions than the stack's: the oldest KRaft Kafka relay supports and the
# newest the Maven registry serves. Each runs as a single broker from
# Maven in its own RELAY_STACK_DIR (.cache/matrix/<version>), on ports
# beside the stack's; the stack's registry serves the tests.
#
# usage: test-matrix.sh [version...]   (default: 3.9.1 4.4.0)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

versions=("$@")
((${#versions[@]})) || versions=(3.9.1 4.4.0)
tests='^(TestCrashExactlyOnce|TestZombieFenced|TestRebalanceExactlyOnce|TestGracefulShutdown|TestExpiredTransactionIsNotAZombie|TestAdmissionOutcomes|TestMixedClassesSurviveKills|TestProtobufEndStates|TestJSONSchemaEndStates)$'

scripts/stack/up.sh --without-jaeger
export RELAY_STACK_KAFKA_PORT=19092 RELAY_STACK_CONTROLLER_PORT=19093 RELAY_STACK_KAFKA_PROXIED_PORT=19095 \
  RELAY_STACK_KAFKA_PROXY_PORT=19096 RELAY_STACK_KAFKA_SASL_SSL_PORT=19097 RELAY_STACK_KAFKA_SSL_PORT=19098
failed=()
for v in "${versions[@]}"; do
  echo "== Kafka $v"
  export RELAY_STACK_DIR="$PWD/.cache/matrix/$v" RELAY_STACK_KAFKA_VERSION="$v"
  rm -rf "$RELAY_STACK_DIR/kafka/data" # a fresh cluster each run
  scripts/stack/kafka.sh start
  trap 'scripts/stack/kafka.sh stop' EXIT
  scripts/stack/kafka.sh wait
  if ! RELAY_TEST_BOOTSTRAP="127.0.0.1:$RELAY_STACK_KAFKA_PORT" RELAY_TEST_REQUIRE_BROKER=1 \
    go test -count=1 -timeout 30m -run "$tests" ./integration; then
    failed+=("$v")
  fi
  grep -oE 'transaction.version to [0-9]+|metadata.version [0-9]+\.[0-9]+-IV[0-9]+' \
    "$RELAY_STACK_DIR/logs/kafka.log" | sort -u | sed 's/^/   broker: /' || true
  scripts/stack/kafka.sh stop
  trap - EXIT
done
if ((${#failed[@]})); then
  echo "test-matrix: failed on Kafka ${failed[*]}" >&2
  exit 1
fi
echo "test-matrix: passed on Kafka ${versions[*]}"
