# shellcheck shell=bash
# Settings of the single-node Kubernetes of `make test-k8s` (cluster.sh),
# sourced after ../stack/common.sh. Every address is on this machine: the
# node's and the pods' on a bridge of their own, the Services' virtual; the ranges are ones nothing else here uses.
# Each can be moved by its variable.

K8S_NODE_NAME=relay-k8s
K8S_NODE_IP="${RELAY_K8S_NODE_IP:-10.213.0.1}"
K8S_POD_CIDR="${RELAY_K8S_POD_CIDR:-10.214.0.0/24}"
K8S_SERVICE_CIDR="${RELAY_K8S_SERVICE_CIDR:-10.215.0.0/24}"
# The pods' gateway, on the bridge: the first address of their range.
K8S_POD_GATEWAY="${K8S_POD_CIDR%.*/*}.1"
# The first address of the Service range is the API server's Service.
K8S_API_SERVICE_IP="${K8S_SERVICE_CIDR%.*/*}.1"
K8S_DNS_IP="${K8S_SERVICE_CIDR%.*/*}.10"
K8S_API_PORT="${RELAY_K8S_API_PORT:-6443}"
# CoreDNS's readiness and health ports, on loopback.
K8S_DNS_READY_PORT="${RELAY_K8S_DNS_READY_PORT:-8183}"
K8S_DNS_HEALTH_PORT="${RELAY_K8S_DNS_HEALTH_PORT:-8184}"
K8S_ETCD_PORT="${RELAY_K8S_ETCD_PORT:-2479}"
K8S_ETCD_PEER_PORT="${RELAY_K8S_ETCD_PEER_PORT:-2480}"
# The pods' bridge, which holds the node's address too (15 characters at
# most).
K8S_BRIDGE=relay-k8s-br
# Locally administered (02:…), fixed: see node_network.
K8S_BRIDGE_MAC=02:52:4c:6b:38:01
# The image of each pod's sandbox, built here (deploy/k8s/pause).
K8S_PAUSE_IMAGE=relay.local/pause:1

K8S_DIR="$(realpath -m "$RELAY_STACK_DIR")/k8s"
K8S_PKI="$K8S_DIR/pki"
K8S_LOGS="$STACK_LOG_DIR/k8s"
# What lives only while the cluster runs: pids, sockets, the containers'
# state, the pods' network namespaces, etcd's data.
K8S_RUN="$K8S_DIR/run"
K8S_CONTAINERD_SOCK="$K8S_RUN/containerd/containerd.sock"
K8S_RUNC_ROOT="$K8S_RUN/runc"
K8S_SYSCTLS="$K8S_DIR/sysctls.saved"
K8S_ADMIN_KUBECONFIG="$K8S_DIR/admin.kubeconfig"

# The system settings the cluster changes (the kubelet's kernel defaults,
# forwarding and bridge filtering for the pods), saved at the first start
# and put back at stop.
K8S_SYSCTL_NAMES=(
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes
  net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  net.ipv4.conf.all.route_localnet
)

# The daemons, in the order they start (stop goes the other way).
K8S_DAEMONS=(etcd kube-apiserver coredns containerd kube-controller-manager kube-scheduler kube-proxy kubelet)

# k8s_bin NAME: the program the daemon NAME runs.
k8s_bin() {
  case "$1" in
    etcd) command -v etcd ;;
    *) printf '%s\n' "$STACK_BIN_DIR/$1" ;;
  esac
}

# k8s_pid NAME: the pid of the daemon NAME when it runs, by its pid file
# and only if that process runs NAME's program (a pid file that outlived
# a reboot or a crash may name a pid another process has since: stop
# never signals that one).
k8s_pid() {
  local f="$K8S_RUN/$1.pid" pid exe want
  [[ -f "$f" ]] || return 1
  pid="$(<"$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  exe="${exe% (deleted)}" # rebuilt while it ran
  want="$(k8s_bin "$1")" || return 1
  [[ "$(realpath -m "$exe")" == "$(realpath -m "$want")" ]] || return 1
  printf '%s\n' "$pid"
}

kubectl_admin() {
  "$STACK_BIN_DIR/kubectl" --kubeconfig "$K8S_ADMIN_KUBECONFIG" "$@"
}
