#!/usr/bin/env bash
# The official CycloneDX JSON schemas (bom-1.x, and the spdx and jsf
# schemas they reference), which deploy/image's test validates relay's
# SBOM against (make test, make rules). They come from the npm registry,
# by package name and pinned version: @cyclonedx/cyclonedx-library ships
# them in res/schema for offline use. `npm pack` fetches the package alone
# (none of its peer dependencies, no install scripts) into
# $RELAY_STACK_DIR/cyclonedx-schema; only res/schema is kept.
#
# usage: cyclonedx-schema.sh {install|path}
#   install  fetch the schemas unless the pinned version is there
#   path     install, then print the directory holding the schema files
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../stack/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stack/common.sh"

CDX_PACKAGE=@cyclonedx/cyclonedx-library
CDX_VERSION=10.3.0
CDX_DIR="$RELAY_STACK_DIR/cyclonedx-schema"
CDX_SCHEMA="$CDX_DIR/$CDX_VERSION/res/schema"

installed() {
  [[ -f "$CDX_SCHEMA/bom-1.5.SNAPSHOT.schema.json" && -f "$CDX_SCHEMA/spdx.SNAPSHOT.schema.json" &&
    -f "$CDX_SCHEMA/jsf-0.82.SNAPSHOT.schema.json" ]]
}

cmd_install() {
  installed && return 0
  command -v npm >/dev/null || { echo "cyclonedx-schema.sh: npm not found (scripts/install.sh installs it)" >&2; exit 1; }
  echo "cyclonedx-schema.sh: fetching $CDX_PACKAGE $CDX_VERSION with npm" >&2
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  npm pack --silent --pack-destination "$tmp" --loglevel=error "$CDX_PACKAGE@$CDX_VERSION" >/dev/null
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/res/schema
  rm -rf "${CDX_DIR:?}/$CDX_VERSION"
  mkdir -p "$CDX_DIR/$CDX_VERSION/res"
  mv "$tmp/package/res/schema" "$CDX_SCHEMA"
  installed || { echo "cyclonedx-schema.sh: $CDX_PACKAGE $CDX_VERSION has no schemas in res/schema" >&2; exit 1; }
}

case "${1:-}" in
  install) cmd_install ;;
  path) cmd_install && echo "$CDX_SCHEMA" ;;
  *) echo "usage: ${0##*/} {install|path}" >&2; exit 2 ;;
esac
