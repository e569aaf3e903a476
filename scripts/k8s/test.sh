#!/usr/bin/env bash
# make test-k8s: relay's chart on the real single-node Kubernetes of
# cluster.sh. Builds relay's image for this machine (make image's
# scripts/image.sh, one architecture), starts the cluster and the
# project's stack with a broker listener at the node's address, imports
# the image into the node, and runs the tests of deploy/k8s through
# client-go and Helm's SDK. The cluster is stopped at the end, whatever
# happened (RELAY_K8S_KEEP=1 leaves it up to look at); the stack stays up.
#
# usage: test.sh [go test flags, e.g. -run TestChart]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# shellcheck source-path=SCRIPTDIR source=../stack/common.sh
source scripts/stack/common.sh

start=$SECONDS
scripts/install.sh k8s
arch="$(go env GOARCH)"
scripts/image.sh "$arch"
# shellcheck source=../version.sh
. scripts/version.sh

if [[ "${RELAY_K8S_KEEP:-}" != 1 ]]; then
  trap 'scripts/k8s/cluster.sh stop' EXIT
fi
scripts/k8s/cluster.sh start
node="$(scripts/k8s/cluster.sh node-ip)"
RELAY_STACK_KAFKA_NODE_ADDR="$node" scripts/stack/up.sh
scripts/k8s/cluster.sh import dist/oci relay.local/relay
# The same image under a second tag: the upgrade the fault test rolls.
scripts/k8s/cluster.sh tag "relay.local/relay:$VERSION" "relay.local/relay:$VERSION-next"
# The console's sidecar: oauth2-proxy, built by build.sh from its module,
# as an image of its one static program.
stack_dir="$(realpath -m "$RELAY_STACK_DIR")"
bin_dir="$stack_dir/bin"
proxy_version="$(go_tool_version scripts/tools/oauth2-proxy github.com/oauth2-proxy/oauth2-proxy/v7)"
[[ -n "$proxy_version" ]] || { echo "test-k8s: no oauth2-proxy version in scripts/tools/oauth2-proxy/go.mod" >&2; exit 1; }
proxy_image="relay.local/oauth2-proxy:$proxy_version"
proxy_tar="$stack_dir/oauth2-proxy-image.tar" # overwritten by the next run
(cd deploy && go run ./k8s/binimage -bin "$bin_dir/oauth2-proxy" -path /bin/oauth2-proxy -user 65532:65532 \
  -name "$proxy_image" -out "$proxy_tar")
scripts/k8s/cluster.sh import "$proxy_tar"
echo "test-k8s: ready in $((SECONDS - start))s"

kubeconfig="$(scripts/k8s/cluster.sh kubeconfig)"
kubelet_dir="$(scripts/k8s/cluster.sh kubelet-dir)"
(
  cd deploy
  RELAY_TEST_K8S=1 RELAY_TEST_K8S_KUBECONFIG="$kubeconfig" \
    RELAY_TEST_K8S_IMAGE="relay.local/relay:$VERSION" RELAY_TEST_K8S_NEXT_TAG="$VERSION-next" \
    RELAY_TEST_K8S_OAUTH2_PROXY_IMAGE="$proxy_image" \
    RELAY_TEST_K8S_RELAY="$PWD/../dist/relay-linux-$arch" RELAY_STACK_KAFKA_NODE_ADDR="$node" \
    RELAY_TEST_K8S_NODE_IP="$node" RELAY_TEST_K8S_KUBELET_DIR="$kubelet_dir" \
    RELAY_TEST_K8S_PUSHGATEWAY="$bin_dir/pushgateway" \
    RELAY_TEST_K8S_KAFKA="$node:${RELAY_STACK_KAFKA_NODE_PORT:-9099}" \
    go test -count=1 -timeout 40m -v "$@" ./k8s/
)
echo "test-k8s: passed in $((SECONDS - start))s"
