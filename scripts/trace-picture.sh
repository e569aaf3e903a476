#!/usr/bin/env bash
# docs/TRACING.md's picture of one record's trace, as Jaeger's UI shows it
# (docs/images/trace.png). A developer tool, not part of make test or CI.
#
# It starts a Jaeger of its own on other ports (the stack's keeps running
# untouched), with the UI served from RELAY_JAEGER_UI_DIR; runs the
# integration test TestTraceFollowsARecordThroughTiers against it, which
# sends a record with a producer's traceparent through two hook failures
# and both retry tiers on the running stack's broker and registry, and
# keeps the trace id; checks the trace in the query API; and has headless
# Chromium (scripts/tracepic, a module of its own) take the trace view.
#
# Needs: the stack running (make up: Kafka and the registry); go, curl;
# Debian's chromium (apt-get install chromium), or RELAY_CHROMIUM naming
# another Chromium; RELAY_JAEGER_UI_DIR, a directory with the built UI of
# jaeger-ui v1.76.0 (index.html and static/): the Jaeger binary built from
# Jaeger's Go module embeds only a placeholder page, and no package
# registry publishes the built UI.
#
# usage: RELAY_JAEGER_UI_DIR=DIR scripts/trace-picture.sh [OUT.png]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=stack/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/stack/common.sh"
cd "$STACK_REPO_DIR"

OUT="${1:-docs/images/trace.png}"
WIDTH=1400
# The picture's Jaeger: ports apart from the stack's (4317/4318/16686/16685).
export RELAY_TRACEPIC_OTLP_HTTP_PORT="${RELAY_TRACEPIC_OTLP_HTTP_PORT:-24318}"
export RELAY_TRACEPIC_QUERY_PORT="${RELAY_TRACEPIC_QUERY_PORT:-26686}"
export RELAY_TRACEPIC_QUERY_GRPC_PORT="${RELAY_TRACEPIC_QUERY_GRPC_PORT:-26685}"
QUERY_URL="http://127.0.0.1:$RELAY_TRACEPIC_QUERY_PORT"
CHROMIUM="${RELAY_CHROMIUM:-chromium}"

# check_needs: everything the run needs, each missing one said at once.
check_needs() {
  command -v go >/dev/null 2>&1 || die "go not found on PATH"
  require_curl
  command -v "$CHROMIUM" >/dev/null 2>&1 ||
    die "$CHROMIUM not found: the screenshot needs Debian's chromium (apt-get install chromium), or RELAY_CHROMIUM naming another Chromium binary"
  [[ -n "${RELAY_JAEGER_UI_DIR:-}" ]] ||
    die "RELAY_JAEGER_UI_DIR is not set: it names a directory with the built UI of jaeger-ui v1.76.0 (index.html and static/); the Jaeger binary built from Jaeger's Go module serves only a placeholder page, and no package registry publishes the built UI"
  [[ -f "$RELAY_JAEGER_UI_DIR/index.html" && -d "$RELAY_JAEGER_UI_DIR/static" ]] ||
    die "RELAY_JAEGER_UI_DIR=$RELAY_JAEGER_UI_DIR holds no built Jaeger UI (index.html and static/)"
  RELAY_TRACEPIC_UI_DIR="$(cd "$RELAY_JAEGER_UI_DIR" && pwd)"
  export RELAY_TRACEPIC_UI_DIR
  port_in_use "$RELAY_STACK_KAFKA_PORT" ||
    die "no broker on 127.0.0.1:$RELAY_STACK_KAFKA_PORT: start the stack first (make up)"
  port_in_use "$RELAY_STACK_REGISTRY_PORT" ||
    die "no registry on 127.0.0.1:$RELAY_STACK_REGISTRY_PORT: start the stack first (make up)"
  local port
  for port in "$RELAY_TRACEPIC_OTLP_HTTP_PORT" "$RELAY_TRACEPIC_QUERY_PORT" "$RELAY_TRACEPIC_QUERY_GRPC_PORT"; do
    if port_in_use "$port"; then
      die "port 127.0.0.1:$port is in use; set RELAY_TRACEPIC_OTLP_HTTP_PORT / RELAY_TRACEPIC_QUERY_PORT / RELAY_TRACEPIC_QUERY_GRPC_PORT. $(describe_port "$port")"
    fi
  done
}

WORK=""
JAEGER_PID=""
cleanup() {
  local rc=$?
  if [[ -n "$JAEGER_PID" ]]; then
    kill -TERM "$JAEGER_PID" 2>/dev/null || true
    wait "$JAEGER_PID" 2>/dev/null || true
  fi
  if [[ $rc -ne 0 && -n "$WORK" ]]; then
    printf '%s: failed; logs kept in %s\n' "${0##*/}" "$WORK" >&2
  elif [[ -n "$WORK" ]]; then
    rm -rf "$WORK"
  fi
}

# start_jaeger: the stack's Jaeger binary (scripts/stack/jaeger.sh builds
# it once if it is missing) with scripts/tracepic/jaeger.yaml.
start_jaeger() {
  scripts/stack/jaeger.sh install
  "$STACK_BIN_DIR/jaeger" --config scripts/tracepic/jaeger.yaml >"$WORK/jaeger.log" 2>&1 </dev/null &
  JAEGER_PID=$!
  local i
  for ((i = 0; i < 300; i++)); do
    kill -0 "$JAEGER_PID" 2>/dev/null || die "the picture's Jaeger exited; its log: $WORK/jaeger.log"
    if [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$QUERY_URL/api/services")" == 200 ]] &&
      port_in_use "$RELAY_TRACEPIC_OTLP_HTTP_PORT"; then
      log "Jaeger with its UI on $QUERY_URL (pid $JAEGER_PID)"
      return 0
    fi
    sleep 0.2
  done
  die "the picture's Jaeger did not answer on $QUERY_URL within 60s; its log: $WORK/jaeger.log"
}

# make_trace: the integration test against the picture's Jaeger; prints
# the trace id it kept.
make_trace() {
  log "running TestTraceFollowsARecordThroughTiers (about 20 s)" >&2
  RELAY_TEST_REQUIRE_BROKER=1 RELAY_TEST_JAEGER_URL="$QUERY_URL" \
    RELAY_TEST_OTLP_HTTP="http://127.0.0.1:$RELAY_TRACEPIC_OTLP_HTTP_PORT" \
    RELAY_TEST_TRACE_PICTURE="$WORK/trace-id" \
    go test -count=1 -run '^TestTraceFollowsARecordThroughTiers$' ./integration/ >"$WORK/test.log" 2>&1 ||
    die "the integration test failed; its output: $WORK/test.log"
  [[ -s "$WORK/trace-id" ]] || die "the test passed but kept no trace id; its output: $WORK/test.log"
  head -n 1 "$WORK/trace-id"
}

main() {
  check_needs
  local start=$SECONDS trace spans
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/trace-picture.XXXXXX")"
  trap cleanup EXIT
  log "building the screenshot program (scripts/tracepic)"
  (cd scripts/tracepic && GOWORK=off go build -o "$WORK/tracepic" .)
  start_jaeger
  trace="$(make_trace)"
  curl -sf --max-time 10 "$QUERY_URL/api/traces/$trace" >"$WORK/trace.json" ||
    die "the query API has no trace $trace"
  spans="$(grep -o '"operationName"' "$WORK/trace.json" | wc -l)"
  log "trace $trace: $spans spans in the query API"
  mkdir -p "$(dirname "$OUT")"
  # The detail opened is the last attempt's: from the 2 s tier, processed.
  "$WORK/tracepic" -chromium "$CHROMIUM" -width "$WIDTH" -expand "process " \
    -url "$QUERY_URL/trace/$trace" -out "$OUT"
  log "wrote $OUT ($(wc -c <"$OUT") bytes) in $((SECONDS - start))s"
}

main "$@"
