#!/usr/bin/env bash
# Local Jaeger v2 (all-in-one, in-memory storage): OTLP receivers for relay's
# traces and the query API the integration tests assert through. No Docker
# and no release download: the binary is built from source, once, with the
# Go toolchain, from the tools module in jaeger/ (its go.mod and go.sum pin
# Jaeger and every dependency), into $RELAY_STACK_DIR/bin/jaeger.
#
# usage: jaeger.sh {install|start|stop|status|wait}
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

JAEGER_MODULE_DIR="$STACK_SCRIPT_DIR/jaeger"
JAEGER_PKG=github.com/jaegertracing/jaeger/cmd/jaeger
JAEGER_CONFIG="$JAEGER_MODULE_DIR/config.yaml"
JAEGER_BIN="$STACK_BIN_DIR/jaeger"
JAEGER_LOG="$STACK_LOG_DIR/jaeger.log"
JAEGER_URL="http://127.0.0.1:$RELAY_STACK_JAEGER_QUERY_PORT"
# Recognises our Jaeger in /proc/<pid>/cmdline (guards against pid reuse).
JAEGER_MARKER_ARG="$JAEGER_BIN"
JAEGER_WAIT_TIMEOUT=60
JAEGER_STOP_TIMEOUT=30

usage() {
  echo "usage: ${0##*/} {install|start|stop|status|wait}" >&2
  exit 2
}

# jaeger_version: the Jaeger module version the tools module pins
# (v1.76.0 is the Go module of Jaeger v2's binary, tagged v1.x for Go).
jaeger_version() {
  go_tool_version "$JAEGER_MODULE_DIR" github.com/jaegertracing/jaeger
}

cmd_install() {
  go_tool_install jaeger "$JAEGER_MODULE_DIR" "$JAEGER_PKG" \
    "$(jaeger_version), once; the first build takes about 8 minutes on 2 cores" \
    -mod=readonly -ldflags "-X github.com/jaegertracing/jaeger/internal/version.latestVersion=$(jaeger_version)"
}

cmd_start() {
  ensure_dirs
  local pid
  if pid="$(our_pid jaeger "$JAEGER_MARKER_ARG")"; then
    if port_in_use "$RELAY_STACK_JAEGER_QUERY_PORT"; then
      log "jaeger already running (pid $pid) on $JAEGER_URL"
    else
      log "jaeger already starting (pid $pid)"
    fi
    return 0
  fi
  rm -f "$(pid_file jaeger)"
  local port
  for port in "$RELAY_STACK_JAEGER_OTLP_GRPC_PORT" "$RELAY_STACK_JAEGER_OTLP_HTTP_PORT" \
    "$RELAY_STACK_JAEGER_QUERY_PORT" "$RELAY_STACK_JAEGER_QUERY_GRPC_PORT"; do
    if port_in_use "$port"; then
      die "port 127.0.0.1:$port is already in use by another process (not our jaeger); stop it or set RELAY_STACK_JAEGER_OTLP_GRPC_PORT / RELAY_STACK_JAEGER_OTLP_HTTP_PORT / RELAY_STACK_JAEGER_QUERY_PORT / RELAY_STACK_JAEGER_QUERY_GRPC_PORT. $(describe_port "$port")"
    fi
  done
  cmd_install
  # config.yaml reads its ports from these (`${env:...}`).
  export RELAY_STACK_JAEGER_OTLP_GRPC_PORT RELAY_STACK_JAEGER_OTLP_HTTP_PORT \
    RELAY_STACK_JAEGER_QUERY_PORT RELAY_STACK_JAEGER_QUERY_GRPC_PORT
  # The working dir is the stack dir so nothing is written into the repo.
  (cd "$RELAY_STACK_DIR" && start_bg jaeger "$JAEGER_LOG" "$JAEGER_BIN" --config "$JAEGER_CONFIG")
  log "jaeger started (pid $(<"$(pid_file jaeger)")), log: $JAEGER_LOG"
}

# Ready = the query API answers and both OTLP receivers accept connections
# (the receivers and the query extension start independently).
jaeger_ready() {
  [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$JAEGER_URL/api/services")" == 200 ]] &&
    port_in_use "$RELAY_STACK_JAEGER_OTLP_GRPC_PORT" &&
    port_in_use "$RELAY_STACK_JAEGER_OTLP_HTTP_PORT"
}

cmd_wait() {
  require_curl
  wait_for jaeger "$JAEGER_MARKER_ARG" "$JAEGER_WAIT_TIMEOUT" "$JAEGER_LOG" jaeger_ready
  log "jaeger ready: query $JAEGER_URL, OTLP 127.0.0.1:$RELAY_STACK_JAEGER_OTLP_GRPC_PORT (gRPC) and http://127.0.0.1:$RELAY_STACK_JAEGER_OTLP_HTTP_PORT (HTTP)"
}

cmd_status() {
  local pid
  if pid="$(our_pid jaeger "$JAEGER_MARKER_ARG")"; then
    if port_in_use "$RELAY_STACK_JAEGER_QUERY_PORT"; then
      echo "jaeger: running (pid $pid, query $JAEGER_URL, OTLP gRPC 127.0.0.1:$RELAY_STACK_JAEGER_OTLP_GRPC_PORT, OTLP HTTP 127.0.0.1:$RELAY_STACK_JAEGER_OTLP_HTTP_PORT)"
    else
      echo "jaeger: running (pid $pid, port $RELAY_STACK_JAEGER_QUERY_PORT not answering yet)"
    fi
    return 0
  fi
  echo "jaeger: stopped"
  return 3
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) stop_pid jaeger "$JAEGER_MARKER_ARG" "$JAEGER_STOP_TIMEOUT" ;;
  status) cmd_status ;;
  wait) cmd_wait ;;
  *) usage ;;
esac
