# shellcheck shell=bash
# The node's pieces (cluster.sh): its network, the daemons' configuration,
# and the cleanup of everything they leave behind. Sourced after
# common.sh and pki.sh.

# node_save_sysctls writes the current values once: a start after a crash
# must not save the values the cluster set.
node_save_sysctls() {
  [[ -f "$K8S_SYSCTLS" ]] && return 0
  local n tmp="$K8S_SYSCTLS.tmp"
  : >"$tmp"
  for n in "${K8S_SYSCTL_NAMES[@]}"; do
    sysctl -n "$n" >/dev/null 2>&1 && printf '%s=%s\n' "$n" "$(sysctl -n "$n")" >>"$tmp"
  done
  mv "$tmp" "$K8S_SYSCTLS"
}

node_restore_sysctls() {
  [[ -f "$K8S_SYSCTLS" ]] || return 0
  local line
  while IFS= read -r line; do
    sysctl -q -w "$line" >/dev/null 2>&1 || log "could not put back $line"
  done <"$K8S_SYSCTLS"
  rm -f "$K8S_SYSCTLS"
}

# node_network: the pods' bridge, made here rather than by the CNI
# plugin (which is told not to address it) so that it holds the node's
# address beside the pods' gateway (this machine's kernel has no dummy
# links), forwarding on, bridged traffic through iptables
# (Services between pods). Its MAC address is set, not left to the
# kernel: a bridge without one takes its lowest port's, and changes it
# when that pod goes; every other pod then sends to the gateway's old
# address until its ARP entry expires, cut off for most of a minute
# (found when a deleted relay pod's neighbour failed its probes and lost
# its group session).
node_network() {
  ip link add "$K8S_BRIDGE" type bridge
  ip link set "$K8S_BRIDGE" address "$K8S_BRIDGE_MAC"
  ip addr add "$K8S_NODE_IP/32" dev "$K8S_BRIDGE"
  ip addr add "$K8S_POD_GATEWAY/${K8S_POD_CIDR#*/}" dev "$K8S_BRIDGE"
  ip link set "$K8S_BRIDGE" up
  sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  mkdir -p "$K8S_RUN/cni/net.d"
  cat >"$K8S_RUN/cni/net.d/10-relay-k8s.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "relay-k8s",
  "plugins": [
    {
      "type": "bridge", "bridge": "$K8S_BRIDGE", "isGateway": false, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$K8S_POD_CIDR", "gateway": "$K8S_POD_GATEWAY"}]], "routes": [{"dst": "0.0.0.0/0"}],
               "dataDir": "$K8S_RUN/cni/ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

node_network_remove() {
  ip link del "$K8S_BRIDGE" 2>/dev/null || true
}

# node_pause_image builds the sandbox image (deploy/k8s/pause) as an
# archive containerd imports.
node_pause_image() {
  (
    cd "$STACK_REPO_DIR/deploy"
    CGO_ENABLED=0 go build -trimpath -o "$K8S_RUN/pause" ./k8s/pause
    go run ./k8s/binimage -bin "$K8S_RUN/pause" -path /pause -name "$K8S_PAUSE_IMAGE" -out "$K8S_RUN/pause.tar"
  ) || die "could not build the pause image"
}

# node_containerd writes containerd's configuration: its state and the
# pods' network namespaces under $K8S_RUN, runc with its own root, the
# CNI bridge, no image pulls of the sandbox (it is imported), and
# restrict_oom_score_adj: this machine's capability bounding set lacks
# CAP_SYS_RESOURCE, so runc may not lower a score.
node_containerd() {
  cat >"$K8S_RUN/containerd.toml" <<EOF
version = 3
root = "$K8S_RUN/containerd/root"
state = "$K8S_RUN/containerd/state"

[grpc]
  address = "$K8S_CONTAINERD_SOCK"

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '$K8S_PAUSE_IMAGE'

  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        disable_pause_image_pull = true
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '$STACK_BIN_DIR/runc'
          Root = '$K8S_RUNC_ROOT'
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['$STACK_BIN_DIR/cni']
      conf_dir = '$K8S_RUN/cni/net.d'

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'

  # Nothing outside the cluster's directory: no NRI socket (it would
  # replace another runtime's), no /opt/containerd.
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.internal.v1.opt']
    path = '$K8S_RUN/opt'
EOF
}

# node_dns: CoreDNS on the node's address, answering for cluster.local
# from the API server and forwarding the rest to the host's resolver, and
# the kube-dns Service at the kubelet's clusterDNS address, whose one
# endpoint is the node (kube-proxy carries the pods' queries to it).
node_dns() {
  cat >"$K8S_RUN/Corefile" <<EOF
.:53 {
    bind $K8S_NODE_IP
    errors
    health 127.0.0.1:$K8S_DNS_HEALTH_PORT
    ready 127.0.0.1:$K8S_DNS_READY_PORT
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $K8S_ADMIN_KUBECONFIG relay-k8s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    forward . /etc/resolv.conf
    cache 5
}
EOF
  kubectl_admin apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $K8S_DNS_IP
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-node
  namespace: kube-system
  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: relay-k8s}
addressType: IPv4
ports:
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
endpoints:
- addresses: ["$K8S_NODE_IP"]
  conditions: {ready: true}
EOF
}

node_proxy_config() {
  cat >"$K8S_RUN/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $K8S_DIR/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: $K8S_POD_CIDR
hostnameOverride: $K8S_NODE_NAME
bindAddress: $K8S_NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$K8S_NODE_IP/32"]
# 0: leave this machine's conntrack settings as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
}

# node_kubelet_config: cgroup v1 with cgroupfs (this machine has no
# cgroup v2), no OOM score change (no CAP_SYS_RESOURCE), the node's
# address for logs and exec, low eviction thresholds so that a shared
# disk does not evict the tests' pods (the eviction test asks for its own),
# pods synced every 10 s (a minute by default), so that an updated
# Secret reaches the mounted files within seconds (the rotation test),
# and the volumes' usage measured every 10–20 s (1–2 minutes by default),
# so that the kubelet evicts a pod whose emptyDir outgrew its sizeLimit
# within half a minute (the fault test).
node_kubelet_config() {
  cat >"$K8S_RUN/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $K8S_NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $K8S_PKI/ca.pem}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
oomScoreAdj: 0
failSwapOn: false
containerRuntimeEndpoint: unix://$K8S_CONTAINERD_SOCK
clusterDNS: [$K8S_DNS_IP]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard:
  memory.available: 200Mi
  nodefs.available: 2%
  imagefs.available: 2%
  nodefs.inodesFree: 2%
imageGCHighThresholdPercent: 100
serializeImagePulls: false
syncFrequency: 10s
volumeStatsAggPeriod: 10s
# The pods' logs and the volume plugins under the cluster's directory, not
# /var/log/pods and /usr/libexec/kubernetes.
podLogsDir: $K8S_RUN/pod-logs
volumePluginDir: $K8S_RUN/volume-plugins
EOF
}

# node_containers_stop kills every container runc runs for the node and
# the shims that hold them.
node_containers_stop() {
  local id
  if [[ -d "$K8S_RUNC_ROOT" ]]; then
    while IFS= read -r id; do
      "$STACK_BIN_DIR/runc" --root "$K8S_RUNC_ROOT/k8s.io" kill "$id" KILL 2>/dev/null || true
      "$STACK_BIN_DIR/runc" --root "$K8S_RUNC_ROOT/k8s.io" delete -f "$id" 2>/dev/null || true
    done < <("$STACK_BIN_DIR/runc" --root "$K8S_RUNC_ROOT/k8s.io" list -q 2>/dev/null)
  fi
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $K8S_CONTAINERD_SOCK" 2>/dev/null || true
}

# node_unmount: every mount under the cluster's directory (overlay
# snapshots, secrets and tokens, network namespaces), deepest first.
node_unmount() {
  local m
  while IFS= read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(findmnt -rn -o TARGET | awk -v p="$K8S_DIR/" 'index($0, p) == 1' | sort -r)
}

# node_iptables_clean removes the chains kube-proxy, the kubelet and the
# CNI plugins made (KUBE-*, CNI-*) and the rules that jump to them.
node_iptables_clean() {
  local ipt table rule chain
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for table in filter nat mangle; do
      while IFS= read -r rule; do
        # shellcheck disable=SC2086 # the rule is words to pass as they are
        eval "$ipt -t $table -D ${rule#-A }" 2>/dev/null || true
      done < <("$ipt" -t "$table" -S 2>/dev/null | grep -E '^-A ' | grep -E -- '-j (KUBE-|CNI-)' | grep -vE '^-A (KUBE-|CNI-)')
      while IFS= read -r chain; do
        "$ipt" -t "$table" -F "$chain" 2>/dev/null || true
      done < <("$ipt" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(\(KUBE\|CNI\)-[^ ]*\)$/\1/p')
      while IFS= read -r chain; do
        "$ipt" -t "$table" -X "$chain" 2>/dev/null || true
      done < <("$ipt" -t "$table" -S 2>/dev/null | sed -n 's/^-N \(\(KUBE\|CNI\)-[^ ]*\)$/\1/p')
    done
  done
}

# node_cgroups_remove: the kubelet's kubepods hierarchy in every v1
# controller, deepest first, once its processes are gone.
node_cgroups_remove() {
  local d
  for d in /sys/fs/cgroup/*/kubepods; do
    [[ -d "$d" ]] || continue
    find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

# node_leftovers removes what the kubelet and the CNI library write
# outside the cluster's directory whatever they are told: the
# /var/log/containers links into this cluster's pod logs, and the CNI
# result cache of this cluster's network (and of the loopback of the same
# containers).
node_leftovers() {
  find /var/log/containers -maxdepth 1 -lname "$K8S_RUN/*" -delete 2>/dev/null || true
  local f id
  for f in /var/lib/cni/results/relay-k8s-*; do
    [[ -e "$f" ]] || continue
    id="${f#/var/lib/cni/results/relay-k8s-}"
    id="${id%-*}"
    rm -f "$f" "/var/lib/cni/results/cni-loopback-$id-lo"
  done
}

# node_foreign_state: this machine has KUBE-*/CNI-* chains or a kubepods
# cgroup (before this cluster has started: someone else's).
node_foreign_state() {
  local ipt table
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for table in filter nat mangle; do
      "$ipt" -t "$table" -S 2>/dev/null | grep -qE '^-N (KUBE|CNI)-' && return 0
    done
  done
  compgen -G '/sys/fs/cgroup/*/kubepods' >/dev/null
}
