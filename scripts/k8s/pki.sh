# shellcheck shell=bash
# The cluster's credentials (cluster.sh), written once into $K8S_PKI and
# again when the node's address changes: a CA, the API server's serving
# certificate (the node's address, the API Service's address and names),
# its client certificate for the kubelet, the service-account signing
# key, and one token per component (a static token file) in the
# kubeconfigs the components and the tests use. Sourced after common.sh.

k8s_pki() {
  local stamp="$K8S_NODE_IP $K8S_API_SERVICE_IP $K8S_API_PORT"
  [[ -f "$K8S_PKI/stamp" && "$(<"$K8S_PKI/stamp")" == "$stamp" ]] && return 0
  command -v openssl >/dev/null || die "openssl is missing; $STACK_INSTALL_HINT"
  log "writing the cluster's CA, certificates and tokens into $K8S_PKI"
  local tmp="$K8S_PKI.tmp"
  rm -rf "$tmp"
  mkdir -p "$tmp"
  (
    cd "$tmp"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj "/CN=relay test cluster CA" 2>/dev/null
    cat >apiserver.ext <<EOF
subjectAltName=IP:$K8S_NODE_IP,IP:$K8S_API_SERVICE_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth
EOF
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in apiserver.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out apiserver.pem -days 3650 -extfile apiserver.ext 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr \
      -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
    openssl x509 -req -in kubelet-client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out kubelet-client.pem -days 3650 -extfile client.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr ./*.ext ./*.srl
    # token,user,uid,"groups"
    {
      printf '%s,admin,admin,"system:masters"\n' "$(openssl rand -hex 16)"
      printf '%s,system:node:%s,kubelet,"system:nodes"\n' "$(openssl rand -hex 16)" "$K8S_NODE_NAME"
      printf '%s,system:kube-proxy,kube-proxy\n' "$(openssl rand -hex 16)"
      printf '%s,system:kube-scheduler,kube-scheduler\n' "$(openssl rand -hex 16)"
      printf '%s,system:kube-controller-manager,kube-controller-manager\n' "$(openssl rand -hex 16)"
    } >tokens.csv
    printf '%s\n' "$stamp" >stamp
  )
  rm -rf "$K8S_PKI"
  mv "$tmp" "$K8S_PKI"
  local who
  for who in admin kubelet kube-proxy kube-scheduler kube-controller-manager; do
    (umask 077 && k8s_kubeconfig "$who" >"$K8S_DIR/$who.kubeconfig")
  done
}

# k8s_kubeconfig WHO: a kubeconfig with WHO's token (the third column of
# tokens.csv), for the API server at the node's address.
k8s_kubeconfig() {
  local token
  token="$(awk -F, -v who="$1" '$3 == who { print $1 }' "$K8S_PKI/tokens.csv")"
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
- name: relay-k8s
  cluster:
    server: https://$K8S_NODE_IP:$K8S_API_PORT
    certificate-authority: $K8S_PKI/ca.pem
users:
- name: $1
  user:
    token: $token
contexts:
- name: relay-k8s
  context:
    cluster: relay-k8s
    user: $1
current-context: relay-k8s
EOF
}
