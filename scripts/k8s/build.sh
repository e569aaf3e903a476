#!/usr/bin/env bash
# Builds, once, every program the single-node Kubernetes of `make test-k8s`
# runs, from their Go modules (no release download): kube-apiserver
# (scripts/tools/kube-apiserver), kubelet, kube-controller-manager,
# kube-scheduler, kube-proxy and kubectl (scripts/tools/kubernetes),
# containerd with its runc shim and ctr, runc with seccomp, and the CNI
# plugins bridge, host-local, loopback and portmap
# (scripts/tools/containerd), CoreDNS (scripts/tools/coredns), the
# Pushgateway the audit CronJob's test pushes to
# (scripts/tools/pushgateway), and oauth2-proxy, the console's sidecar
# (scripts/tools/oauth2-proxy), into $RELAY_STACK_DIR/bin (the plugins
# into bin/cni). etcd and iptables are Debian's (scripts/install.sh k8s). A
# program is rebuilt only when its module's go.mod, go.sum or build flags
# change. The first build takes 12 to 15 minutes on 2 cores.
#
# usage: build.sh
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../stack/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stack/common.sh"

TOOLS="$STACK_REPO_DIR/scripts/tools"
K8S_VERSION="$(go_tool_version "$TOOLS/kubernetes" k8s.io/kubernetes)"

"$TOOLS/kube-apiserver.sh" install

ldflags="$(k8s_version_ldflags "$K8S_VERSION")"
for cmd in kubelet kube-controller-manager kube-scheduler kube-proxy kubectl; do
  go_tool_install "$cmd" "$TOOLS/kubernetes" "k8s.io/kubernetes/cmd/$cmd" \
    "Kubernetes $K8S_VERSION, once; about three minutes on 2 cores" -mod=readonly -trimpath -ldflags "$ldflags"
done

command -v pkg-config >/dev/null && pkg-config --exists libseccomp ||
  die "libseccomp-dev is missing (runc is built with seccomp); scripts/install.sh k8s installs it"
go_tool_install runc "$TOOLS/containerd" github.com/opencontainers/runc \
  "runc, once; about a minute" -mod=readonly -trimpath -tags seccomp
for cmd in containerd containerd-shim-runc-v2 ctr; do
  go_tool_install "$cmd" "$TOOLS/containerd" "github.com/containerd/containerd/v2/cmd/$cmd" \
    "containerd, once; about two minutes" -mod=readonly -trimpath -tags no_btrfs,no_devmapper,no_zfs
done
go_tool_install coredns "$TOOLS/coredns" . "CoreDNS, once; about a minute" -mod=readonly -trimpath
go_tool_install pushgateway "$TOOLS/pushgateway" github.com/prometheus/pushgateway \
  "the Pushgateway, once; about a minute" -mod=readonly -trimpath
# Static: test.sh puts it alone in the console sidecar's image.
PROXY_VERSION="$(go_tool_version "$TOOLS/oauth2-proxy" github.com/oauth2-proxy/oauth2-proxy/v7)"
[[ -n "$PROXY_VERSION" ]] || die "no oauth2-proxy version in $TOOLS/oauth2-proxy/go.mod"
CGO_ENABLED=0 go_tool_install oauth2-proxy "$TOOLS/oauth2-proxy" github.com/oauth2-proxy/oauth2-proxy/v7 \
  "oauth2-proxy, once; about a minute and a half" -mod=readonly -trimpath -ldflags \
  "-X github.com/oauth2-proxy/oauth2-proxy/v7/pkg/version.VERSION=$PROXY_VERSION"
mkdir -p "$STACK_BIN_DIR/cni" "$STACK_LOG_DIR/cni"
for p in ipam/host-local main/bridge main/loopback meta/portmap; do
  CGO_ENABLED=0 go_tool_install "cni/${p#*/}" "$TOOLS/containerd" "github.com/containernetworking/plugins/plugins/$p" \
    "a CNI plugin, once" -mod=readonly -trimpath
done
log "the cluster's programs are in $STACK_BIN_DIR"
