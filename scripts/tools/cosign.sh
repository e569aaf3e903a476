#!/usr/bin/env bash
# cosign, sigstore's CLI, which `make test` runs to verify relay's signed
# release (the image's signature, its SLSA provenance, the chart's
# signature) with sigstore's own verification code, not relay's. No
# release download: built from source, once, with the Go toolchain, from
# the tools module in cosign/ (its go.mod and go.sum pin cosign and every
# dependency), into $RELAY_STACK_DIR/bin/cosign.
#
# usage: cosign.sh {install|path}
#   install  build cosign unless the built one is up to date
#   path     install, then print the binary's path (messages go to stderr)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../stack/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stack/common.sh"

COSIGN_MODULE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cosign"
COSIGN_PKG=github.com/sigstore/cosign/v2/cmd/cosign
COSIGN_BIN="$STACK_BIN_DIR/cosign"
usage() {
  echo "usage: ${0##*/} {install|path}" >&2
  exit 2
}

cosign_version() {
  go_tool_version "$COSIGN_MODULE_DIR" github.com/sigstore/cosign/v2
}

# The version is stamped where cosign's own release build puts it.
cmd_install() {
  go_tool_install cosign "$COSIGN_MODULE_DIR" "$COSIGN_PKG" \
    "$(cosign_version), once; the first build takes several minutes on 2 cores" \
    -mod=readonly -ldflags "-X sigs.k8s.io/release-utils/version.gitVersion=$(cosign_version)"
}

case "${1:-}" in
  install) cmd_install ;;
  path)
    cmd_install >&2
    printf '%s\n' "$COSIGN_BIN"
    ;;
  *) usage ;;
esac
