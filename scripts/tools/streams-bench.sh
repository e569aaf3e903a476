#!/usr/bin/env bash
# The Kafka Streams peer of relay-bench's mode (k): builds the Maven project
# in cmd/relay-bench/streams (Kafka Streams, the local broker's version) into
# $RELAY_STACK_DIR/bench/streams: relay-bench-streams.jar and its runtime
# jars in lib/. Once: a stamp of the sources and the build command skips the
# build while nothing changed. scripts/bench.sh runs it before the harness.
#
# usage: streams-bench.sh {install|path}
#   install  build unless the built one is up to date
#   path     install, then print the directory to pass as relay-bench -streams
#            (messages go to stderr)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../stack/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stack/common.sh"

STREAMS_PROJECT_DIR="$STACK_REPO_DIR/cmd/relay-bench/streams"
STREAMS_DIR="$RELAY_STACK_DIR/bench/streams"
STREAMS_JAR="$STREAMS_DIR/relay-bench-streams.jar"
# Written only after a successful build.
STREAMS_STAMP="$RELAY_STACK_DIR/bench/streams.stamp"
STREAMS_BUILD_LOG="$STACK_LOG_DIR/streams-bench-build.log"

usage() {
  echo "usage: ${0##*/} {install|path}" >&2
  exit 2
}

# mvn_args: the Maven arguments; part of the stamp.
mvn_args() {
  printf '%s\0' -q -B package "-Dstreams.build.dir=$STREAMS_DIR"
}

stamp() {
  {
    (cd "$STREAMS_PROJECT_DIR" && find pom.xml src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    mvn_args
  } | sha256sum | cut -d' ' -f1
}

installed() {
  [[ -f "$STREAMS_JAR" && -f "$STREAMS_STAMP" && "$(<"$STREAMS_STAMP")" == "$(stamp)" ]]
}

cmd_install() {
  if installed; then
    return 0
  fi
  require_java
  require_mvn
  mkdir -p "$STACK_LOG_DIR"
  local -a args
  mapfile -d '' -t args < <(mvn_args)
  local start=$SECONDS
  log "building the Kafka Streams passthrough into $STREAMS_DIR (Maven), log: $STREAMS_BUILD_LOG"
  # Start from an empty dir: copy-dependencies never deletes stale jars.
  rm -rf "$STREAMS_DIR" "$STREAMS_STAMP"
  # jansi.noreset: Maven 3.8 prints stray ANSI resets even with -q -B.
  if ! (cd "$STREAMS_PROJECT_DIR" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" mvn "${args[@]}") \
    >"$STREAMS_BUILD_LOG" 2>&1; then
    wait_failed streams-bench "$STREAMS_BUILD_LOG" "mvn package in $STREAMS_PROJECT_DIR failed"
  fi
  [[ -f "$STREAMS_JAR" && -f "$STREAMS_DIR/lib/kafka-streams-$KAFKA_VERSION.jar" ]] ||
    die "$STREAMS_JAR or lib/kafka-streams-$KAFKA_VERSION.jar missing after Maven ran (the pom's kafka.version must be $KAFKA_VERSION)"
  stamp >"$STREAMS_STAMP"
  log "built the Kafka Streams passthrough in $((SECONDS - start))s"
}

case "${1:-}" in
  install) cmd_install ;;
  path)
    cmd_install >&2
    printf '%s\n' "$STREAMS_DIR"
    ;;
  *) usage ;;
esac
