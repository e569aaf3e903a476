#!/usr/bin/env bash
# make image: relay's container image, built without a container engine
# (deploy/image, on go-containerregistry) from the static binaries of
# scripts/release.sh: dist/oci, an OCI image layout with one index for the
# architectures built and relay's SBOM attached, and
# dist/relay-image-linux-<arch>.tar for `docker load`.
#
# usage: image.sh [amd64] [arm64]   (default: both)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

arches=("$@")
((${#arches[@]})) || arches=(amd64 arm64)
scripts/release.sh "${arches[@]}"
# shellcheck source=scripts/version.sh
. scripts/version.sh

out="$(cd "$OUT" && pwd)"
bins=()
for a in "${arches[@]}"; do
  bins+=(-bin "$a=$out/relay-linux-$a")
done
first="$out/relay-linux-${arches[0]}"
# What is linked into relay, as relay says (librdkafka and the C libraries
# its static build bundles, with their versions), for the SBOM.
run_release "${arches[0]}" "$first" version -o json > "$out/relay-version.json"
(cd deploy && go run ./image -version "$VERSION" -revision "$COMMIT" -linked "$out/relay-version.json" -out "$out" "${bins[@]}")

# Every artefact, with its digest; then the check that they all name
# VERSION and that the SBOM names every C library the librdkafka archive
# links in (nm).
(cd "$out" && sha256sum relay-linux-* relay-image-linux-*.tar "relay-$VERSION.tgz" RELEASE-NOTES.md > SHA256SUMS)
kafka_dir="$(go list -m -f '{{.Dir}}' github.com/confluentinc/confluent-kafka-go/v2)"
archive="$kafka_dir/kafka/librdkafka_vendor/librdkafka_musl_linux_${arches[0]}.a"
(cd deploy && go run ./releasecheck -dist "$out" -version "$VERSION" -archive "$archive")
