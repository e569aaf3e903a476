#!/usr/bin/env bash
# A real single-node Kubernetes on this machine, for `make test-k8s`:
# etcd (Debian's), kube-apiserver, kube-controller-manager,
# kube-scheduler, kube-proxy (iptables) and the kubelet, over containerd
# and runc (cgroup v1, cgroupfs), pods on a CNI bridge. Every program is
# built from its Go module by build.sh into $RELAY_STACK_DIR/bin; the
# cluster's files live in $RELAY_STACK_DIR/k8s, its logs in
# $RELAY_STACK_DIR/logs/k8s. Runs as root (it makes links, mounts,
# iptables chains and cgroups).
#
# Stop removes what start made, even after a failed start: the daemons
# (by their pids), every container, the mounts under the cluster's
# directory, the pods' network namespaces, the node's and the bridge's
# links, the KUBE-* and CNI-* iptables chains, the kubepods cgroups, and
# puts back the sysctls start changed.
#
# usage: cluster.sh {start|stop|status|import SOURCE [REPOSITORY]|tag SOURCE TARGET|kubeconfig|node-ip|kubelet-dir}
#   import      load an image archive (docker or OCI) or an OCI layout directory
#               into the node's containerd (cmd_import)
#   tag         name an image the node has anew
#   kubeconfig  print the admin kubeconfig's path
#   node-ip     print the node's address (pods reach the host's services there)
#   kubelet-dir print the kubelet's root directory (the pods' volumes are under it)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=../stack/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../stack/common.sh"
# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# shellcheck source-path=SCRIPTDIR source=pki.sh
source "$(dirname "${BASH_SOURCE[0]}")/pki.sh"
# shellcheck source-path=SCRIPTDIR source=node.sh
source "$(dirname "${BASH_SOURCE[0]}")/node.sh"

require_root() {
  [[ "$(id -u)" == 0 ]] || die "the cluster makes links, mounts, iptables chains and cgroups: run it as root"
}

# daemon NAME ARGS...: starts a daemon in the background, its output in
# its log, its pid in $K8S_RUN/NAME.pid.
daemon() {
  local name="$1"
  shift
  mkdir -p "$K8S_LOGS" "$K8S_RUN"
  # 9>&-: the daemon does not hold the lock (lock) after this script ends.
  PATH="$STACK_BIN_DIR:$PATH" setsid "$@" >>"$K8S_LOGS/$name.log" 2>&1 </dev/null 9>&- &
  printf '%s\n' "$!" >"$K8S_RUN/$name.pid"
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND until it succeeds.
wait_for() {
  local what="$1" secs="$2" deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what not ready in ${secs}s; logs in $K8S_LOGS"
    sleep 1
  done
}

# api_ready: the API server's /readyz, which anyone may read (no token on
# a command line, where every user of the machine sees it).
api_ready() {
  curl -fsS --cacert "$K8S_PKI/ca.pem" "https://$K8S_NODE_IP:$K8S_API_PORT/readyz"
}

cmd_start() {
  require_root
  if k8s_pid kube-apiserver >/dev/null; then
    log "the cluster is running (cluster.sh status)"
    return 0
  fi
  command -v etcd >/dev/null || die "etcd is missing; scripts/install.sh k8s installs it"
  command -v iptables >/dev/null || die "iptables is missing; scripts/install.sh k8s installs it"
  "$STACK_REPO_DIR/scripts/k8s/build.sh"
  # What stop removes by name must be this cluster's: a start on a
  # machine where another Kubernetes or CNI user left KUBE-*/CNI-* chains
  # or kubepods cgroups is refused (the mark says the last start here
  # made them).
  if [[ ! -f "$K8S_DIR/started" ]] && node_foreign_state; then
    die "this machine has KUBE-*/CNI-* iptables chains or kubepods cgroups that this cluster did not make; stop would remove them: refusing to start"
  fi
  # A start after a crash clears what the last run left first.
  cmd_stop >/dev/null 2>&1 || true
  mkdir -p "$K8S_DIR"
  : >"$K8S_DIR/started"
  local start=$SECONDS
  mkdir -p "$K8S_DIR" "$K8S_RUN" "$K8S_LOGS"
  # Keys, tokens and kubeconfigs live here: the machine's other users
  # may not read them.
  chmod 700 "$K8S_DIR"
  node_save_sysctls
  node_network
  k8s_pki
  node_pause_image

  daemon etcd etcd --name relay-k8s --data-dir "$K8S_RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$K8S_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$K8S_ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" \
    --initial-cluster "relay-k8s=http://127.0.0.1:$K8S_ETCD_PEER_PORT"
  daemon kube-apiserver kube-apiserver --etcd-servers "http://127.0.0.1:$K8S_ETCD_PORT" \
    --bind-address "$K8S_NODE_IP" --advertise-address "$K8S_NODE_IP" --secure-port "$K8S_API_PORT" \
    --tls-cert-file "$K8S_PKI/apiserver.pem" --tls-private-key-file "$K8S_PKI/apiserver.key" \
    --client-ca-file "$K8S_PKI/ca.pem" --token-auth-file "$K8S_PKI/tokens.csv" \
    --kubelet-client-certificate "$K8S_PKI/kubelet-client.pem" --kubelet-client-key "$K8S_PKI/kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$K8S_PKI/sa.pub" --service-account-signing-key-file "$K8S_PKI/sa.key" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --service-cluster-ip-range "$K8S_SERVICE_CIDR" --allow-privileged=false
  wait_for kube-apiserver 120 api_ready
  node_dns
  daemon coredns coredns -conf "$K8S_RUN/Corefile"

  node_containerd
  daemon containerd containerd --config "$K8S_RUN/containerd.toml"
  wait_for containerd 60 "$STACK_BIN_DIR/ctr" --address "$K8S_CONTAINERD_SOCK" version
  cmd_import "$K8S_RUN/pause.tar"

  daemon kube-controller-manager kube-controller-manager --kubeconfig "$K8S_DIR/kube-controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$K8S_PKI/sa.key" --root-ca-file "$K8S_PKI/ca.pem" \
    --service-cluster-ip-range "$K8S_SERVICE_CIDR" --controllers '*,-node-ipam-controller'
  daemon kube-scheduler kube-scheduler --kubeconfig "$K8S_DIR/kube-scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false
  node_proxy_config
  daemon kube-proxy kube-proxy --config "$K8S_RUN/kube-proxy.yaml"
  node_kubelet_config
  daemon kubelet kubelet --config "$K8S_RUN/kubelet.yaml" --kubeconfig "$K8S_DIR/kubelet.kubeconfig" \
    --root-dir "$K8S_RUN/kubelet" --cert-dir "$K8S_RUN/kubelet-pki" \
    --node-ip "$K8S_NODE_IP" --hostname-override "$K8S_NODE_NAME"
  wait_for "the node" 180 kubectl_admin wait node "$K8S_NODE_NAME" --for condition=Ready --timeout 5s
  # Pods are refused until the controller manager makes the namespace's
  # service account.
  wait_for "the default service account" 60 kubectl_admin get serviceaccount default -n default
  wait_for "the cluster's DNS" 60 curl -fsS "http://127.0.0.1:$K8S_DNS_READY_PORT/ready"
  local name
  for name in "${K8S_DAEMONS[@]}"; do
    k8s_pid "$name" >/dev/null || die "$name exited; its log: $K8S_LOGS/$name.log"
  done
  log "the cluster is up in $((SECONDS - start))s: node $K8S_NODE_NAME at $K8S_NODE_IP; KUBECONFIG=$K8S_ADMIN_KUBECONFIG"
}

cmd_stop() {
  require_root
  local i pid
  # The kubelet first, so that it starts nothing while the rest stops.
  for ((i = ${#K8S_DAEMONS[@]} - 1; i >= 0; i--)); do
    [[ "${K8S_DAEMONS[i]}" == containerd ]] && node_containers_stop
    if pid="$(k8s_pid "${K8S_DAEMONS[i]}")"; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do k8s_pid "${K8S_DAEMONS[i]}" >/dev/null || break; sleep 0.2; done
      if k8s_pid "${K8S_DAEMONS[i]}" >/dev/null; then
        kill -9 "$pid" 2>/dev/null || true
      fi
    fi
    rm -f "$K8S_RUN/${K8S_DAEMONS[i]}.pid"
  done
  node_unmount
  node_leftovers
  node_iptables_clean
  node_network_remove
  node_cgroups_remove
  node_restore_sysctls
  rm -rf --one-file-system "$K8S_RUN"
  rm -f "$K8S_DIR/started"
  log "the cluster is stopped"
}

cmd_status() {
  local name pid up=0
  for name in "${K8S_DAEMONS[@]}"; do
    if pid="$(k8s_pid "$name")"; then
      printf '%-24s running (pid %s)\n' "$name" "$pid"
      up=1
    else
      printf '%-24s stopped\n' "$name"
    fi
  done
  ((up)) && kubectl_admin get nodes -o wide 2>/dev/null || true
}

# cmd_import SOURCE [REPOSITORY]: loads an image archive (docker or OCI)
# or an OCI image layout directory (make image's dist/oci) into the
# node's containerd. With REPOSITORY, an OCI layout's tags (its
# org.opencontainers.image.ref.name) are imported as REPOSITORY:tag, the
# name a chart's image.registry and image.repository make.
cmd_import() {
  local src="${1:-}" repo="${2:-}" archive args=()
  [[ -e "$src" ]] || die "import: no image archive or OCI layout at '$src'"
  archive="$src"
  if [[ -d "$src" ]]; then
    archive="$K8S_RUN/import.tar"
    tar -C "$src" -cf "$archive" .
  fi
  [[ -n "$repo" ]] && args+=(--base-name "$repo")
  "$STACK_BIN_DIR/ctr" --address "$K8S_CONTAINERD_SOCK" -n k8s.io images import "${args[@]}" \
    --platform "linux/$(go env GOARCH)" "$archive" >/dev/null 2>"$K8S_LOGS/import.log" ||
    die "import of $src failed: $(cat "$K8S_LOGS/import.log")"
  [[ "$archive" == "$src" ]] || rm -f "$archive"
}

# cmd_tag SOURCE TARGET: another name for an image the node has (a
# rolling update to "another image" with the same bytes).
cmd_tag() {
  [[ -n "${1:-}" && -n "${2:-}" ]] || die "usage: ${0##*/} tag SOURCE TARGET"
  "$STACK_BIN_DIR/ctr" --address "$K8S_CONTAINERD_SOCK" -n k8s.io images tag --force "$1" "$2" >/dev/null 2>&1 ||
    die "tag $1 $2 failed"
}

# One cluster per machine at a time: start and stop hold a lock (another
# checkout's start would stop this one and save its sysctls as the
# machine's).
lock() {
  exec 9>/run/relay-k8s.lock
  flock -n 9 || die "another cluster.sh start or stop runs on this machine"
}

case "${1:-}" in
  start) lock && cmd_start ;;
  stop) lock && cmd_stop ;;
  status) cmd_status ;;
  import) cmd_import "${2:-}" "${3:-}" ;;
  tag) cmd_tag "${2:-}" "${3:-}" ;;
  kubeconfig) printf '%s\n' "$K8S_ADMIN_KUBECONFIG" ;;
  node-ip) printf '%s\n' "$K8S_NODE_IP" ;;
  kubelet-dir) printf '%s\n' "$K8S_RUN/kubelet" ;;
  *)
    echo "usage: ${0##*/} {start|stop|status|import SOURCE [REPOSITORY]|tag SOURCE TARGET|kubeconfig|node-ip|kubelet-dir}" >&2
    exit 2
    ;;
esac
