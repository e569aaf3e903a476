#!/usr/bin/env bash
# axe-core, the accessibility engine the console's browser tests inject
# into each page (make test). Installed once from the npm registry, by
# package name and pinned version, into $RELAY_STACK_DIR/axe; no lock file
# is kept (it would name the registry's host).
#
# usage: axe.sh {install|path}
#   install  install axe-core unless the pinned version is there
#   path     install, then print the path of axe.min.js
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../stack/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stack/common.sh"

AXE_VERSION=4.11.4
AXE_DIR="$RELAY_STACK_DIR/axe"
AXE_JS="$AXE_DIR/node_modules/axe-core/axe.min.js"

installed() {
  [[ -f "$AXE_JS" ]] && grep -q "\"version\": \"$AXE_VERSION\"" "$AXE_DIR/node_modules/axe-core/package.json" 2>/dev/null
}

cmd_install() {
  installed && return 0
  command -v npm >/dev/null || { echo "axe.sh: npm not found (scripts/install.sh installs it)" >&2; exit 1; }
  echo "axe.sh: installing axe-core $AXE_VERSION with npm" >&2
  mkdir -p "$AXE_DIR"
  npm install --prefix "$AXE_DIR" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "axe-core@$AXE_VERSION" >&2
  installed || { echo "axe.sh: axe-core $AXE_VERSION did not install" >&2; exit 1; }
}

case "${1:-}" in
  install) cmd_install ;;
  path) cmd_install && echo "$AXE_JS" ;;
  *) echo "usage: ${0##*/} {install|path}" >&2; exit 2 ;;
esac
