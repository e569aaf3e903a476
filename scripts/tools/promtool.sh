#!/usr/bin/env bash
# promtool, the Prometheus command that checks the alerting rules in
# deploy/prometheus/ and runs their unit tests (`make rules`, part of
# `make test`). No release download: like the stack's Jaeger, it is built
# from source, once, with the Go toolchain, from the tools module in
# promtool/ (its go.mod and go.sum pin Prometheus and every dependency),
# into $RELAY_STACK_DIR/bin/promtool.
#
# usage: promtool.sh {install|path}
#   install  build promtool unless the built one is up to date
#   path     install, then print the binary's path (messages go to stderr)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../stack/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stack/common.sh"

PROMTOOL_MODULE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/promtool"
PROMTOOL_PKG=github.com/prometheus/prometheus/cmd/promtool
PROMTOOL_BIN="$STACK_BIN_DIR/promtool"
usage() {
  echo "usage: ${0##*/} {install|path}" >&2
  exit 2
}

# promtool_version: the Prometheus module version the tools module pins
# (v0.316.0 is the Go module of Prometheus v3.16.0).
promtool_version() {
  go_tool_version "$PROMTOOL_MODULE_DIR" github.com/prometheus/prometheus
}

# The version is stamped where Prometheus's own release build puts it, so
# `promtool --version` names the module version.
cmd_install() {
  go_tool_install promtool "$PROMTOOL_MODULE_DIR" "$PROMTOOL_PKG" \
    "$(promtool_version), once; the first build takes a few minutes on 2 cores" \
    -mod=readonly -ldflags "-X github.com/prometheus/common/version.Version=$(promtool_version)"
}

case "${1:-}" in
  install) cmd_install ;;
  path)
    cmd_install >&2
    printf '%s\n' "$PROMTOOL_BIN"
    ;;
  *) usage ;;
esac
