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
# Written only after a successful build; holds the hash of the tools module
# (go.mod, go.sum) and of the build command, so a version bump rebuilds.
PROMTOOL_STAMP="$STACK_BIN_DIR/promtool.stamp"
PROMTOOL_BUILD_LOG="$STACK_LOG_DIR/promtool-build.log"

usage() {
  echo "usage: ${0##*/} {install|path}" >&2
  exit 2
}

# promtool_version: the Prometheus module version the tools module pins
# (v0.316.0 is the Go module of Prometheus v3.16.0).
promtool_version() {
  sed -n 's|^[[:space:]]*github.com/prometheus/prometheus \(v[^ ]*\).*|\1|p' "$PROMTOOL_MODULE_DIR/go.mod" | head -n 1
}

# build_args: the go build arguments after `build`; part of the stamp.
# The version is stamped where Prometheus's own release build puts it, so
# `promtool --version` names the module version.
build_args() {
  printf '%s\0' -mod=readonly \
    -ldflags "-X github.com/prometheus/common/version.Version=$(promtool_version)"
}

stamp() {
  {
    cat "$PROMTOOL_MODULE_DIR/go.mod" "$PROMTOOL_MODULE_DIR/go.sum"
    build_args
  } | sha256sum | cut -d' ' -f1
}

installed() {
  [[ -x "$PROMTOOL_BIN" && -f "$PROMTOOL_STAMP" && "$(<"$PROMTOOL_STAMP")" == "$(stamp)" ]]
}

cmd_install() {
  if installed; then
    return 0
  fi
  command -v go >/dev/null 2>&1 || die "go not found on PATH, needed to build promtool"
  mkdir -p "$STACK_BIN_DIR" "$STACK_LOG_DIR"
  local -a args
  mapfile -d '' -t args < <(build_args)
  local start=$SECONDS tmp="$PROMTOOL_BIN.tmp.$$"
  log "building promtool $(promtool_version) from source into $PROMTOOL_BIN (once; the first build takes a few minutes on 2 cores), log: $PROMTOOL_BUILD_LOG"
  # GOWORK=off: a go.work above the repo must not pull the tools module in.
  # nice: it may build next to the stack's JVMs and the tests. Only the
  # finished binary is moved into place.
  if ! (cd "$PROMTOOL_MODULE_DIR" && GOWORK=off nice -n 10 go build "${args[@]}" -o "$tmp" "$PROMTOOL_PKG") \
    >"$PROMTOOL_BUILD_LOG" 2>&1; then
    rm -f "$tmp"
    wait_failed promtool "$PROMTOOL_BUILD_LOG" "go build $PROMTOOL_PKG failed"
  fi
  mv -f "$tmp" "$PROMTOOL_BIN"
  stamp >"$PROMTOOL_STAMP"
  log "built promtool $(promtool_version) in $((SECONDS - start))s"
}

case "${1:-}" in
  install) cmd_install ;;
  path)
    cmd_install >&2
    printf '%s\n' "$PROMTOOL_BIN"
    ;;
  *) usage ;;
esac
