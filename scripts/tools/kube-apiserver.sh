#!/usr/bin/env bash
# kube-apiserver, for the chart's server-side dry run (deploy/helm, part of
# `make test`): the manifests the chart renders are created with
# dryRun=All against a real API server on a real etcd (Debian's
# etcd-server), in a namespace that enforces the restricted Pod Security
# Standard. No release download: it is built from source, once, from the
# tools module in kube-apiserver/ (its go.mod pins Kubernetes and replaces
# each staging module with its published version), into
# $RELAY_STACK_DIR/bin/kube-apiserver.
#
# usage: kube-apiserver.sh {install|path}
#   install  build kube-apiserver unless the built one is up to date
#   path     install, then print the binary's path (messages go to stderr)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../stack/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stack/common.sh"

KUBE_MODULE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kube-apiserver"
KUBE_BIN="$STACK_BIN_DIR/kube-apiserver"

cmd_install() {
  go_tool_install kube-apiserver "$KUBE_MODULE_DIR" . \
    "Kubernetes $(go_tool_version "$KUBE_MODULE_DIR" k8s.io/kubernetes), once; the first build takes about five minutes on 2 cores" \
    -mod=readonly -trimpath -ldflags "$(k8s_version_ldflags "$(go_tool_version "$KUBE_MODULE_DIR" k8s.io/kubernetes)")"
}

case "${1:-}" in
  install) cmd_install ;;
  path)
    cmd_install >&2
    printf '%s\n' "$KUBE_BIN"
    ;;
  *)
    echo "usage: ${0##*/} {install|path}" >&2
    exit 2
    ;;
esac
